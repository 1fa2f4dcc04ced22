package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The softmax-value kernels at long rows (N ≥ svLongN).
//
// Forward: a register block's products read the head rows of V for every
// key: 512 KiB at N 2048, rows D floats apart, which for D a multiple of
// 256 map onto a quarter of L2's sets and fill them, so every block read
// them from L3 (softmax-value forward fell from 57% of peak at N 256 to 36%
// at N 2048). Here G blocks share each pass: a super-block's softmax
// first, then the keys all its rows see, svChunk at a time, for the G
// blocks in turn (the chunk stays in L2), then each block's own keys and
// corner. The additions are the plain blocks' in their order, so the
// results are the same bit for bit.
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

// superBlocks is the number G of R-row blocks the forward groups into a
// super-block when rows are long (N ≥ svLongN): a block's products read V's
// head rows j ≤ i once each, 512 KiB at N 2048 with rows 1 KiB apart,
// which fill the L2 sets they map to and come from L3 for every block;
// grouped, each chunk of svChunk keys is read once for G blocks. 1 (no
// grouping) for shorter rows, where V stays in L2.
func (s *simd) superBlocks() int {
	if s.f.Config.N < svLongN {
		return 1
	}
	return 24
}

const (
	svLongN = 1024 // N from which both kernels take their long-row paths
	svChunk = 256  // keys per chunk of a super-block's shared part
)

// fwdSuper emits softmax and Y for the G blocks of R rows from row s0 up
// (rows s0 … s0+G·R−1): the softmax of every row; then Y over the keys
// j ≤ s0, which every row sees, in chunks of svChunk keys, the G blocks'
// products of a chunk one after another (its V rows are still in L2 for
// the later ones); then each block's own keys s0 < j ≤ its first row, and
// its corner, as fwdBlock does. Y starts at zero and gathers the chunks in
// increasing j: the additions are fwdBlock's, in its order.
func (s *simd) fwdSuper(G, R int, s0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	blk, g := c.GP64(), c.GP64()
	// forBlocks emits body once, run for blk = s0, s0+R, …, s0+(G−1)·R.
	forBlocks := func(name string, body func()) {
		loop := s.label(name)
		c.MOVQ(s0, blk)
		c.MOVQ(imm(G), g)
		c.Label(loop)
		body()
		c.ADDQ(imm(R), blk)
		c.DECQ(g)
		c.JNZ(operand.LabelRef(loop))
	}
	forBlocks("svs_softmax", func() {
		for g0 := 0; g0 < R; g0 += s.group() {
			s.softmaxRows(blk, g0, min(s.group(), R-g0))
		}
	})
	// Y rows of the super-block = 0.
	{
		z := s.vec()
		s.zero(z)
		forBlocks("svs_zero", func() {
			yp := s.rowPtr("y", blk, D)
			for r := 0; r < R; r++ {
				zs := make([]reg.VecVirtual, s.nv)
				for k := range zs {
					zs[k] = z
				}
				s.storeCols(zs, operand.Mem{Base: yp, Disp: 4 * D * r}, 0)
			}
		})
	}
	// products emits, for every column chunk of the head, Y rows blk … blk+R−1
	// += Σ_j a_ij v_j over j from the register j while j < end (or j ≤ end
	// with incl), then, with corner, the keys blk+1 … blk+R−1.
	products := func(j0 reg.GPVirtual, end reg.GPVirtual, incl, corner bool) {
		for _, ch := range s.chunks(cv) {
			c0, cw := ch[0], ch[1]
			yp := s.rowPtr("y", blk, D)
			dm := s.chunkMask(c0, cw)
			acc := make([][]reg.VecVirtual, R)
			for r := range acc {
				acc[r] = s.vecs(cw)
				s.loadCols(operand.Mem{Base: yp, Disp: 4 * D * r}, c0, acc[r], dm)
			}
			ap := s.rowPtr("a", blk, N)
			vp, j := c.GP64(), c.GP64()
			c.MOVQ(j0, j)
			c.IMUL3Q(imm(4*D), j, vp)
			c.ADDQ(s.param("v"), vp)
			vv := s.vecs(cw)
			step := func(vmem operand.Mem, first, adisp int) {
				s.loadCols(vmem, c0, vv, dm)
				for r := first; r < R; r++ {
					s.bcastFMA(operand.Mem{Base: ap, Index: j, Scale: 4, Disp: 4*N*r + adisp}, vv, acc[r])
				}
			}
			loop, out := s.label("svs_prod"), s.label("svs_prod_out")
			c.Label(loop)
			c.CMPQ(j, end)
			if incl {
				c.JG(operand.LabelRef(out))
			} else {
				c.JGE(operand.LabelRef(out))
			}
			step(operand.Mem{Base: vp}, 0, 0)
			c.ADDQ(imm(4*D), vp)
			c.INCQ(j)
			c.JMP(operand.LabelRef(loop))
			c.Label(out)
			if corner {
				// j = blk+1 here: key blk+jj takes rows jj … R−1.
				for jj := 1; jj < R; jj++ {
					step(operand.Mem{Base: vp, Disp: 4 * D * (jj - 1)}, jj, 4*(jj-1))
				}
			}
			for r := 0; r < R; r++ {
				s.storeCols(acc[r], operand.Mem{Base: yp, Disp: 4 * D * r}, c0)
			}
		}
	}
	// The shared keys j ≤ s0, chunk by chunk.
	jc, end := c.GP64(), c.GP64()
	c.XORQ(jc, jc)
	chunks, tail := s.label("svs_chunks"), s.label("svs_tail")
	c.Label(chunks)
	c.CMPQ(jc, s0)
	c.JG(operand.LabelRef(tail))
	{
		lim := c.GP64()
		c.LEAQ(operand.Mem{Base: jc, Disp: svChunk}, end)
		c.LEAQ(operand.Mem{Base: s0, Disp: 1}, lim)
		c.CMPQ(end, lim)
		c.CMOVQGT(lim, end) // end = min(jc + svChunk, s0 + 1)
	}
	forBlocks("svs_rect", func() { products(jc, end, false, false) })
	c.ADDQ(imm(svChunk), jc)
	c.JMP(operand.LabelRef(chunks))
	c.Label(tail)
	// Each block's own keys s0 < j ≤ blk, then its corner.
	c.LEAQ(operand.Mem{Base: s0, Disp: 1}, jc)
	forBlocks("svs_own", func() { products(jc, blk, true, true) })
}

