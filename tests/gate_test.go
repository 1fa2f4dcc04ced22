package tests

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The aft variants' σ(Q) gate (Gate, GateBack, in every aft spec) on t
// consecutive floats, against float64 references, run by TestKernels like
// the row-wise kernels. Tolerances, with u = 2⁻²⁴:
//   - Gate: σ = 1/(1 + e^min(−q, 88)) errs by the exponential's 4u (Exp's
//     bound) scaled by e/(1 + e) ≤ 1, plus the sum's and the quotient's
//     roundings: 6u relative; y = σ·z one more, 7u. Plus 2⁻¹²⁶ absolute
//     (times 1 + |z| for y): a σ below the smallest normal float32 (q
//     below −87.3, where the clamp makes it 1/(1 + e^88)) may be flushed
//     to +0.
//   - GateBack: four correctly rounded float32 operations, ((dy·z)·σ)·(1 −
//     σ) and dy·σ: 5u relative, plus 2⁻¹²⁶ for products in the subnormal
//     range. Every level performs the same operations in the same order,
//     which TestGateBackMatchesGoLevel checks bit for bit.

func init() {
	for name, kt := range map[string]kernelTest{"Gate": gateTest, "GateBack": gateBackTest} {
		kt.lengths = rowLengths
		kernelTests[name] = kt
	}
	mutants = append(mutants, gateMutants...)
}

// gateEdges are the special q of Gate's mode "edges", cycled over q.
var gateEdges = []float64{
	0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), 88, -88, 87.5, -87.5, 100, -100, 1e4, -1e4,
	1e-30, -1e-30, 15.9, -15.9, 17, -17, 0.5, -0.5, 40, -40,
}

// gateRef is σ(q) as the kernels define it, in float64.
func gateRef(q float32) float64 { return 1 / (1 + math.Exp(math.Min(-float64(q), 88))) }

var gateTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		q, z := newMat(l), newMat(l)
		for i := 0; i < t; i++ {
			if mode == "edges" {
				q.v[i] = float32(gateEdges[i%len(gateEdges)])
			} else {
				q.v[i] = float32(-110 + 220*rng.Float64()) // flushed, saturated and ordinary
			}
			z.v[i] = float32(rng.NormFloat64() * 3)
		}
		wq, wy := newExpect("q", l), newExpect("y", l)
		for i := 0; i < t; i++ {
			s := gateRef(q.v[i])
			wq.set(i, 0, s, 6*u*s+0x1p-126)
			y := s * float64(z.v[i])
			wy.set(i, 0, y, 7*u*math.Abs(y)+0x1p-126*(1+math.Abs(float64(z.v[i]))))
		}
		return scenario{
			ops: []*operand{
				{name: "q", lay: l, role: acc, vals: q.v},
				{name: "z", lay: l, role: in, vals: z.v},
				{name: "y", lay: l, role: out},
			},
			want: map[string]*expect{"q": wq, "y": wy},
		}
	},
}

// gateBackInputs returns dy, σ and z for t elements: σ over (0, 1) with
// its ends (0, 1, the smallest normal, 1 − u) in mode "edges".
func gateBackInputs(t int, mode string, rng *rand.Rand) (dy, q, z []float32) {
	dy, q, z = make([]float32, t), make([]float32, t), make([]float32, t)
	edges := []float32{0, 1, 0x1p-126, 1 - 0x1p-24, 0.5, 1e-20, 0.999}
	for i := range t {
		dy[i] = float32(rng.NormFloat64())
		z[i] = float32(rng.NormFloat64() * 3)
		if mode == "edges" && i%2 == 0 {
			q[i] = edges[i/2%len(edges)]
		} else {
			q[i] = float32(gateRef(float32(rng.NormFloat64() * 6)))
		}
	}
	return dy, q, z
}

