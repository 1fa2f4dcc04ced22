package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The softmax-value kernels at long rows (N ≥ svLongN). A register block's
// products read the head rows of V (forward) or dY (the backward's dv) for
// every key: 512 KiB at N 2048, rows D floats apart, which for D a
// multiple of 256 map onto a quarter of L2's sets and fill them, so every
// block read them from L3 (softmax-value forward fell from 57% of peak at
// N 256 to 36% at N 2048, backward from 53% to 28%). Here G blocks share
// each pass: a super-block's softmax first, then the keys all its rows
// see, svChunk at a time, for the G blocks in turn (the chunk stays in L2),
// then each block's own keys and corner. The additions are the plain
// blocks' in their order, so the results are the same bit for bit.

// rowGroups is the number of ri-row groups the backward's second phase
// takes per pass over V when rows are long (N ≥ svLongN): each pass
// reads V's rows j < i0 + ri·G once for all of them (the pair blocks'
// V rows come from L1 for the later groups), rather than once per ri rows.
func (s *simd) rowGroups() int {
	if s.f.Config.N < svLongN {
		return 1
	}
	return 4
}

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
	svLongN    = 1024 // N from which the forward runs super-blocks
	svChunk    = 256  // keys per chunk of a super-block's shared part
	svPrefetch = 96   // rows of a ahead that the backward's dv loop prefetches
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
					b := s.vec()
					c.VBROADCASTSS(operand.Mem{Base: ap, Index: j, Scale: 4, Disp: 4*N*r + adisp}, b)
					for k := range vv {
						c.VFMADD231PS(vv[k], b, acc[r][k])
					}
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

// dvSuper emits dv rows J0 … J0+G·R−1 (G blocks of R rows) as G dvBlocks
// would, with their shared rows i ≥ J0+G·R taken in chunks of svChunk,
// the G blocks' products of a chunk one after another (its dy rows, and
// a's lines, still in L2 for the later ones): per block first its own rows
// J0+b·R ≤ i < J0+G·R (the corner, then a loop), kept in dv, then the
// chunks added in increasing i — dvBlock's additions in its order.
func (s *simd) dvSuper(G, R int, J0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	blk, g := c.GP64(), c.GP64()
	forBlocks := func(name string, body func()) {
		loop := s.label(name)
		c.MOVQ(J0, blk)
		c.MOVQ(imm(G), g)
		c.Label(loop)
		body()
		c.ADDQ(imm(R), blk)
		c.DECQ(g)
		c.JNZ(operand.LabelRef(loop))
	}
	top := c.GP64() // J0 + G·R, the first shared row
	c.LEAQ(operand.Mem{Base: J0, Disp: G * R}, top)
	// products emits, per column chunk, dv rows blk … blk+R−1 (+)= Σ_i a_i,blk+r dy_i:
	// own: from zero over the corner and the rows up to top; else over rows
	// i0 ≤ i < end, added to dv.
	products := func(own bool, i0, end reg.GPVirtual) {
		for _, ch := range s.chunks(cv) {
			c0, cw := ch[0], ch[1]
			dm := s.chunkMask(c0, cw)
			dvp := s.rowPtr("dv", blk, D)
			acc := make([][]reg.VecVirtual, R)
			for r := range acc {
				acc[r] = s.vecs(cw)
				if own {
					for _, x := range acc[r] {
						s.zero(x)
					}
				} else {
					s.loadCols(operand.Mem{Base: dvp, Disp: 4 * D * r}, c0, acc[r], dm)
				}
			}
			// ap = &a[row][blk], dyp = &dy[row] for the first row taken.
			first := blk
			if !own {
				first = i0
			}
			ap, dyp := s.rowPtr("a", first, N), s.rowPtr("dy", first, D)
			c.LEAQ(operand.Mem{Base: ap, Index: blk, Scale: 4}, ap)
			vv := s.vecs(cw)
			step := func(ii, last int) {
				s.loadCols(operand.Mem{Base: dyp, Disp: 4 * D * ii}, c0, vv, dm)
				for r := 0; r <= last; r++ {
					b := s.vec()
					c.VBROADCASTSS(operand.Mem{Base: ap, Disp: 4*N*ii + 4*r}, b)
					for k := range vv {
						c.VFMADD231PS(vv[k], b, acc[r][k])
					}
				}
			}
			i := c.GP64()
			if own {
				for ii := 0; ii < R-1; ii++ { // row blk+ii feeds dv rows 0 … ii
					step(ii, ii)
				}
				c.LEAQ(operand.Mem{Base: blk, Disp: R - 1}, i)
				c.ADDQ(imm(4*N*(R-1)), ap)
				c.ADDQ(imm(4*D*(R-1)), dyp)
				end = top
			} else {
				c.MOVQ(i0, i)
			}
			loop, out := s.label("svs_dv"), s.label("svs_dv_out")
			c.Label(loop)
			c.CMPQ(i, end)
			c.JGE(operand.LabelRef(out))
			if !own {
				// a's rows are 4N bytes apart, each in a page of its own
				// from N 1024 on, where the hardware prefetchers stop: the
				// line svPrefetch rows ahead is asked for now.
				c.PREFETCHT0(operand.Mem{Base: ap, Disp: 4 * N * svPrefetch})
			}
			step(0, R-1)
			c.ADDQ(imm(4*N), ap)
			c.ADDQ(imm(4*D), dyp)
			c.INCQ(i)
			c.JMP(operand.LabelRef(loop))
			c.Label(out)
			for r := 0; r < R; r++ {
				s.storeCols(acc[r], operand.Mem{Base: dvp, Disp: 4 * D * r}, c0)
			}
		}
	}
	forBlocks("svbs_own", func() { products(true, nil, nil) })
	ic, end, t := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(top, ic)
	chunks, done := s.label("svbs_chunks"), s.label("svbs_done")
	c.Label(chunks)
	c.Load(c.Param("t"), t)
	c.CMPQ(ic, t)
	c.JGE(operand.LabelRef(done))
	c.LEAQ(operand.Mem{Base: ic, Disp: svChunk}, end)
	c.CMPQ(end, t)
	c.CMOVQGT(t, end) // end = min(ic + svChunk, t)
	forBlocks("svbs_rect", func() { products(false, ic, end) })
	c.ADDQ(imm(svChunk), ic)
	c.JMP(operand.LabelRef(chunks))
	c.Label(done)
}
