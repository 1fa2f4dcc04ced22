package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The softmax-value backward (kernels.SoftmaxValueBackFunc); the layout of
// both kernels is described at the top of softmax.go.

// emitSoftmaxValueBack writes the body of the backward kernel
// func(t int, a, v, dy, db, dv []float32).
func emitSoftmaxValueBack(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	c := s.c
	N := f.Config.N
	// The gradient rows buffer, RB rows of GS floats; at long rows also the
	// transposed V and dv's stack copy, each with a line to spare for
	// lineAddr. A frame over 512 bytes drops NOSPLIT (the assembler then
	// adds the stack check).
	fused := s.fusedDV()
	ri, _ := s.pairBlock()
	RB, GS, spare := ri, N, 0
	if fused {
		RB, GS, spare = svLongRows, s.gStride(), 64
	}
	frame := (4*GS*RB + spare + 7) &^ 7
	gbuf := c.AllocLocal(frame)
	var vt operand.Mem
	if fused {
		nvt, ndv := 4*s.dh*GS+spare, 4*s.dh*N+spare
		vt = c.AllocLocal(nvt)
		dvc := c.AllocLocal(ndv)
		s.dvCopy = &dvc
		frame += nvt + ndv
	}
	if frame > 512 {
		c.Attributes(0)
	}
	s.initDH()
	R, _ := s.blocking()

	if fused {
		s.transposeV(vt)
		s.zeroDV()
	} else {
		// Phase 1: dv = aᵀ·dy, blocks of R rows of dv from the top; the t mod R
		// last rows one at a time.
		j0 := c.GP64()
		c.XORQ(j0, j0)
		singles := s.lbl("svb_singles")
		if R > 1 {
			loop := s.lbl("svb_blocks")
			c.Label(loop)
			t, e := c.GP64(), c.GP64()
			c.Load(c.Param("t"), t)
			c.LEAQ(operand.Mem{Base: j0, Disp: R}, e)
			c.CMPQ(e, t)
			c.JG(operand.LabelRef(singles))
			s.dvBlock(R, j0)
			c.ADDQ(imm(R), j0)
			c.JMP(operand.LabelRef(loop))
		}
		c.Label(singles)
		{
			t := c.GP64()
			c.Load(c.Param("t"), t)
			c.CMPQ(j0, t)
			phase2 := s.lbl("svb_phase2")
			c.JGE(operand.LabelRef(phase2))
			s.dvBlock(1, j0)
			c.INCQ(j0)
			c.JMP(operand.LabelRef(singles))
			c.Label(phase2)
		}
	}

	// Phase 2: g rows to gbuf (at long rows from the transposed V), at long
	// rows the rows' terms of dv (fused, no phase 1), then s and db row by
	// row. Blocks of RB rows from the top while t ≥ 16, the rest one row at
	// a time.
	i0 := c.GP64()
	c.XORQ(i0, i0)
	rows, single, done := s.lbl("svb_rows"), s.lbl("svb_row"), s.lbl("svb_done")
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(t, imm(16))
		c.JL(operand.LabelRef(single))
	}
	c.Label(rows)
	{
		t, e := c.GP64(), c.GP64()
		c.Load(c.Param("t"), t)
		c.LEAQ(operand.Mem{Base: i0, Disp: RB}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(single))
	}
	if !fused {
		s.gRows(i0, gbuf)
		for r := 0; r < ri; r++ {
			row := c.GP64()
			c.LEAQ(operand.Mem{Base: i0, Disp: r}, row)
			s.finishRow(row, gbuf.Offset(4*N*r))
		}
	} else {
		s.gPanels(i0, RB, gbuf, vt)
		s.dvRows(i0, RB)
		// A loop over the block's rows: RB copies would bloat the code.
		rr, loop := c.GP64(), s.lbl("svb_finish")
		c.XORQ(rr, rr)
		c.Label(loop)
		row, gp, off := c.GP64(), c.GP64(), c.GP64()
		c.LEAQ(operand.Mem{Base: i0, Index: rr, Scale: 1}, row)
		s.lineAddr(gbuf, gp)
		c.IMUL3Q(imm(4*GS), rr, off)
		c.ADDQ(off, gp)
		s.finishRow(row, operand.Mem{Base: gp})
		c.INCQ(rr)
		c.CMPQ(rr, imm(RB))
		c.JL(operand.LabelRef(loop))
	}
	c.ADDQ(imm(RB), i0)
	c.JMP(operand.LabelRef(rows))
	c.Label(single)
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(i0, t)
		c.JGE(operand.LabelRef(done))
	}
	s.backRow(i0, gbuf)
	c.INCQ(i0)
	c.JMP(operand.LabelRef(single))
	c.Label(done)
	if fused {
		s.copyDVOut()
	}
	c.VZEROUPPER()
	c.RET()
}

