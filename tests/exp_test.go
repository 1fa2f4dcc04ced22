package tests

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The element-wise exponential kernel (Exp, aft_full's specs) on t
// consecutive floats, against math.Exp in float64 of min(x, 88), run by
// TestKernels like the row-wise kernels. Tolerance, with u = 2⁻²⁴: 4u
// relative (the vectorised exp's reduction and degree-5 polynomial measure
// 2.7u; the Go level rounds a float64 result once), plus 2⁻¹²⁶ absolute,
// as results below the smallest normal float32 may be flushed to +0.

func init() {
	kt := expTest
	kt.lengths = rowLengths
	kernelTests["Exp"] = kt
	mutants = append(mutants, expMutants...)
}

// expEdges are the special arguments of mode "edges", cycled over x.
var expEdges = []float64{
	0, math.Copysign(0, -1), math.Inf(-1), 1, -1, 1e-30, -1e-30, 88, 88.5, 1e4, -1e4,
	-87.3, -87.4, -103.9, -104, -150, 50, -50, 0.34657359, -0.34657359, 20.5, -20.5,
}

var expTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		x := newMat(l)
		for i := 0; i < t; i++ {
			if mode == "edges" {
				x.v[i] = float32(expEdges[i%len(expEdges)])
			} else {
				x.v[i] = float32(-110 + 200*rng.Float64()) // flush, ordinary and clamped
			}
		}
		w := newExpect("x", l)
		for i := 0; i < t; i++ {
			y := math.Exp(math.Min(float64(x.v[i]), 88))
			w.set(i, 0, y, 4*u*y+0x1p-126)
		}
		return scenario{
			ops:  []*operand{{name: "x", lay: l, role: acc, vals: x.v}},
			want: map[string]*expect{"x": w},
		}
	},
}

// expMutants are wrong exponentials the checks must catch.
var expMutants = []mutant{
	{"Exp skips the last element", "Exp", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
	{"Exp without the clamp at 88", "Exp", "edges", 11, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				if a.s["x"][i] > 1.6e38 { // e^88 ≈ 1.65e38: what exp(88.5) and exp(1e4) would not give
					a.s["x"][i] = float32(math.Inf(1))
				}
			}
			return r
		}
	}},
	{"Exp off by 1e-6 relative", "Exp", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["x"][i] *= 1 + 1e-6
			}
			return r
		}
	}},
}

// TestExpKernelsPropagateNaN checks that the kernels built on the clamped
// exponential (Exp, Gate, AFTFactors) turn a NaN argument into a NaN
// result at every level, as the Go level's min and exp do, and leave the
// elements around it as they are: a NaN upstream must reach the loss, not
// become e^88. 37 elements: whole vectors and a tail at either width.
func TestExpKernelsPropagateNaN(t *testing.T) {
	nan := float32(math.NaN())
	const n = 37
	in := func() []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%7) - 3
			if i%5 == 2 {
				x[i] = nan
			}
		}
		return x
	}
	check := func(what string, got []float32) {
		t.Helper()
		for i, y := range got {
			if isNaN := y != y; isNaN != (i%5 == 2) {
				t.Errorf("%s: element %d = %g (argument %g)", what, i, y, in()[i])
				return
			}
		}
	}
	tested := 0
	for _, name := range kernels.Names() {
		for _, s := range levelsOf(t, name) {
			what := name + " " + s.ISA.String()
			if s.Exp != nil {
				x := in()
				s.Exp(n, x)
				check(what+" Exp", x)
				tested++
			}
			if s.Gate != nil {
				q, z, y := in(), make([]float32, n), make([]float32, n)
				for i := range z {
					z[i] = 1
				}
				s.Gate(n, q, z, y)
				check(what+" Gate's σ", q)
				check(what+" Gate's y", y)
				tested++
			}
			if s.AFTFactors != nil {
				k, kappa, v := in(), make([]float32, n), make([]float32, n)
				kv, ek := make([]float32, n), make([]float32, n)
				for i := range v {
					v[i] = 1
				}
				s.AFTFactors(n, k, kappa, v, kv, ek)
				check(what+" AFTFactors' ek", ek)
				check(what+" AFTFactors' kv", kv)
				tested++
			}
		}
	}
	if tested == 0 {
		t.Fatal("no linked spec has Exp, Gate or AFTFactors")
	}
}
