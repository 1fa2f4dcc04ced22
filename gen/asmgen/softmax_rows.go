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
// the t mod group last rows one at a time; then, under the causal mask,
// the zeros of row i at columns i < j < t (whole vectors, then one masked
// vector), which b never has, so a may be b.
//
// Backward: row by row, s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i)
// (dbRow, SoftmaxValueBack's last step, reading g from its argument),
// each vector of db stored after its vectors of a and g are read: db may be
// a or g.
//
// A bidirectional spec's rows have the t entries j < t and nothing is
// zeroed.

// emitSoftmaxRows writes the body of func(t int, b, a []float32).
func emitSoftmaxRows(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	c, G := s.c, s.group()
	i0 := c.GP64()
	c.XORQ(i0, i0)
	blocks, singles, zeros := s.lbl("sr_blocks"), s.lbl("sr_single"), s.lbl("sr_zeros")
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
		c.JGE(operand.LabelRef(zeros))
	}
	s.softmaxRows(i0, 0, 1)
	c.INCQ(i0)
	c.JMP(operand.LabelRef(singles))
	c.Label(zeros)
	if !f.Config.Bidirectional {
		s.zeroUpper()
	}
	c.VZEROUPPER()
	c.RET()
}

// zeroUpper emits a[i·N+j] = 0 for i < j < t: per row, whole vectors from
// column i+1, then one masked vector of the t − j < W columns left.
func (s *svKit) zeroUpper() {
	c, W, N := s.c, s.W, s.f.Config.N
	t := c.GP64()
	c.Load(c.Param("t"), t)
	z := s.vec()
	s.zero(z)
	i := c.GP64()
	c.XORQ(i, i)
	rows, done := s.lbl("sr_zrow"), s.lbl("sr_zdone")
	c.Label(rows)
	c.CMPQ(i, t)
	c.JGE(operand.LabelRef(done))
	ap := s.rowPtr("a", i, N)
	j := c.GP64()
	c.LEAQ(operand.Mem{Base: i, Disp: 1}, j)
	vecs, tail := s.lbl("sr_zvec"), s.lbl("sr_ztail")
	c.Label(vecs)
	{
		e := c.GP64()
		c.LEAQ(operand.Mem{Base: j, Disp: W}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(tail))
	}
	c.VMOVUPS(z, operand.Mem{Base: ap, Index: j, Scale: 4})
	c.ADDQ(imm(W), j)
	c.JMP(operand.LabelRef(vecs))
	c.Label(tail)
	{
		n := c.GP64()
		c.MOVQ(t, n)
		c.SUBQ(j, n) // 0 ≤ t − j < W (j ≤ t: row i < t starts at i+1 ≤ t)
		s.storeM(z, s.dynLanes(n), operand.Mem{Base: ap, Index: j, Scale: 4})
	}
	c.INCQ(i)
	c.JMP(operand.LabelRef(rows))
	c.Label(done)
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