// rowEnd sets L to the number of keys of row i (and of the rows before it
// in a block ending at row i+off−1): i+off under the causal mask, t for a
// bidirectional spec.
func (s *svKit) rowEnd(L, i reg.GPVirtual, off int) {
	if s.f.Config.Bidirectional {
		s.c.Load(s.c.Param("t"), L)
		return
	}
	s.c.LEAQ(operand.Mem{Base: i, Disp: off}, L)
}

// dvBlock emits dv rows j0 … j0+rb−1 = Σ_{i ≥ j} a_ij dy_i.
func (s *svKit) dvBlock(rb int, j0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	for _, ch := range s.chunks(cv) {
		c0, cw := ch[0], ch[1]
		acc := make([][]reg.VecVirtual, rb)
		for r := range acc {
			acc[r] = s.vecs(cw)
			for _, x := range acc[r] {
				s.zero(x)
			}
		}
		bidi := s.f.Config.Bidirectional
		var ap, dyp reg.GPVirtual
		if bidi { // &a[0][j0] and row 0 of dy: every row i < t
			ap, dyp = s.param("a"), s.param("dy")
			c.LEAQ(operand.Mem{Base: ap, Index: j0, Scale: 4}, ap)
		} else {
			ap = s.rowPtr("a", j0, N+1) // &a[j0][j0]
			dyp = s.rowPtr("dy", j0, D)
		}
		dm := s.chunkMask(c0, cw)
		vv := s.vecs(cw)
		step := func(ii, last int) { // row i = j0+ii (relative to the pointers) for dv rows ≤ last
			s.loadCols(operand.Mem{Base: dyp, Disp: 4 * D * ii}, c0, vv, dm)
			for r := 0; r <= last; r++ {
				s.bcastFMA(operand.Mem{Base: ap, Disp: 4*N*ii + 4*r}, vv, acc[r])
			}
		}
		// Corner: row i = j0+ii feeds dv rows 0 … ii.
		for ii := 0; ii < rb-1 && !bidi; ii++ {
			step(ii, ii)
		}
		i := c.GP64()
		if bidi {
			c.XORQ(i, i)
		} else {
			c.LEAQ(operand.Mem{Base: j0, Disp: rb - 1}, i)
		}
		if rb > 1 && !bidi {
			c.ADDQ(imm(4*N*(rb-1)), ap)
			c.ADDQ(imm(4*D*(rb-1)), dyp)
		}
		t := c.GP64()
		c.Load(c.Param("t"), t)
		loop := s.lbl("svb_dv")
		c.Label(loop)
		step(0, rb-1)
		c.ADDQ(imm(4*N), ap)
		c.ADDQ(imm(4*D), dyp)
		c.INCQ(i)
		c.CMPQ(i, t)
		c.JL(operand.LabelRef(loop))
		dvp := s.rowPtr("dv", j0, D)
		for r := 0; r < rb; r++ {
			s.storeCols(acc[r], operand.Mem{Base: dvp, Disp: 4 * D * r}, c0)
		}
	}
}

// sigma is the lane order of reduceW: the sum of accumulator k lands in
// lane sigma[k] (an involution), so slot k accumulates the dot product
// wanted in lane sigma[k] and the reduced vector comes out in order.
func (s *svKit) sigma() []int {
	if s.isa == kernels.AVX512 {
		return []int{0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15}
	}
	return []int{0, 2, 1, 3, 4, 6, 5, 7}
}