// fusedDV reports whether the backward computes dv inside its row passes
// (dvRows), rather than in a first phase of its own over the columns of a:
// at long rows a comes from memory, and the first phase read it once more
// than the row passes, in strides of a row.
func (s *simd) fusedDV() bool { return s.f.Config.N >= svLongN }

// zeroDV emits dv rows 0 … t−1 = 0, where dvRows then adds each row's terms.
func (s *simd) zeroDV() {
	c := s.c
	z := s.vec()
	s.zero(z)
	zs := make([]reg.VecVirtual, s.nv)
	for k := range zs {
		zs[k] = z
	}
	dvp, ds := s.dvRowPtr(), s.dvStride()
	i, t := c.GP64(), c.GP64()
	c.XORQ(i, i)
	c.Load(c.Param("t"), t)
	loop, done := s.label("svb_zero"), s.label("svb_zero_done")
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
func (s *simd) dvRows(i0 reg.GPVirtual, rb int) {
	c, N, D, ds := s.c, s.f.Config.N, s.f.Config.D, s.dvStride()
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
		ap, dvp, j := s.rowPtr("a", i0, N), s.dvRowPtr(), c.GP64()
		c.XORQ(j, j)
		keys := func(name string, g int) {
			loop, done := s.label(name), s.label(name+"_done")
			c.Label(loop)
			e := c.GP64()
			c.LEAQ(operand.Mem{Base: j, Disp: g}, e)
			c.CMPQ(e, i0)
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
		for q0 := 0; q0 < rb; q0 += R {
			group(ap, dvp, 4*q0, 4*ds*q0, min(R, rb-q0), q0)
		}
	}
}
