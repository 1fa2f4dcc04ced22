package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The decoder's linear layer on t rows (kernels.GemvFunc) at the AVX-512
// and AVX2 levels. The weight is packed in column blocks of GemvCols
// (4 ZMM or 8 YMM of accumulators), each block one contiguous stream of
// K rows of its columns, so that a row of x reads the whole weight once,
// front to back, at the memory's pace. Per block and per run of GemvKC
// inner indices, each column's sum is one accumulator lane from 0 over p
// in increasing order (a broadcast of x[p], a fused multiply-add per
// vector of the block's row p), as the GEMM micro-kernel forms its sums;
// the runs' sums are added into y in order, then the bias. The block's
// vectors are independent accumulators; the loop over p is unrolled
// gemvUnroll times. A block narrower than GemvCols (N's tail) ends in a
// masked vector: its loads read only the block's own floats.

// gemvUnroll is the unrolling of the loop over the inner index.
const gemvUnroll = 4

func emitGemv(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	K, N, C, KC, W := op.GK, op.GN, kernels.GemvCols, kernels.GemvKC, k.W
	full, tail := N/C, N%C

	t := k.gp(c.Param("t"))
	x := k.gp(c.Param("x").Base())
	w := k.gp(c.Param("w").Base())
	bias := k.gp(c.Param("bias").Base())
	nb := k.gp(c.Param("bias").Len())
	y := k.gp(c.Param("y").Base())
	var tailMask reg.Register
	if r := tail % W; r != 0 {
		tailMask = k.lanes(r)
	}
	lDone := k.lbl("done")
	c.TESTQ(t, t)
	c.JZ(synRef(lDone))

	// block emits one column block of cols columns at wb (bytes jo into
	// y's row and bias).
	block := func(cols int, wb, jo reg.GPVirtual) {
		nv := (cols + W - 1) / W
		var mask reg.Register
		if cols%W != 0 {
			mask = tailMask
		}
		maskOf := func(v int) reg.Register {
			if v == nv-1 {
				return mask
			}
			return nil
		}
		acc := k.vecs(nv)
		xb := k.vec()
		tmp := k.vec()
		wp, pi := c.GP64(), c.GP64()
		// step is one inner index: acc += x[p]·w's row p, at byte
		// displacement d of wp and e of x+pi.
		step := func(d, e int) {
			c.VBROADCASTSS(synMemIdx(x, e, pi, 1), xb)
			for v := range nv {
				m := synMem(wp, d+4*v*W)
				if mv := maskOf(v); mv != nil {
					k.loadM(m, mv, tmp)
					c.VFMADD231PS(tmp, xb, acc[v])
				} else {
					c.VFMADD231PS(m, xb, acc[v])
				}
			}
		}
		c.MOVQ(wb, wp)
		c.XORQ(pi, pi)
		for p0 := 0; p0 < K; p0 += KC {
			n := min(KC, K-p0)
			for v := range nv {
				k.zero(acc[v])
			}
			if loops := n / gemvUnroll; loops > 0 {
				cnt := c.GP64()
				c.MOVQ(synImm(loops), cnt)
				l := k.lbl("p")
				k.label(l)
				for u := range gemvUnroll {
					step(4*u*cols, 4*u)
				}
				c.ADDQ(synImm(4*gemvUnroll*cols), wp)
				c.ADDQ(synImm(4*gemvUnroll), pi)
				c.DECQ(cnt)
				c.JNZ(synRef(l))
			}
			for u := range n % gemvUnroll {
				step(4*u*cols, 4*u)
			}
			if r := n % gemvUnroll; r > 0 {
				c.ADDQ(synImm(4*r*cols), wp)
				c.ADDQ(synImm(4*r), pi)
			}
			// y = s (first run), y += s (the others), then + bias.
			ym := func(v int) operand.Mem { return synMemIdx(y, 4*v*W, jo, 1) }
			if p0 > 0 {
				for v := range nv {
					k.loadM(ym(v), maskOf(v), tmp)
					c.VADDPS(acc[v], tmp, acc[v])
				}
			}
			if p0+KC >= K {
				lNoBias := k.lbl("nobias")
				c.TESTQ(nb, nb)
				c.JZ(synRef(lNoBias))
				for v := range nv {
					k.loadM(synMemIdx(bias, 4*v*W, jo, 1), maskOf(v), tmp)
					c.VADDPS(tmp, acc[v], acc[v])
				}
				k.label(lNoBias)
			}
			for v := range nv {
				k.storeM(acc[v], maskOf(v), ym(v))
			}
		}
	}

	lRow := k.lbl("row")
	k.label(lRow)
	wb, jo := c.GP64(), c.GP64()
	c.MOVQ(w, wb)
	c.XORQ(jo, jo)
	if full > 0 {
		nblk := c.GP64()
		c.MOVQ(synImm(full), nblk)
		l := k.lbl("blk")
		k.label(l)
		block(C, wb, jo)
		c.ADDQ(synImm(4*C*K), wb)
		c.ADDQ(synImm(4*C), jo)
		c.DECQ(nblk)
		c.JNZ(synRef(l))
	}
	if tail > 0 {
		block(tail, wb, jo)
	}
	c.ADDQ(synImm(4*K), x)
	c.ADDQ(synImm(4*N), y)
	c.DECQ(t)
	c.JNZ(synRef(lRow))
	k.label(lDone)
	k.ret()
}
