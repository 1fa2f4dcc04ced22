package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The softmax alone and its backward (kernels.SoftmaxRowsFunc and
// kernels.SoftmaxRowsBackFunc) at the AVX-512 and AVX2 levels: the row
// machinery of the softmax-value kernels (softmax.go) without the value
// products.
//
// Both run over the strip of rows i0 ≤ i < i1 of the t-row block, their
// slices starting at row i0 (svKit.rowOrg): a row's address is taken
// relative to i0, its length (i+1, masks included) from the absolute row.
// Each row's result does not depend on the rows computed with it (the sum
// of a row's lanes runs over its entries in order, whatever vector the
// group's common part ends at), so a strip's rows are bit for bit the
// whole block's.
//
// Forward: the strip's rows from the top, a group of rows interleaved at
// a time (softmaxRows: max, exp and sum, scale; masked tails, −Inf rows to
// 0), the (i1−i0) mod group last rows one at a time; a may be b.
//
// Backward: row by row, s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i)
// (dbRow, SoftmaxValueBack's last step, reading g from its argument),
// each vector of db stored after its vectors of a and g are read: db may be
// a or g.
//
// A bidirectional spec's rows have the t entries j < t.

// emitSoftmaxRows writes the body of func(t, i0, i1 int, b, a []float32).
func emitSoftmaxRows(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	s.rowOrg = "i0"
	c, G := s.c, s.group()
	i := c.GP64()
	c.Load(c.Param("i0"), i)
	blocks, singles, done := s.lbl("sr_blocks"), s.lbl("sr_single"), s.lbl("sr_done")
	c.Label(blocks)
	{
		i1, e := c.GP64(), c.GP64()
		c.Load(c.Param("i1"), i1)
		c.LEAQ(operand.Mem{Base: i, Disp: G}, e)
		c.CMPQ(e, i1)
		c.JG(operand.LabelRef(singles))
	}
	s.softmaxRows(i, 0, G)
	c.ADDQ(imm(G), i)
	c.JMP(operand.LabelRef(blocks))
	c.Label(singles)
	{
		i1 := c.GP64()
		c.Load(c.Param("i1"), i1)
		c.CMPQ(i, i1)
		c.JGE(operand.LabelRef(done))
	}
	s.softmaxRows(i, 0, 1)
	c.INCQ(i)
	c.JMP(operand.LabelRef(singles))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}

// emitSoftmaxRowsBack writes the body of func(t, i0, i1 int, a, g, db []float32).
func emitSoftmaxRowsBack(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	s.rowOrg = "i0"
	c, N := s.c, f.Config.N
	i := c.GP64()
	c.Load(c.Param("i0"), i)
	loop, done := s.lbl("srb_row"), s.lbl("srb_done")
	c.Label(loop)
	{
		i1 := c.GP64()
		c.Load(c.Param("i1"), i1)
		c.CMPQ(i, i1)
		c.JGE(operand.LabelRef(done))
	}
	s.dbRow(i, func() reg.GPVirtual { return s.rowPtr("g", i, N) })
	c.INCQ(i)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}
