package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The aft variants' σ(Q) gate (kernels.GateFunc, GateBackFunc) at the
// AVX-512 and AVX2 levels, over t consecutive floats: whole vectors
// gateUnroll at a time, then one at a time, then a masked tail (rowKit's
// flatN).
//
// Gate: σ = 1/(1 + e^min(−q, 88)) with the softmax kernels' vectorised exp
// (exp.go; its AVX2 form holds up to the clamp, as Exp's does) and one
// VDIVPS, then y = σ·z. GateBack repeats the Go version's four float32
// products in its order, without FMA, so every level gives the same bits.

// gateUnroll is the number of vectors an iteration of the gate loops
// handles: four on AVX-512's 32 registers, two on AVX2's 16, which the
// exponential's temporaries fill.
func (r *rowKit) gateUnroll() int {
	if r.avx512() {
		return 4
	}
	return 2
}

func emitGate(f *File, op catalog.Op, isa kernels.ISA)     { newRowKit(f, op, isa).gate() }
func emitGateBack(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).gateBack() }

func (r *rowKit) gate() {
	c := r.c
	q, z, y := r.param("q"), r.param("z"), r.param("y")
	s := r.simd
	one, zero, hi := s.constVec("gate_one", 1), r.vec(), s.constVec("exp_hi", expClampHi)
	r.zero(zero)
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{q, z, y}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		v := r.vec()
		c.VSUBPS(r.memOrLoad(at(q), mask), zero, v) // −q
		r.clampExp(hi, v)
		e := s.exp(v)
		c.VADDPS(one, e, e)
		c.VDIVPS(e, one, e) // σ
		r.storeM(e, mask, at(q))
		c.VMULPS(r.memOrLoad(at(z), mask), e, e)
		r.storeM(e, mask, at(y))
	})
}

func (r *rowKit) gateBack() {
	c := r.c
	dy, q, z, dq := r.param("dy"), r.param("q"), r.param("z"), r.param("dq")
	one := r.constVec("gate_one", 1)
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{dy, q, z, dq}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		g, sg := r.get(at(dy), mask), r.get(at(q), mask)
		a, om := r.vec(), r.vec()
		c.VMULPS(r.memOrLoad(at(z), mask), g, a) // dy·z
		c.VMULPS(sg, a, a)                       // ·σ
		c.VSUBPS(sg, one, om)                    // 1 − σ
		c.VMULPS(om, a, a)
		r.storeM(a, mask, at(dq))
		c.VMULPS(sg, g, g) // dz = dy·σ
		r.storeM(g, mask, at(dy))
	})
}