var gateBackTest = kernelTest{
	modes: []string{"random", "edges"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		l := perRow(t)
		dy, q, z := gateBackInputs(t, mode, rng)
		wdy, wdq := newExpect("dy", l), newExpect("dq", l)
		for i := 0; i < t; i++ {
			g, s, zz := float64(dy[i]), float64(q[i]), float64(z[i])
			dq := g * zz * s * (1 - s)
			wdq.set(i, 0, dq, 5*u*math.Abs(dq)+0x1p-126)
			wdy.set(i, 0, g*s, u*math.Abs(g*s)+0x1p-126)
		}
		return scenario{
			ops: []*operand{
				{name: "dy", lay: l, role: acc, vals: dy},
				{name: "q", lay: l, role: in, vals: q},
				{name: "z", lay: l, role: in, vals: z},
				{name: "dq", lay: l, role: out},
			},
			want: map[string]*expect{"dy": wdy, "dq": wdq},
		}
	},
}

// gateMutants are wrong gates the checks must catch.
var gateMutants = []mutant{
	{"Gate skips the last element", "Gate", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			if a.t > 0 {
				a.t--
			}
			return ok(a)
		}
	}},
	{"Gate's y from the old q", "Gate", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			old := append([]float32(nil), a.s["q"][:a.t]...)
			r := ok(a)
			for i := range a.t {
				a.s["y"][i] = old[i] * a.s["z"][i]
			}
			return r
		}
	}},
	{"Gate computes σ(−q)", "Gate", "edges", 11, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["q"][i] = 1 - a.s["q"][i]
				a.s["y"][i] = a.s["q"][i] * a.s["z"][i]
			}
			return r
		}
	}},
	{"Gate off by 1e-6 relative", "Gate", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for i := range a.t {
				a.s["q"][i] *= 1 + 1e-6
			}
			return r
		}
	}},
	{"GateBack leaves dy as the gradient of Y", "GateBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			dy := append([]float32(nil), a.s["dy"][:a.t]...)
			r := ok(a)
			copy(a.s["dy"], dy)
			return r
		}
	}},
	{"GateBack without the factor 1 − σ", "GateBack", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			dy := append([]float32(nil), a.s["dy"][:a.t]...)
			r := ok(a)
			for i := range a.t {
				a.s["dq"][i] = dy[i] * a.s["z"][i] * a.s["q"][i]
			}
			return r
		}
	}},
}

// TestGateBackMatchesGoLevel checks that every level's GateBack gives the
// Go level's bits (the same float32 products in the same order; the Go
// compiler has no multiply-add to fuse there), on random and edge inputs
// of 1000 elements (whole vectors and a tail).
func TestGateBackMatchesGoLevel(t *testing.T) {
	for _, name := range kernels.Names() {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(spec.Variant, "aft") {
			continue
		}
		const n = 1000
		var dy0, q, z []float32
		for _, mode := range []string{"random", "edges"} {
			a, b, c := gateBackInputs(n, mode, rngFor("gateBits", name, mode))
			dy0, q, z = append(dy0, a...), append(q, b...), append(z, c...)
		}
		var goDy, goDq []float32
		for _, s := range levelsOf(t, name) {
			if s.GateBack == nil {
				t.Fatalf("%s %s: no GateBack", name, s.ISA)
			}
			dy, dq := append([]float32(nil), dy0...), make([]float32, len(dy0))
			s.GateBack(len(dy), dy, q, z, dq)
			if s.ISA == kernels.Go {
				goDy, goDq = dy, dq
				continue
			}
			for i := range dy {
				if math.Float32bits(dy[i]) != math.Float32bits(goDy[i]) || math.Float32bits(dq[i]) != math.Float32bits(goDq[i]) {
					t.Errorf("%s %s: element %d (dy %g, σ %g, z %g) gives dz %g, dq %g; the Go level %g, %g",
						name, s.ISA, i, dy0[i], q[i], z[i], dy[i], dq[i], goDy[i], goDq[i])
					break
				}
			}
		}
	}
}