// reduceW reduces W accumulators (slot order) to one vector of their sums.
func (s *svKit) reduceW(z []reg.VecVirtual) reg.VecVirtual {
	c := s.c
	pair := func(a, b reg.VecVirtual, shuf func(imm uint8, a, b, dst reg.VecVirtual), lo, hi uint8) reg.VecVirtual {
		t1, t2 := s.vec(), s.vec()
		shuf(lo, a, b, t1)
		shuf(hi, a, b, t2)
		c.VADDPS(t2, t1, t1)
		return t1
	}
	level := func(z []reg.VecVirtual, shuf func(imm uint8, a, b, dst reg.VecVirtual), lo, hi uint8) []reg.VecVirtual {
		h := len(z) / 2
		out := make([]reg.VecVirtual, h)
		for k := 0; k < h; k++ {
			out[k] = pair(z[k], z[k+h], shuf, lo, hi)
		}
		return out
	}
	lanes128 := func(imm uint8, a, b, dst reg.VecVirtual) { c.VSHUFF32X4(operand.U8(imm), b, a, dst) }
	halves := func(imm uint8, a, b, dst reg.VecVirtual) { c.VPERM2F128(operand.U8(imm), b, a, dst) }
	within := func(imm uint8, a, b, dst reg.VecVirtual) { c.VSHUFPS(operand.U8(imm), b, a, dst) }
	if s.isa == kernels.AVX512 {
		z = level(z, lanes128, 0x44, 0xEE)
		z = level(z, lanes128, 0x88, 0xDD)
	} else {
		z = level(z, halves, 0x20, 0x31)
	}
	z = level(z, within, 0x88, 0xDD)
	z = level(z, within, 0x88, 0xDD)
	return z[0]
}

// gBlock emits gbuf[jb … jb+W−1] = dy_i · v_j for the W rows of v at vp.
func (s *svKit) gBlock(dyp, vp, gp reg.GPVirtual) {
	c, D := s.c, s.f.Config.D
	sig := s.sigma()
	acc := s.vecs(s.W)
	for _, x := range acc {
		s.zero(x)
	}
	for cv := 0; cv < s.nv; cv++ {
		x := s.vec()
		if s.partial(cv) {
			dm := s.dhMask()
			s.loadM(operand.Mem{Base: dyp, Disp: 4 * s.W * cv}, dm, x)
			for q := range acc {
				m := operand.Mem{Base: vp, Disp: 4*D*sig[q] + 4*s.W*cv}
				if s.isa == kernels.AVX512 {
					c.VFMADD231PS(m, x, dm, acc[q]) // masked lanes: no access
				} else {
					y := s.vec()
					s.loadM(m, dm, y)
					c.VFMADD231PS(y, x, acc[q])
				}
			}
			continue
		}
		c.VMOVUPS(operand.Mem{Base: dyp, Disp: 4 * s.W * cv}, x)
		for q := range acc {
			c.VFMADD231PS(operand.Mem{Base: vp, Disp: 4*D*sig[q] + 4*s.W*cv}, x, acc[q])
		}
	}
	g := s.reduceW(acc)
	c.VMOVUPS(g, operand.Mem{Base: gp})
}

// pairBlock is the shape of gRows' blocks: ri rows of g by rj columns,
// ri·rj = W pairs whose W dot products reduceW sums into one vector, lane
// rj·r + q holding g[i0+r][jb+q].
func (s *svKit) pairBlock() (ri, rj int) {
	if s.isa == kernels.AVX512 {
		return 4, 4
	}
	return 2, 4
}

// gRows emits rows i0 … i0+ri−1 of g (columns up to i0+ri−1, some past
// their row's diagonal) to the ri rows of gbuf (stride N): blocks of rj
// columns, the last one ending at the longest row's diagonal and
// overlapping its predecessor; it reads rows < max(i0+ri, rj) ≤ t of v.
func (s *svKit) gRows(i0 reg.GPVirtual, gbuf operand.Mem) {
	c, D := s.c, s.f.Config.D
	ri, rj := s.pairBlock()
	dyp := s.rowPtr("dy", i0, D)
	L := c.GP64()
	s.rowEnd(L, i0, ri)
	jb, vp, gp := c.GP64(), s.param("v"), c.GP64()
	c.XORQ(jb, jb)
	c.LEAQ(gbuf, gp)
	blocks, tail, done := s.lbl("svb_pblocks"), s.lbl("svb_ptail"), s.lbl("svb_pdone")
	c.Label(blocks)
	{
		e := c.GP64()
		c.LEAQ(operand.Mem{Base: jb, Disp: rj}, e)
		c.CMPQ(e, L)
		c.JG(operand.LabelRef(tail))
	}
	s.gPairs(dyp, vp, gp)
	c.ADDQ(imm(rj), jb)
	c.ADDQ(imm(4*rj), gp)
	c.ADDQ(imm(4*rj*D), vp)
	c.JMP(operand.LabelRef(blocks))
	c.Label(tail)
	c.CMPQ(jb, L)
	c.JE(operand.LabelRef(done))
	pos := s.lbl("svb_ppos")
	c.MOVQ(L, jb)
	c.SUBQ(imm(rj), jb)
	c.JGE(operand.LabelRef(pos))
	c.XORQ(jb, jb) // max(L−rj, 0)
	c.Label(pos)
	vp2, gp2 := s.rowPtr("v", jb, D), c.GP64()
	c.LEAQ(gbuf, gp2)
	c.LEAQ(operand.Mem{Base: gp2, Index: jb, Scale: 4}, gp2)
	s.gPairs(dyp, vp2, gp2)
	c.Label(done)
}

