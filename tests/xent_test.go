package tests

import (
	"math"
	"math/rand/v2"
)

// The cross-entropy's row kernels (SoftmaxStats, SoftmaxScale) over t rows
// of Vocab logits: scenarios, float64 references and mutants, run by
// TestKernels like the other row-wise kernels.
//
// Tolerances, with u = 2⁻²⁴: the max is exact. Each term exp(x − mx) of s
// errs by the exp's 2.7u relative, plus u·|x − mx| from rounding the
// difference; the sum adds (V + 4)·u·s. SoftmaxScale's y errs likewise
// per element, plus a rounding of the product with scale.

func init() {
	for name, kt := range map[string]kernelTest{
		"SoftmaxStats": softmaxStatsTest,
		"SoftmaxScale": softmaxScaleTest,
	} {
		kt.lengths = rowLengths
		kernelTests[name] = kt
	}
	mutants = append(mutants, xentMutants...)
}

// logits fills t rows of Vocab logits: "random" N(0, 3); "extreme" rows
// mixing ±1e4, ±30 and ties of one value, so that most exponentials
// underflow and the max decides the sum.
func logits(rng *rand.Rand, t, v int, mode string) mat {
	m := newMat(rowsOf(t, v))
	for k := range m.v {
		if mode == "random" {
			m.v[k] = float32(3 * rng.NormFloat64())
			continue
		}
		r := k / v
		switch {
		case r%3 == 0:
			m.v[k] = 7 // a row of ties
		case rng.IntN(4) == 0:
			m.v[k] = float32(1e4*float64(1-2*rng.IntN(2)) + rng.NormFloat64())
		default:
			m.v[k] = float32(30*float64(1-2*rng.IntN(2)) + rng.NormFloat64())
		}
	}
	return m
}

// refStats is the row max and Σ exp(x − max) in float64, with the
// tolerance of s.
func refStats(t, v int, x mat) (mx, s *expect) {
	mx, s = newExpect("mx", perRow(t)), newExpect("s", perRow(t))
	for r := 0; r < t; r++ {
		row := rowVals(x, r)
		m := math.Inf(-1)
		for _, a := range row {
			m = math.Max(m, a)
		}
		sum, tol := 0.0, 0.0
		for _, a := range row {
			e := math.Exp(a - m)
			sum += e
			tol += e * (3*u + u*math.Abs(a-m))
		}
		mx.set(r, 0, m, 0)
		s.set(r, 0, sum, tol+float64(v+4)*u*sum)
	}
	return mx, s
}

var softmaxStatsTest = kernelTest{
	modes: []string{"random", "extreme"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		x := logits(rng, t, e.vocab, mode)
		mx, s := refStats(t, e.vocab, x)
		return scenario{
			ops: []*operand{{name: "x", lay: x.lay, vals: x.v},
				{name: "mx", lay: perRow(t), role: out}, {name: "s", lay: perRow(t), role: out}},
			want: map[string]*expect{"mx": mx, "s": s},
		}
	},
}

// softmaxScaleTest passes each row's log Σ exp rounded to float32, and in
// mode "clamp" a lse 1e-3 below the row's max on every other row, where
// the kernel must clamp x − lse at 0.
var softmaxScaleTest = kernelTest{
	modes: []string{"random", "extreme", "clamp"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		v := e.vocab
		xmode := mode
		if mode == "clamp" {
			xmode = "random"
		}
		x := logits(rng, t, v, xmode)
		lse := newMat(perRow(t))
		for r := 0; r < t; r++ {
			row := rowVals(x, r)
			m := math.Inf(-1)
			for _, a := range row {
				m = math.Max(m, a)
			}
			s := 0.0
			for _, a := range row {
				s += math.Exp(a - m)
			}
			lse.v[r] = float32(m + math.Log(s))
			if mode == "clamp" && r%2 == 1 {
				lse.v[r] = float32(m - 1e-3)
			}
		}
		scale := float32(1 / (1 + rng.Float64()))
		y := newExpect("y", rowsOf(t, v))
		for k, a := range x.v {
			r, c := y.lay.coord(k)
			d := math.Min(float64(a)-float64(lse.v[r]), 0)
			w := math.Exp(d) * float64(scale)
			y.set(r, c, w, w*(5*u+u*math.Abs(d))+0x1p-140)
		}
		return scenario{
			ops: []*operand{{name: "x", lay: x.lay, vals: x.v}, {name: "lse", lay: perRow(t), vals: lse.v},
				{name: "y", lay: rowsOf(t, v), role: out}},
			scalars: map[string]float32{"scale": scale},
			want:    map[string]*expect{"y": y},
		}
	},
}

// xentMutants are wrong cross-entropy kernels the checks must catch.
var xentMutants = []mutant{
	{"SoftmaxStats leaves out the last logit", "SoftmaxStats", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			v := e.vocab
			for r := 0; r < a.t; r++ {
				x := a.s["x"][r*v : r*v+v]
				a.s["s"][r] -= float32(math.Exp(float64(x[v-1] - a.s["mx"][r])))
			}
			return 0
		}
	}},
	{"SoftmaxStats sums without the max shift", "SoftmaxStats", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			for r := 0; r < a.t; r++ {
				a.s["s"][r] *= float32(math.Exp(float64(a.s["mx"][r])))
			}
			return 0
		}
	}},
	{"SoftmaxScale without the clamp", "SoftmaxScale", "clamp", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			v := e.vocab
			x, lse, y, sc := a.s["x"], a.s["lse"], a.s["y"], a.scalar["scale"]
			for r := 0; r < a.t; r++ {
				for c := 0; c < v; c++ {
					y[r*v+c] = float32(math.Exp(float64(x[r*v+c]-lse[r]))) * sc
				}
			}
			return 0
		}
	}},
}
