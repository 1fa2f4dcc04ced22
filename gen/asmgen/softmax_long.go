package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The softmax-value kernels at long rows (N ≥ svLongN).
//
// Forward: a block's products read the head rows of V for every key: 512
// KiB at N 2048, rows D floats apart, which for D a multiple of 256 map
// onto a quarter of L2's sets and fill them, so every block read them from
// L3. At long rows the kernel first copies V's head into a stack buffer of
// stride DH (copyV; 512 KiB at N 2048, DH 64, which L2 holds with a block's
// rows), and the products read the copy. A block's rows of b come from
// memory; while its softmax computes exponentials it asks for the next
// block's (pfAhead), which arrive during this block's products. The
// additions are the short rows' kernel's, in its order: the results are
// the same bit for bit.
//
// Backward: at long rows a (16 MiB a head at N 2048) comes from memory,
// and the column pass that computed dv (phase 1) read all of it once more
// than phase 2 does, a line of each row in turn. Here phase 2 computes dv
// too, from the rows of its block while they are in cache (dvRows), into a
// stack copy of stride DH (dv's head rows, D floats apart, fall in a
// quarter of L2's sets), copied out at the end. The additions into each
// dv_j are phase 1's, in its order: dv's bits are the same as the short
// rows' kernel's. Its gradient rows come from a transposed copy of V
// (softmax_panels.go).

// svLongN is the N from which both kernels take their long-row paths.
const svLongN = 1024

// copyV gives the forward its stack copy of V's head rows (a line to
// spare for lineAddr; the frame drops NOSPLIT, so the assembler adds the
// stack check) and emits the copy of rows j < t.
func (s *svKit) copyV() {
	c := s.c
	vc := c.AllocLocal((4*s.dh*s.f.Config.N + 64 + 7) &^ 7)
	c.Attributes(0)
	src, dst := s.param("v"), c.GP64()
	s.lineAddr(vc, dst)
	s.copyHeadRows("sv_vin", src, s.f.Config.D, dst, s.dh)
	s.vCopy = &vc
}

// headStride is the row stride, in floats, of a head's rows: DH in a
// stack copy cp (V's in the forward, dv's in the backward, at long rows),
// D where they lie in their parameter (cp nil).
func (s *svKit) headStride(cp *operand.Mem) int {
	if cp != nil {
		return s.dh
	}
	return s.f.Config.D
}

// headRowPtr returns a pointer to the first head row of parameter name, in
// its stack copy cp when there is one.
func (s *svKit) headRowPtr(name string, cp *operand.Mem) reg.GPVirtual {
	if cp == nil {
		return s.param(name)
	}
	p := s.c.GP64()
	s.lineAddr(*cp, p)
	return p
}

// copyHeadRows emits, for rows i < t, the DH floats at dst + i·ds floats
// = those at src + i·ss (src and dst advance).
func (s *svKit) copyHeadRows(name string, src reg.GPVirtual, ss int, dst reg.GPVirtual, ds int) {
	c := s.c
	i, t := c.GP64(), c.GP64()
	c.XORQ(i, i)
	c.Load(c.Param("t"), t)
	loop, done := s.lbl(name), s.lbl(name+"_done")
	c.Label(loop)
	c.CMPQ(i, t)
	c.JGE(operand.LabelRef(done))
	vv := s.vecs(s.nv)
	var dm reg.Register
	if s.part != 0 {
		dm = s.dhMask()
	}
	s.loadCols(operand.Mem{Base: src}, 0, vv, dm)
	s.storeCols(vv, operand.Mem{Base: dst}, 0)
	c.ADDQ(imm(4*ss), src)
	c.ADDQ(imm(4*ds), dst)
	c.INCQ(i)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
}

// lineAddr emits p = the address of the stack buffer m rounded up to a
// whole 64-byte line (m has 63 bytes to spare): Go's stack is only 8-byte
// aligned, and a vector load or store across two lines costs two.
func (s *svKit) lineAddr(m operand.Mem, p reg.GPVirtual) {
	s.c.LEAQ(m.Offset(63), p)
	s.c.ANDQ(imm(^63), p)
}

// fusedDV reports whether the backward computes dv inside its row passes
// (dvRows), rather than in a first phase of its own over the columns of a:
// at long rows a comes from memory, and the first phase read it once more
// than the row passes, in strides of a row.
func (s *svKit) fusedDV() bool { return s.f.Config.N >= svLongN }

