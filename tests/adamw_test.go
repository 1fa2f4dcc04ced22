package tests

import (
	"maps"
	"math"
	"math/rand/v2"
)

// The optimizer's update kernel (AdamW) on t consecutive parameters,
// against the formulas in float64 from the same float32 inputs and
// constants, run by TestKernels like the row-wise kernels. Tolerances, with
// u = 2⁻²⁴: each moment is two products and a sum (3u of the terms'
// magnitudes, the gradient's scaling included); the parameter adds the
// decay's rounding, the update's own rounding (square root, scale, shift,
// division: 8u) and the new m's error carried through step/den.

func init() {
	kt := adamWTest
	kt.lengths = rowLengths
	kernelTests["AdamW"] = kt
	mutants = append(mutants, adamWMutants...)
}

// adamWConsts are the update's constants, as the optimizer passes them at
// step 3 with lr 1e-3, wd 0.1 and a clipping factor of 0.7.
var adamWConsts = map[string]float32{
	"decay": 1 - 1e-4, "gscale": 0.7, "b1": 0.9, "c1": 0.1, "b2": 0.95, "c2": 0.05,
	"eps": 1e-8, "step": float32(1e-3 / (1 - math.Pow(0.9, 3))), "rbc2": float32(1 / math.Sqrt(1-math.Pow(0.95, 3))),
}

var adamWTest = kernelTest{
	modes: []string{"random", "tiny"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		p, g, m, v := newMat(l), newMat(l), newMat(l), newMat(l)
		gs := 1e-2
		if mode == "tiny" { // gradients and moments near eps's scale
			gs = 1e-7
		}
		for i := 0; i < t; i++ {
			p.v[i] = float32(rng.NormFloat64())
			g.v[i] = float32(gs * rng.NormFloat64())
			m.v[i] = float32(gs * rng.NormFloat64())
			v.v[i] = float32(gs * gs * math.Abs(rng.NormFloat64()))
		}
		k := func(name string) float64 { return float64(adamWConsts[name]) }
		wp, wm, wv := newExpect("p", l), newExpect("m", l), newExpect("v", l)
		for i := 0; i < t; i++ {
			gi := float64(g.v[i]) * k("gscale")
			bm, cg := k("b1")*float64(m.v[i]), k("c1")*gi
			mi := bm + cg
			tm := 3 * u * (math.Abs(bm) + math.Abs(cg))
			bv, cg2 := k("b2")*float64(v.v[i]), k("c2")*gi*gi
			vi := bv + cg2
			// c2·g², with g = g·gscale rounded to float32 first: the square
			// doubles that rounding, so cg2 carries up to 5u of its own.
			tv := 3*u*math.Abs(bv) + 6*u*math.Abs(cg2)
			den := math.Sqrt(vi)*k("rbc2") + k("eps")
			upd := k("step") * mi / den
			pd := float64(p.v[i]) * k("decay")
			wm.set(i, 0, mi, tm+0x1p-140)
			wv.set(i, 0, vi, tv+0x1p-140)
			// den's own error from v's: √ halves the relative error.
			dden := math.Sqrt(vi) * k("rbc2") * tv / (2 * math.Max(vi, 0x1p-140))
			wp.set(i, 0, pd-upd, 2*u*math.Abs(pd)+8*u*math.Abs(upd)+k("step")*tm/den+math.Abs(upd)*dden/den+0x1p-140)
		}
		return scenario{
			ops: []*operand{{name: "p", lay: l, role: acc, vals: p.v}, {name: "g", lay: l, vals: g.v},
				{name: "m", lay: l, role: acc, vals: m.v}, {name: "v", lay: l, role: acc, vals: v.v}},
			scalars: maps.Clone(adamWConsts), // the mutants change theirs
			want:    map[string]*expect{"p": wp, "m": wm, "v": wv},
		}
	},
}

// adamWMutants are wrong updates the checks must catch.
var adamWMutants = []mutant{
	{"AdamW without the bias correction of v", "AdamW", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			s := a.scalar["rbc2"]
			a.scalar["rbc2"] = 1
			defer func() { a.scalar["rbc2"] = s }()
			return ok(a)
		}
	}},
	{"AdamW drops eps", "AdamW", "tiny", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			s := a.scalar["eps"]
			a.scalar["eps"] = 0
			defer func() { a.scalar["eps"] = s }()
			return ok(a)
		}
	}},
	{"AdamW skips the last element", "AdamW", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
}
