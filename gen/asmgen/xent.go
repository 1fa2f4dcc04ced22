package asmgen

import (
	"math"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The cross-entropy's row kernels (kernels.SoftmaxStatsFunc,
// kernels.SoftmaxScaleFunc) at the AVX-512 and AVX2 levels, over t rows of
// Vocab logits, with the row walk of the row-wise kernels (rowKit.rowVecs:
// rowAccs accumulators, a masked partial last vector) and the softmax's
// vectorised exp.
//
// SoftmaxStats takes the row max in rowAccs accumulators started at −Inf
// (the tail's masked-off lanes left out: merge-masked on AVX-512, blended
// with −Inf on AVX2), reduced across lanes; then Σ exp(x − max) in rowAccs
// accumulators (the tail's masked-off lanes cleared before the add),
// reduced as the LayerNorm sums are. SoftmaxScale clamps x − lse at 0 (so
// a lse rounded below the row max cannot overflow) and scales.

func emitSoftmaxStats(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).softmaxStats() }
func emitSoftmaxScale(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).softmaxScale() }

// rows emits the loop over the t rows: body for each, then the pointers
// advance by their per-row strides in bytes.
func (r *rowKit) rows(ptrs []reg.GPVirtual, strides []int, body func()) {
	c := r.c
	t := r.gp(c.Param("t"))
	loop, done := r.lbl("row"), r.lbl("done")
	c.TESTQ(t, t)
	c.JZ(synRef(done))
	r.label(loop)
	body()
	for i, p := range ptrs {
		c.ADDQ(synImm(strides[i]), p)
	}
	c.DECQ(t)
	c.JNZ(synRef(loop))
	r.label(done)
	r.ret()
}

func (r *rowKit) softmaxStats() {
	c := r.c
	s := r.simd
	V := r.f.Config.Vocab
	x, mx, sm := r.param("x"), r.param("mx"), r.param("s")
	tail := r.tailOf(V)
	negInf := s.constVec("xent_neginf", float32(math.Inf(-1)))
	r.rows([]reg.GPVirtual{x, mx, sm}, []int{4 * V, 4, 4}, func() {
		used := min(rowAccs, (V+r.W-1)/r.W)
		a := make([]reg.VecVirtual, used)
		for i := range a {
			a[i] = r.vec()
			c.VMOVAPS(negInf, a[i])
		}
		r.rowVecs(V, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
			switch {
			case mask == nil:
				c.VMAXPS(at(x), a[q], a[q])
			case r.avx512():
				c.VMAXPS(at(x), a[q], mask, a[q]) // merge: masked-off lanes keep theirs
			default:
				v := r.get(at(x), mask)
				c.VBLENDVPS(mask, v, negInf, v) // masked-off lanes −Inf
				c.VMAXPS(v, a[q], a[q])
			}
		})
		for step := 1; step < len(a); step *= 2 {
			for i := 0; i+step < len(a); i += 2 * step {
				c.VMAXPS(a[i+step], a[i], a[i])
			}
		}
		m := a[0]
		s.allReduce(m, func(p, q, dst operand.Op) { c.VMAXPS(p, q, dst) })
		c.VMOVSS(m.AsX(), synMem(mx, 0))
		acc := r.accs(V)
		r.rowVecs(V, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
			v := r.get(at(x), mask)
			c.VSUBPS(m, v, v)
			e := s.exp(v)
			switch {
			case mask == nil:
				c.VADDPS(e, acc[q], acc[q])
			case r.avx512():
				c.VADDPS(e, acc[q], mask, acc[q])
			default:
				c.VANDPS(mask, e, e)
				c.VADDPS(e, acc[q], acc[q])
			}
		})
		c.VMOVSS(r.total(acc), synMem(sm, 0))
	})
}

func (r *rowKit) softmaxScale() {
	c := r.c
	s := r.simd
	V := r.f.Config.Vocab
	x, lse, y := r.param("x"), r.param("lse"), r.param("y")
	tail := r.tailOf(V)
	scale := r.bcastParam("scale")
	zero := r.vec()
	r.zero(zero)
	r.rows([]reg.GPVirtual{x, lse, y}, []int{4 * V, 4, 4 * V}, func() {
		l := r.vec()
		c.VBROADCASTSS(synMem(lse, 0), l)
		r.rowVecs(V, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
			v := r.get(at(x), mask)
			c.VSUBPS(l, v, v)
			c.VMINPS(v, zero, v) // NaN stays NaN
			e := s.exp(v)
			c.VMULPS(scale, e, e)
			r.storeM(e, mask, at(y))
		})
	})
}
