package asmgen

import (
	"math/bits"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The backward at long rows (N ≥ svLongN): its gradient rows as a
// register-blocked product with V transposed, and dv's stack copy.
//
// At short rows gRows computes g_ij = dy_i·v_j in blocks of ri × rj pairs,
// W dot products over the head's columns summed by a shuffle tree
// (reduceW): at DH 64 that is 45 shuffles and adds for 64 FMAs, and V's
// head rows, D floats apart, are read in pieces of a row. At long rows the
// kernel first copies V's head, transposed, into panels of P = 2W keys
// (transposeV: panel p holds v_jc at c·P + j − p·P, 8 KiB at DH 64, read
// front to back), and gPanels computes each panel's g for TR rows at once:
// per column c, two vectors of the panel's row c and TR broadcasts of
// dy_ic, 2·TR FMAs and no reductions, each row's result two vectors of
// consecutive columns. The copy is DH·t scalar moves: about 2% of the
// kernel's time at N 2048 in its profile.
//
// dv's head rows are D floats apart too, and dvRows reads and writes them
// once per block of rows: at long rows they are accumulated in a stack
// copy of stride DH (headRowPtr, headStride) and copied out at the end
// (copyDVOut). The stack buffers are addressed from a whole line
// (lineAddr). At N 2048, DH 64 the frame is 1.1 MiB.

// svLongRows is the rows per block of the backward at long rows: the rows
// that share each pass over the panels and over dv's copy, whose rows of a
// (64 KiB at N 2048) and gradient rows stay in cache for dvRows and
// finishRow. Measured with BenchmarkLongRows at N 2048: 8 rows beat 16 by
// about 1.5 points (AVX-512) and 3 (AVX2); 32 lost 5–7.
const svLongRows = 8

// panelKeys is P, the keys of one panel of the transposed V.
func (s *svKit) panelKeys() int { return 2 * s.W }

// panelRows is TR, the rows of g one pass over a panel computes: 2·TR
// accumulators, two panel vectors and a broadcast fit the register file.
func (s *svKit) panelRows() int {
	if s.isa == kernels.AVX512 {
		return 8
	}
	return 4
}

// gStride is the row stride, in floats, of the gradient rows buffer at
// long rows: N rounded up to whole panels.
func (s *svKit) gStride() int {
	P := s.panelKeys()
	return (s.f.Config.N + P - 1) / P * P
}

// transposeV emits vt = V's head by panels of P keys: vt[p·P·DH + c·P + q]
// = v[(p·P+q)·D + c] for p·P+q < t, and 0 for the last panel's keys ≥ t.
func (s *svKit) transposeV(vt operand.Mem) {
	c, D, P, DH := s.c, s.f.Config.D, s.panelKeys(), s.dh
	t, end, j := c.GP64(), c.GP64(), c.GP64()
	c.Load(c.Param("t"), t)
	c.LEAQ(operand.Mem{Base: t, Disp: P - 1}, end)
	c.ANDQ(imm(^(P - 1)), end)
	c.XORQ(j, j)
	vp := s.param("v")
	loop, zeros, done := s.lbl("svt_keys"), s.lbl("svt_zeros"), s.lbl("svt_done")
	c.Label(loop)
	c.CMPQ(j, end)
	c.JGE(operand.LabelRef(done))
	dst, q, p := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(j, q)
	c.ANDQ(imm(P-1), q)
	c.MOVQ(j, p)
	c.SHRQ(operand.U8(bits.TrailingZeros(uint(P))), p)
	c.IMUL3Q(imm(4*P*DH), p, p)
	s.lineAddr(vt, dst)
	c.ADDQ(p, dst)
	c.LEAQ(operand.Mem{Base: dst, Index: q, Scale: 4}, dst)
	c.CMPQ(j, t)
	c.JGE(operand.LabelRef(zeros))
	x := c.GP32()
	for cc := 0; cc < DH; cc++ {
		c.MOVL(operand.Mem{Base: vp, Disp: 4 * cc}, x)
		c.MOVL(x, operand.Mem{Base: dst, Disp: 4 * P * cc})
	}
	c.ADDQ(imm(4*D), vp)
	c.INCQ(j)
	c.JMP(operand.LabelRef(loop))
	c.Label(zeros)
	for cc := 0; cc < DH; cc++ {
		c.MOVL(operand.U32(0), operand.Mem{Base: dst, Disp: 4 * P * cc})
	}
	c.INCQ(j)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
}

// gPanels emits the gradient rows i0 … i0+rb−1 to gbuf (row stride
// gStride) for the keys j < i0+rb (j < t for a bidirectional spec), rounded up to whole panels (keys past a
// row's diagonal, or ≥ t with v taken as 0, are computed and not read),
// from the transposed V at vt; rb is a multiple of panelRows. Each panel
// also asks for the block's lines of a under it, which dvRows and
// finishRow read next, and of db, which finishRow writes: when db is a
// buffer of its own, a store to a line not in cache first reads it from
// memory.
func (s *svKit) gPanels(i0 reg.GPVirtual, rb int, gbuf, vt operand.Mem) {
	c, N, D, W := s.c, s.f.Config.N, s.f.Config.D, s.W
	P, TR, GS, DH := s.panelKeys(), s.panelRows(), s.gStride(), s.dh
	np := c.GP64()
	if s.f.Config.Bidirectional { // every key j < t
		c.Load(c.Param("t"), np)
		c.ADDQ(imm(P-1), np)
	} else {
		c.LEAQ(operand.Mem{Base: i0, Disp: rb + P - 1}, np)
	}
	c.SHRQ(operand.U8(bits.TrailingZeros(uint(P))), np)
	vtp, gp := c.GP64(), c.GP64()
	s.lineAddr(vt, vtp)
	s.lineAddr(gbuf, gp)
	ap, dbp, dyp := s.rowPtr("a", i0, N), s.rowPtr("db", i0, N), s.rowPtr("dy", i0, D)
	loop := s.lbl("svg_panels")
	c.Label(loop)
	for r := 0; r < rb; r++ {
		for l := 0; l < 4*P; l += 64 {
			c.PREFETCHT1(operand.Mem{Base: ap, Disp: 4*N*r + l})
			c.PREFETCHT1(operand.Mem{Base: dbp, Disp: 4*N*r + l})
		}
	}
	for tile := 0; tile < rb/TR; tile++ {
		acc := make([][2]reg.VecVirtual, TR)
		for r := range acc {
			for k := range acc[r] {
				acc[r][k] = s.vec()
				s.zero(acc[r][k])
			}
		}
		for cc := 0; cc < DH; cc++ {
			w0, w1 := s.vec(), s.vec()
			c.VMOVUPS(operand.Mem{Base: vtp, Disp: 4 * P * cc}, w0)
			c.VMOVUPS(operand.Mem{Base: vtp, Disp: 4*P*cc + 4*W}, w1)
			for r := 0; r < TR; r++ {
				b := s.vec()
				c.VBROADCASTSS(operand.Mem{Base: dyp, Disp: 4*D*(tile*TR+r) + 4*cc}, b)
				c.VFMADD231PS(w0, b, acc[r][0])
				c.VFMADD231PS(w1, b, acc[r][1])
			}
		}
		for r := 0; r < TR; r++ {
			for k := 0; k < 2; k++ {
				c.VMOVUPS(acc[r][k], operand.Mem{Base: gp, Disp: 4*GS*(tile*TR+r) + 4*W*k})
			}
		}
	}
	c.ADDQ(imm(4*P*DH), vtp)
	c.ADDQ(imm(4*P), gp)
	c.ADDQ(imm(4*P), ap)
	c.ADDQ(imm(4*P), dbp)
	c.DECQ(np)
	c.JNZ(operand.LabelRef(loop))
}

// copyDVOut emits dv's rows j < t = their stack copy's.
func (s *svKit) copyDVOut() {
	s.copyHeadRows("svb_dvout", s.headRowPtr("dv", s.dvCopy), s.dh, s.param("dv"), s.f.Config.D)
}