// zeroDV emits dv rows 0 … t−1 = 0, where dvRows then adds each row's terms.
func (s *svKit) zeroDV() {
	c := s.c
	z := s.vec()
	s.zero(z)
	zs := make([]reg.VecVirtual, s.nv)
	for k := range zs {
		zs[k] = z
	}
	dvp, ds := s.headRowPtr("dv", s.dvCopy), s.headStride(s.dvCopy)
	i, t := c.GP64(), c.GP64()
	c.XORQ(i, i)
	c.Load(c.Param("t"), t)
	loop, done := s.lbl("svb_zero"), s.lbl("svb_zero_done")
	c.Label(loop)
	c.CMPQ(i, t)
	c.JGE(operand.LabelRef(done))
	s.storeCols(zs, operand.Mem{Base: dvp}, 0)
	c.ADDQ(imm(4*ds), dvp)
	c.INCQ(i)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
}

// dvRows emits dv_j += Σ_r a_{i0+r, j} dy_{i0+r} for rows r = 0 … rb−1 and
// every key j ≤ i0+r, into dv's stack copy, before finishRow overwrites
// those rows of a (db may alias a). Per column chunk, the keys j < i0 go R
// at a time (blocking's register block, transposed: R rows of dv in
// registers, the rb rows of dy streamed through), the i0 mod R left one at
// a time, then the corner j = i0 … i0+rb−1, where row r feeds the keys up
// to i0+r. Each dv_j gets its terms in increasing row order, one FMA each,
// starting from the zero zeroDV stored: the column pass's additions in its
// order, so the bits are the same as those of the unfused kernel.
func (s *svKit) dvRows(i0 reg.GPVirtual, rb int) {
	c, N, D, ds := s.c, s.f.Config.N, s.f.Config.D, s.headStride(s.dvCopy)
	R, cv := s.blocking()
	for _, ch := range s.chunks(cv) {
		c0, cw := ch[0], ch[1]
		dm := s.chunkMask(c0, cw)
		dyp := s.rowPtr("dy", i0, D)
		// group adds to the g dv rows at dvp+dvoff the terms of rows
		// r ≥ max(diag, 0): key q of the group (a at ap+aoff+4q) takes
		// row r if q+diag ≤ r (diag < 0: every row).
		group := func(ap, dvp reg.GPVirtual, aoff, dvoff, g, diag int) {
			acc := make([][]reg.VecVirtual, g)
			for q := range acc {
				acc[q] = s.vecs(cw)
				s.loadCols(operand.Mem{Base: dvp, Disp: dvoff + 4*ds*q}, c0, acc[q], dm)
			}
			vv := s.vecs(cw)
			for r := max(diag, 0); r < rb; r++ {
				s.loadCols(operand.Mem{Base: dyp, Disp: 4 * D * r}, c0, vv, dm)
				for q := 0; q < g && (diag < 0 || q+diag <= r); q++ {
					s.bcastFMA(operand.Mem{Base: ap, Disp: aoff + 4*N*r + 4*q}, vv, acc[q])
				}
			}
			for q := range acc {
				s.storeCols(acc[q], operand.Mem{Base: dvp, Disp: dvoff + 4*ds*q}, c0)
			}
		}
		ap, dvp, j := s.rowPtr("a", i0, N), s.headRowPtr("dv", s.dvCopy), c.GP64()
		c.XORQ(j, j)
		// The keys every row of the block has: j < i0, or, for a
		// bidirectional spec, j < t (and no corner).
		bidi := s.f.Config.Bidirectional
		end := i0
		if bidi {
			end = c.GP64()
			c.Load(c.Param("t"), end)
		}
		keys := func(name string, g int) {
			loop, done := s.lbl(name), s.lbl(name+"_done")
			c.Label(loop)
			e := c.GP64()
			c.LEAQ(operand.Mem{Base: j, Disp: g}, e)
			c.CMPQ(e, end)
			c.JG(operand.LabelRef(done))
			group(ap, dvp, 0, 0, g, -1)
			c.ADDQ(imm(4*g), ap)
			c.ADDQ(imm(4*ds*g), dvp)
			c.ADDQ(imm(g), j)
			c.JMP(operand.LabelRef(loop))
			c.Label(done)
		}
		keys("svb_dvr", R)
		if R > 1 {
			keys("svb_dvr1", 1)
		}
		// Corner: j = i0 here.
		for q0 := 0; q0 < rb && !bidi; q0 += R {
			group(ap, dvp, 4*q0, 4*ds*q0, min(R, rb-q0), q0)
		}
	}
}
