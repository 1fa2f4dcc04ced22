package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The optimizer's update (kernels.AdamWFunc) at the AVX-512 and AVX2
// levels: t consecutive floats of a parameter and its gradient and
// moments, a vector at a time with a masked tail, in float32 with fused
// multiply-adds: m ← b1·m + c1·g', v ← b2·v + c2·g'², p ← p·decay −
// step·m / (√v·rbc2 + eps), g' = g·gscale.

func emitAdamW(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).adamW() }

func (r *rowKit) adamW() {
	c := r.c
	p, g, m, v := r.param("p"), r.param("g"), r.param("m"), r.param("v")
	k := map[string]reg.VecVirtual{}
	for _, name := range []string{"decay", "gscale", "b1", "c1", "b2", "c2", "eps", "step", "rbc2"} {
		k[name] = r.bcastParam(name)
	}
	r.flatN(1, 1, []reg.GPVirtual{p, g, m, v}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		gv := r.get(at(g), mask)
		c.VMULPS(k["gscale"], gv, gv) // g' = g·gscale
		mv := r.get(at(m), mask)
		c.VMULPS(k["b1"], mv, mv)
		c.VFMADD231PS(k["c1"], gv, mv) // m = b1·m + c1·g'
		r.storeM(mv, mask, at(m))
		vv := r.get(at(v), mask)
		c.VMULPS(k["b2"], vv, vv)
		c.VMULPS(gv, gv, gv)
		c.VFMADD231PS(k["c2"], gv, vv) // v = b2·v + c2·g'²
		r.storeM(vv, mask, at(v))
		c.VSQRTPS(vv, vv)
		c.VFMADD213PS(k["eps"], k["rbc2"], vv) // √v·rbc2 + eps
		c.VMULPS(k["step"], mv, mv)
		c.VDIVPS(vv, mv, mv) // step·m / (√v·rbc2 + eps)
		pv := r.get(at(p), mask)
		c.VFMSUB213PS(mv, k["decay"], pv) // p·decay − update
		r.storeM(pv, mask, at(p))
	})
}