// gPairs emits one ri × rj block of g: the rows of dy at dyp, of v at vp,
// to gbuf at gp (row stride N).
func (s *svKit) gPairs(dyp, vp, gp reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	ri, rj := s.pairBlock()
	sig := s.sigma()
	acc := s.vecs(s.W)
	for _, x := range acc {
		s.zero(x)
	}
	for cv := 0; cv < s.nv; cv++ {
		d, w := s.vecs(ri), s.vecs(rj)
		var dm reg.Register
		if s.partial(cv) {
			dm = s.dhMask()
		}
		load := func(m operand.Mem, x reg.VecVirtual) {
			if s.partial(cv) {
				s.loadM(m, dm, x)
			} else {
				c.VMOVUPS(m, x)
			}
		}
		for r := range d {
			load(operand.Mem{Base: dyp, Disp: 4*D*r + 4*s.W*cv}, d[r])
		}
		for q := range w {
			load(operand.Mem{Base: vp, Disp: 4*D*q + 4*s.W*cv}, w[q])
		}
		for k, x := range acc {
			c.VFMADD231PS(w[sig[k]%rj], d[sig[k]/rj], x)
		}
	}
	g := s.reduceW(acc)
	for r := 0; r < ri; r++ {
		m := operand.Mem{Base: gp, Disp: 4 * N * r}
		if s.isa == kernels.AVX512 {
			c.VEXTRACTF32X4(operand.U8(r), g, m)
		} else {
			c.VEXTRACTF128(operand.U8(r), g, m)
		}
	}
}

// backRow emits db's row i alone: g_i to gbuf (W columns at a time), then
// (fused) row i's terms of dv, then finishRow.
func (s *svKit) backRow(i reg.GPVirtual, gbuf operand.Mem) {
	c, W, D := s.c, s.W, s.f.Config.D
	L := c.GP64()
	s.rowEnd(L, i, 1)
	dyp := s.rowPtr("dy", i, D)
	gb := c.GP64()
	c.LEAQ(gbuf, gb)

	gdone, gsingle := s.lbl("svb_gdone"), s.lbl("svb_gsingle")
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(t, imm(W))
		c.JL(operand.LabelRef(gsingle))
	}
	// t ≥ W: whole blocks of W columns, then one block ending at column i
	// (or starting at 0), overlapping the last whole block; its rows of v
	// are all < max(i+1, W) ≤ t.
	jb, vp, gp := c.GP64(), s.param("v"), c.GP64()
	c.XORQ(jb, jb)
	c.MOVQ(gb, gp)
	blocks, tail := s.lbl("svb_gblocks"), s.lbl("svb_gtail")
	c.Label(blocks)
	{
		e := c.GP64()
		c.LEAQ(operand.Mem{Base: jb, Disp: W}, e)
		c.CMPQ(e, L)
		c.JG(operand.LabelRef(tail))
	}
	s.gBlock(dyp, vp, gp)
	c.ADDQ(imm(W), jb)
	c.ADDQ(imm(4*W), gp)
	c.ADDQ(imm(4*W*D), vp)
	c.JMP(operand.LabelRef(blocks))
	c.Label(tail)
	c.CMPQ(jb, L)
	c.JE(operand.LabelRef(gdone))
	{
		pos := s.lbl("svb_gpos")
		c.MOVQ(L, jb)
		c.SUBQ(imm(W), jb)
		c.JGE(operand.LabelRef(pos))
		c.XORQ(jb, jb) // max(L−W, 0)
		c.Label(pos)
		vp2 := s.rowPtr("v", jb, D)
		gp2 := c.GP64()
		c.LEAQ(operand.Mem{Base: gb, Index: jb, Scale: 4}, gp2)
		s.gBlock(dyp, vp2, gp2)
		c.JMP(operand.LabelRef(gdone))
	}

	// t < W: one dot product per column.
	c.Label(gsingle)
	{
		j, vp := c.GP64(), s.param("v")
		c.XORQ(j, j)
		loop := s.lbl("svb_gdot")
		c.Label(loop)
		acc := s.vec()
		s.zero(acc)
		for cv := 0; cv < s.nv; cv++ {
			x, y := s.vec(), s.vec()
			if s.partial(cv) {
				dm := s.dhMask()
				s.loadM(operand.Mem{Base: dyp, Disp: 4 * W * cv}, dm, x)
				s.loadM(operand.Mem{Base: vp, Disp: 4 * W * cv}, dm, y)
			} else {
				c.VMOVUPS(operand.Mem{Base: dyp, Disp: 4 * W * cv}, x)
				c.VMOVUPS(operand.Mem{Base: vp, Disp: 4 * W * cv}, y)
			}
			c.VFMADD231PS(y, x, acc)
		}
		s.allReduce(acc, func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
		s.storeM(acc, s.lanes(1), operand.Mem{Base: gb, Index: j, Scale: 4})
		c.ADDQ(imm(4*D), vp)
		c.INCQ(j)
		c.CMPQ(j, L)
		c.JL(operand.LabelRef(loop))
	}
	c.Label(gdone)
	if s.fusedDV() {
		s.dvRows(i, 1)
	}
	s.finishRow(i, gbuf)
}

