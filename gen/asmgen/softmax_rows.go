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
// Forward: the rows from the top, a group of rows interleaved at a time
// (softmaxRows: max, exp and sum, scale; masked tails, −Inf rows to 0),
// the t mod group last rows one at a time; a may be b.
//
// Backward: row by row, s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i)
// (dbRow, SoftmaxValueBack's last step, reading g from its argument),
// each vector of db stored after its vectors of a and g are read: db may be
// a or g.
//
// A bidirectional spec's rows have the t entries j < t.

// emitSoftmaxRows writes the body of func(t int, b, a []float32).
func emitSoftmaxRows(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	c, G := s.c, s.group()
	i0 := c.GP64()
	c.XORQ(i0, i0)
	blocks, singles, done := s.lbl("sr_blocks"), s.lbl("sr_single"), s.lbl("sr_done")
	c.Label(blocks)
	{
		t, e := c.GP64(), c.GP64()
		c.Load(c.Param("t"), t)
		c.LEAQ(operand.Mem{Base: i0, Disp: G}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(singles))
	}
	s.softmaxRows(i0, 0, G)
	c.ADDQ(imm(G), i0)
	c.JMP(operand.LabelRef(blocks))
	c.Label(singles)
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(i0, t)
		c.JGE(operand.LabelRef(done))
	}
	s.softmaxRows(i0, 0, 1)
	c.INCQ(i0)
	c.JMP(operand.LabelRef(singles))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}

// emitSoftmaxRowsBack writes the body of func(t int, a, g, db []float32).
func emitSoftmaxRowsBack(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	c, N := s.c, f.Config.N
	i := c.GP64()
	c.XORQ(i, i)
	loop, done := s.lbl("srb_row"), s.lbl("srb_done")
	c.Label(loop)
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(i, t)
		c.JGE(operand.LabelRef(done))
	}
	s.dbRow(i, func() reg.GPVirtual { return s.rowPtr("g", i, N) })
	c.INCQ(i)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}
