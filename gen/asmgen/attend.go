package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The decoder's attention row (kernels.AttendFunc, ScoresFunc) at the
// AVX-512 and AVX2 levels, over a run-time number t of cached positions.
//
// Attend makes three passes. The logits' maximum: whole vectors, the tail
// one float at a time. The weights e_j = e^(b_j − max) (the softmax
// kernels' exponential, exp.go), stored over b and summed lane-wise: whole
// vectors, then a masked tail whose other lanes are neither stored nor
// summed. The weighted sum of the rows of v, column block by column block
// (up to attendBlock vectors, the row's last vector masked when W is no
// multiple of the vector width), a broadcast e_j and a fused multiply-add
// per vector and row; a block of at most half attendBlock vectors takes
// the rows two at a time into two sets of accumulators (added at the end),
// so that enough sums are in flight. The sums are scaled by 1/s.
//
// Scores reads the t key rows front to back, one contiguous stream as
// Attend's values: per row, q·k_j as products of q's vectors (held in
// registers) with the row's, the row's last vector masked when DH is no
// multiple of the vector width, summed alternately in two accumulators
// (even and odd vectors), which are added, then summed across lanes and
// scaled into b[j].

// attendBlock is the most vectors of a column block of Attend's weighted
// sum (accumulators: 8 of AVX2's 16 registers).
const attendBlock = 8

func emitAttend(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	W, V := op.AW, k.W
	t := k.gp(c.Param("t"))
	b := k.gp(c.Param("b").Base())
	v := k.gp(c.Param("v").Base())
	y := k.gp(c.Param("y").Base())
	result := k.addr(c.ReturnIndex(0), "result")

	lGo := k.lbl("go")
	c.TESTQ(t, t)
	c.JNZ(synRef(lGo))
	z := c.XMM()
	c.VXORPS(z, z, z)
	c.VMOVSS(z, result)
	k.ret()
	k.label(lGo)

	// The maximum.
	mx, sx := k.vec(), c.XMM()
	c.VBROADCASTSS(synMem(b, 0), mx)
	c.VMOVSS(synMem(b, 0), sx)
	n, p := c.GP64(), c.GP64()
	c.MOVQ(t, n)
	c.MOVQ(b, p)
	lMax, lMaxTail, lMaxDone := k.lbl("max"), k.lbl("maxtail"), k.lbl("maxdone")
	k.label(lMax)
	c.CMPQ(n, synImm(V))
	c.JLT(synRef(lMaxTail))
	c.VMAXPS(synMem(p, 0), mx, mx)
	c.ADDQ(synImm(4*V), p)
	c.SUBQ(synImm(V), n)
	c.JMP(synRef(lMax))
	k.label(lMaxTail)
	c.TESTQ(n, n)
	c.JZ(synRef(lMaxDone))
	c.VMAXSS(synMem(p, 0), sx, sx)
	c.ADDQ(synImm(4), p)
	c.DECQ(n)
	c.JMP(synRef(lMaxTail))
	k.label(lMaxDone)
	k.allReduce(mx, func(a, b, d operand.Op) { c.VMAXPS(a, b, d) })
	c.VMAXSS(mx.AsX(), sx, sx)
	c.VBROADCASTSS(sx, mx)

	// The weights and their sum.
	sv := k.vec()
	k.zero(sv)
	c.MOVQ(t, n)
	c.MOVQ(b, p)
	weights := func(mask reg.Register) {
		x := k.vec()
		k.loadM(synMem(p, 0), mask, x)
		c.VSUBPS(mx, x, x)
		e := k.exp(x)
		if mask != nil {
			if k.avx512() {
				c.VMOVAPS_Z(e, mask, e)
			} else {
				c.VANDPS(mask, e, e)
			}
		}
		k.storeM(e, mask, synMem(p, 0))
		c.VADDPS(e, sv, sv)
	}
	lExp, lExpTail, lExpDone := k.lbl("exp"), k.lbl("exptail"), k.lbl("expdone")
	k.label(lExp)
	c.CMPQ(n, synImm(V))
	c.JLT(synRef(lExpTail))
	weights(nil)
	c.ADDQ(synImm(4*V), p)
	c.SUBQ(synImm(V), n)
	c.JMP(synRef(lExp))
	k.label(lExpTail)
	c.TESTQ(n, n)
	c.JZ(synRef(lExpDone))
	weights(k.dynLanes(n))
	k.label(lExpDone)
	s := k.hsum(sv)
	c.VMOVSS(s, result)
	inv := c.XMM()
	c.VMOVSS(k.konst("attend_one", 1), inv)
	c.VDIVSS(s, inv, inv)
	scale := k.vec()
	c.VBROADCASTSS(inv, scale)

	// The weighted sum, column block by column block.
	nvAll := (W + V - 1) / V
	var tailMask reg.Register
	if r := W % V; r != 0 {
		tailMask = k.lanes(r)
	}
	for v0 := 0; v0 < nvAll; v0 += attendBlock {
		nv := min(attendBlock, nvAll-v0)
		maskOf := func(u int) reg.Register {
			if v0+u == nvAll-1 {
				return tailMask
			}
			return nil
		}
		sets := 1
		if 2*nv <= attendBlock {
			sets = 2
		}
		acc := make([][]reg.VecVirtual, sets)
		for st := range acc {
			acc[st] = k.vecs(nv)
			for _, a := range acc[st] {
				k.zero(a)
			}
		}
		pj, pv := c.GP64(), c.GP64()
		c.MOVQ(b, pj)
		c.LEAQ(synMem(v, 4*v0*V), pv)
		c.MOVQ(t, n)
		tmp := k.vec()
		// row adds e_j·v_j into set st: e_j at byte de of pj, v_j at
		// byte dv of pv.
		row := func(st, de, dv int) {
			e := k.vec()
			c.VBROADCASTSS(synMem(pj, de), e)
			for u := range nv {
				m := synMem(pv, dv+4*u*V)
				if mk := maskOf(u); mk != nil {
					k.loadM(m, mk, tmp)
					c.VFMADD231PS(tmp, e, acc[st][u])
				} else {
					c.VFMADD231PS(m, e, acc[st][u])
				}
			}
		}
		lRow, lOne, lSum := k.lbl("row"), k.lbl("one"), k.lbl("sum")
		if sets == 2 {
			k.label(lRow)
			c.CMPQ(n, synImm(2))
			c.JLT(synRef(lOne))
			row(0, 0, 0)
			row(1, 4, 4*W)
			c.ADDQ(synImm(8), pj)
			c.ADDQ(synImm(8*W), pv)
			c.SUBQ(synImm(2), n)
			c.JMP(synRef(lRow))
			k.label(lOne)
			c.TESTQ(n, n)
			c.JZ(synRef(lSum))
			row(0, 0, 0)
			k.label(lSum)
			for u := range nv {
				c.VADDPS(acc[1][u], acc[0][u], acc[0][u])
			}
		} else {
			k.label(lRow)
			row(0, 0, 0)
			c.ADDQ(synImm(4), pj)
			c.ADDQ(synImm(4*W), pv)
			c.DECQ(n)
			c.JNZ(synRef(lRow))
		}
		for u := range nv {
			c.VMULPS(scale, acc[0][u], acc[0][u])
			k.storeM(acc[0][u], maskOf(u), synMem(y, 4*(v0+u)*V))
		}
	}
	k.ret()
}