// finishRow emits db's row i from its gradient row at gbuf:
// s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i).
func (s *svKit) finishRow(i reg.GPVirtual, gbuf operand.Mem) {
	s.dbRow(i, func() reg.GPVirtual {
		gb := s.c.GP64()
		s.c.LEAQ(gbuf, gb)
		return gb
	})
}

// dbRow emits db's row i from the gradient row at the address gRow
// emits: s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i), each vector
// of db stored after its vectors of a and g are read (db may be either).
func (s *svKit) dbRow(i reg.GPVirtual, gRow func() reg.GPVirtual) {
	c, W, N := s.c, s.W, s.f.Config.N
	L := c.GP64()
	s.rowEnd(L, i, 1)
	gb := gRow()
	ap := s.rowPtr("a", i, N)
	full, rem := c.GP64(), c.GP64()
	c.MOVQ(L, full)
	c.MOVQ(L, rem)
	c.ANDQ(imm(W-1), rem)
	c.SUBQ(rem, full)
	tm := s.dynLanes(rem)
	at := func(p, j reg.Register) operand.Mem { return operand.Mem{Base: p, Index: j, Scale: 4} }
	pass := func(name string, body func(j reg.GPVirtual), tailf func(j reg.GPVirtual)) {
		j := c.GP64()
		loop, done := s.lbl(name), s.lbl(name+"_tail")
		c.XORQ(j, j)
		c.Label(loop)
		c.CMPQ(j, full)
		c.JAE(operand.LabelRef(done))
		body(j)
		c.ADDQ(imm(W), j)
		c.JMP(operand.LabelRef(loop))
		c.Label(done)
		tailf(j)
	}
	sacc := s.vec()
	s.zero(sacc)
	pass("svb_dot", func(j reg.GPVirtual) {
		x := s.vec()
		c.VMOVUPS(at(gb, j), x)
		c.VFMADD231PS(at(ap, j), x, sacc)
	}, func(j reg.GPVirtual) {
		x, y := s.vec(), s.vec()
		s.loadM(at(gb, j), tm, x)
		s.loadM(at(ap, j), tm, y)
		c.VFMADD231PS(y, x, sacc)
	})
	s.allReduce(sacc, func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
	dbp := s.rowPtr("db", i, N)
	pass("svb_db", func(j reg.GPVirtual) {
		x := s.vec()
		c.VMOVUPS(at(gb, j), x)
		c.VSUBPS(sacc, x, x)
		c.VMULPS(at(ap, j), x, x)
		c.VMOVUPS(x, at(dbp, j))
	}, func(j reg.GPVirtual) {
		x, y := s.vec(), s.vec()
		s.loadM(at(gb, j), tm, x)
		c.VSUBPS(sacc, x, x)
		s.loadM(at(ap, j), tm, y)
		c.VMULPS(y, x, x)
		s.storeM(x, tm, at(dbp, j))
	})
}

// imm is a 32-bit immediate (the Go assembler picks the encoding).
