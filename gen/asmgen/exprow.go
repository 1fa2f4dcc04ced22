package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The element-wise exponential (kernels.ExpFunc) at the AVX-512 and AVX2
// levels: t consecutive floats, expUnroll vectors per iteration, then one
// at a time and a masked tail; each clamped to expClampHi and put through
// the softmax kernels' vectorised exp (exp.go), whose AVX2 form, valid for
// x ≤ 0 there, holds up to the clamp: round(88·log2e) + 127 = 254 still
// fits the exponent field its shift builds.

// expClampHi is the largest argument ExpFunc takes as is (e^88 ≈ 1.65e38).
const expClampHi = 88

// expUnroll is the number of vectors an iteration of the Exp loop handles.
const expUnroll = 4

func emitExp(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).exp() }

func (r *rowKit) exp() {
	x := r.param("x")
	s := r.simd
	hi := s.constVec("exp_hi", expClampHi)
	r.flatN(1, expUnroll, []reg.GPVirtual{x}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		v := r.get(at(x), mask)
		r.clampExp(hi, v)
		r.storeM(s.exp(v), mask, at(x))
	})
}

// clampExp sets v = min(v, expClampHi), hi holding the bound in every
// lane. v is VMINPS's second source, the one it returns when either is a
// NaN: a NaN stays NaN, as in the Go level's min (the bound as a
// broadcast memory operand would have to be that source, and would turn
// a NaN into e^88).
func (r *rowKit) clampExp(hi, v reg.VecVirtual) { r.c.VMINPS(v, hi, v) }
