package tests

import (
	"math"
	"math/rand/v2"
)

// The decoder's attention row: Attend (AttendDH on a head's cached values,
// AttendKV on aft_full's cached factors, 2D wide) and Scores
// (VanillaScores), run by TestKernels at tValues' lengths (1, lengths that
// are no multiple of the vector width, N − 1 and N), against float64
// references from the same float32 inputs.
//
// Attend: m = max b, e_j = e^(b_j − m), s = Σ e_j; b becomes e, y = Σ e_j·v_j
// / s, and s is returned. Modes: "random" (logits of σ 3), "extreme"
// (logits of ±1e4 mixed with small ones: the maximum subtraction must come
// first) and "masked" (about half the logits −∞, never the first: their
// weights are exactly 0). Tolerances: each e_j its exponential's error and
// the rounding of b_j − m (probTol's, unnormalised); y the sum's (sumTol)
// plus the weights' and the normaliser's errors carried through; s the
// sum's plus the weights'.
//
// Scores: b_j = scale·Σ_p q[p]·k[j·DH+p]. Modes "random" (scale 1/√DH) and
// "integers" (small integers, scale ¼: every sum exact, so the result must
// be exact). Tolerance: sumTol over the DH products.

func init() {
	for _, f := range []string{"AttendDH", "AttendKV"} {
		kernelTests[f] = attendTest
	}
	kernelTests["VanillaScores"] = scoresTest
	mutants = append(mutants, attendMutants...)
}

// attendWidth is the row width of an Attend field.
func (e *env) attendWidth(field string) int {
	if field == "AttendKV" {
		return 2 * e.d
	}
	return e.dh
}

var attendTest = kernelTest{
	modes: []string{"random", "extreme", "masked"},
	scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
		W := e.attendWidth(field)
		lb, lv, ly := vecLayout(t), rowsOf(t, W), vecLayout(W)
		b, v := mixed(rng, lb, 3), mixed(rng, lv, 1)
		for j := range b.v {
			switch {
			case mode == "extreme" && rng.IntN(3) == 0:
				b.v[j] += 1e4
			case mode == "extreme" && rng.IntN(2) == 0:
				b.v[j] -= 1e4
			case mode == "masked" && j > 0 && rng.IntN(2) == 0:
				b.v[j] = float32(math.Inf(-1))
			}
		}
		m := math.Inf(-1)
		for _, x := range b.v {
			m = math.Max(m, float64(x))
		}
		eb := newExpect("b", lb)
		ew, et := make([]float64, t), make([]float64, t)
		s, sTol := 0.0, 0.0
		for j, x := range b.v {
			d := float64(x) - m
			ew[j] = math.Exp(d)
			et[j] = probTol(1, d, ew[j])
			eb.set(0, j, ew[j], et[j])
			s += ew[j]
			sTol += et[j]
		}
		sTol += sumTol(t, s)
		y := newExpect("y", ly)
		for c := 0; c < W; c++ {
			sum, mag, errW := 0.0, 0.0, 0.0
			for j := 0; j < t; j++ {
				x := float64(v.at(j, c))
				sum += ew[j] * x
				mag += math.Abs(ew[j] * x)
				errW += et[j] * math.Abs(x)
			}
			yc := sum / s
			y.set(0, c, yc, (errW+sumTol(t+1, mag))/s+math.Abs(yc)*(sTol/s+2*u))
		}
		return scenario{
			ops: []*operand{
				{name: "b", lay: lb, role: acc, vals: b.v},
				{name: "v", lay: lv, vals: v.v},
				{name: "y", lay: ly, role: out},
			},
			want: map[string]*expect{"b": eb, "y": y, "return": scalarExpect(s, sTol)},
		}
	},
}

var scoresTest = kernelTest{
	modes: []string{"random", "integers"},
	scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
		lq, lk, lb := vecLayout(e.dh), rowsOf(t, e.dh), vecLayout(t)
		q, k := mixed(rng, lq, 1), mixed(rng, lk, 1)
		scale := 1 / math.Sqrt(float64(e.dh))
		if mode == "integers" {
			q, k, scale = ints(rng, lq, 3), ints(rng, lk, 3), 0.25
		}
		scale = float64(float32(scale))
		b := newExpect("b", lb)
		for j := 0; j < t; j++ {
			s, mag := 0.0, 0.0
			for p := 0; p < e.dh; p++ {
				x := float64(q.v[p]) * float64(k.at(j, p))
				s += x
				mag += math.Abs(x)
			}
			b.set(0, j, scale*s, sumTol(e.dh+1, scale*mag))
		}
		if mode == "integers" {
			exactly(b)
		}
		return scenario{
			ops: []*operand{
				{name: "q", lay: lq, vals: q.v},
				{name: "k", lay: lk, vals: k.v},
				{name: "b", lay: lb, role: out},
			},
			scalars: map[string]float32{"scale": float32(scale)},
			want:    map[string]*expect{"b": b},
		}
	},
}

// attendMutants are wrong attention rows the checks must catch.
var attendMutants = []mutant{
	{"Attend skips the last cached row", "AttendDH", "random", 13, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			a.t--
			return ok(a)
		}
	}},
	{"Attend leaves y unnormalised", "AttendKV", "random", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			for c := range a.s["y"] {
				a.s["y"][c] *= r
			}
			return r
		}
	}},
	{"Scores skips the last key component", "VanillaScores", "integers", 7, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			q, k, b := a.s["q"], a.s["k"], a.s["b"]
			for j := range a.t {
				b[j] -= a.scalar["scale"] * q[e.dh-1] * k[j*e.dh+e.dh-1]
			}
			return r
		}
	}},
}