func emitScores(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	DH, V := f.Config.DH, k.W
	t := k.gp(c.Param("t"))
	q := k.gp(c.Param("q").Base())
	kp := k.gp(c.Param("k").Base())
	b := k.gp(c.Param("b").Base())
	scale := k.bcastParam("scale")
	nv := (DH + V - 1) / V
	var mask reg.Register
	if r := DH % V; r != 0 {
		mask = k.lanes(r)
	}
	maskOf := func(u int) reg.Register {
		if u == nv-1 {
			return mask
		}
		return nil
	}
	// q's vectors, in registers up to scoresQRegs (the others are read
	// from memory).
	qr := k.vecs(min(nv, scoresQRegs(k)))
	for u := range qr {
		k.loadM(synMem(q, 4*u*V), maskOf(u), qr[u])
	}
	lDone := k.lbl("done")
	c.TESTQ(t, t)
	c.JZ(synRef(lDone))
	lRow := k.lbl("row")
	k.label(lRow)
	acc := []reg.VecVirtual{k.vec(), k.vec()}
	tmp := k.vec()
	for u := range nv {
		a := acc[u%2]
		m := synMem(kp, 4*u*V)
		switch {
		case u < len(qr) && maskOf(u) == nil && u < 2:
			c.VMULPS(m, qr[u], a)
		case u < len(qr) && maskOf(u) == nil:
			c.VFMADD231PS(m, qr[u], a)
		default:
			k.loadM(m, maskOf(u), tmp)
			var qm operand.Op = synMem(q, 4*u*V)
			switch {
			case u < len(qr):
				qm = qr[u]
			case maskOf(u) != nil: // q's last floats only: no read past q
				qt := k.vec()
				k.loadM(synMem(q, 4*u*V), maskOf(u), qt)
				qm = qt
			}
			if u < 2 {
				c.VMULPS(qm, tmp, a)
			} else {
				c.VFMADD231PS(qm, tmp, a)
			}
		}
	}
	if nv > 1 {
		c.VADDPS(acc[1], acc[0], acc[0])
	}
	s := k.hsum(acc[0])
	c.VMULSS(scale.AsX(), s, s)
	c.VMOVSS(s, synMem(b, 0))
	c.ADDQ(synImm(4*DH), kp)
	c.ADDQ(synImm(4), b)
	c.DECQ(t)
	c.JNZ(synRef(lRow))
	k.label(lDone)
	k.ret()
}

// scoresQRegs is how many of q's vectors Scores keeps in registers: all
// but those of the accumulators, the temporary, the scale, the tail's
// mask and hsum on AVX2 (16 in all: 8 for q), up to 16 on AVX-512.
func scoresQRegs(k *simd) int {
	if k.avx512() {
		return 16
	}
	return 8
}
