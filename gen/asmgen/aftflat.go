package asmgen

import (
	"math"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The factorised aft_full's element-wise passes (kernels.AFTMaxFunc,
// AFTFactorsFunc, AFTQuotFunc, AFTQuotBackFunc, AFTKVBackFunc) at the
// AVX-512 and AVX2 levels, over t consecutive floats (rowKit's flatN,
// gateUnroll vectors at a time). AFTFactors takes Exp's clamp and
// exponential; the others repeat the Go version's float32 operations one
// for one, without FMA (AFTMax: MAXPS, whose comparison the Go version
// spells out), so every level gives the same bits.

func emitAFTMax(f *File, op catalog.Op, isa kernels.ISA)      { newRowKit(f, op, isa).aftMax() }
func emitAFTFactors(f *File, op catalog.Op, isa kernels.ISA)  { newRowKit(f, op, isa).aftFactors() }
func emitAFTQuot(f *File, op catalog.Op, isa kernels.ISA)     { newRowKit(f, op, isa).aftQuot() }
func emitAFTQuotBack(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).aftQuotBack() }
func emitAFTKVBack(f *File, op catalog.Op, isa kernels.ISA)   { newRowKit(f, op, isa).aftKVBack() }

// aftFactors: ek = e^min(k − kappa, 88), kv = ek·v.
func (r *rowKit) aftFactors() {
	c := r.c
	k, kappa, v, kv, ek := r.param("k"), r.param("kappa"), r.param("v"), r.param("kv"), r.param("ek")
	s := r.simd
	hi := s.constVec("exp_hi", expClampHi)
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{k, kappa, v, kv, ek}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		x := r.get(at(k), mask)
		c.VSUBPS(r.memOrLoad(at(kappa), mask), x, x)
		r.clampExp(hi, x)
		e := s.exp(x)
		r.storeM(e, mask, at(ek))
		c.VMULPS(r.memOrLoad(at(v), mask), e, e)
		r.storeM(e, mask, at(kv))
	})
}

// aftMax: kappa = kappa > k ? kappa : k (MAXPS with kappa first).
func (r *rowKit) aftMax() {
	c := r.c
	k, kappa := r.param("k"), r.param("kappa")
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{k, kappa}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		m := r.get(at(kappa), mask)
		c.VMAXPS(r.memOrLoad(at(k), mask), m, m)
		r.storeM(m, mask, at(kappa))
	})
}

// aftQuot: z = num/den.
func (r *rowKit) aftQuot() {
	c := r.c
	num, den, z := r.param("num"), r.param("den"), r.param("z")
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{num, den, z}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		q := r.get(at(num), mask)
		c.VDIVPS(r.memOrLoad(at(den), mask), q, q) // masked-off lanes: 0/0, not stored
		r.storeM(q, mask, at(z))
	})
}

// aftQuotBack: r = 1/den, dnum = dz·r, dden = −((dz·z)·r).
func (r *rowKit) aftQuotBack() {
	c := r.c
	dz, z, den, dnum, dden := r.param("dz"), r.param("z"), r.param("den"), r.param("dnum"), r.param("dden")
	one := r.constVec("gate_one", 1)
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{dz, z, den, dnum, dden}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		rc, g, a := r.vec(), r.get(at(dz), mask), r.vec()
		c.VDIVPS(r.memOrLoad(at(den), mask), one, rc) // masked-off lanes: 1/0, not stored
		c.VMULPS(rc, g, a)
		r.storeM(a, mask, at(dnum))
		c.VMULPS(r.memOrLoad(at(z), mask), g, g)
		c.VMULPS(rc, g, g)
		r.withConst(c.VXORPS_BCST, c.VXORPS, "sign_bit", math.Float32frombits(0x80000000), g, g)
		r.storeM(g, mask, at(dden))
	})
}

// aftKVBack: dv = ek·g1, dk = ek·((v·g1) + g2).
func (r *rowKit) aftKVBack() {
	c := r.c
	ek, v, g1, g2, dk, dv := r.param("ek"), r.param("v"), r.param("g1"), r.param("g2"), r.param("dk"), r.param("dv")
	r.flatN(1, r.gateUnroll(), []reg.GPVirtual{ek, v, g1, g2, dk, dv}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		e, g, a := r.get(at(ek), mask), r.get(at(g1), mask), r.vec()
		c.VMULPS(g, e, a)
		r.storeM(a, mask, at(dv))
		c.VMULPS(r.memOrLoad(at(v), mask), g, g)
		c.VADDPS(r.memOrLoad(at(g2), mask), g, g)
		c.VMULPS(g, e, e)
		r.storeM(e, mask, at(dk))
	})
}
