package tests

import (
	"math"
	"math/rand/v2"
)

// The softmax alone and its backward (SoftmaxRows, SoftmaxRowsBack: the
// bf16 path's attention), against float64 references from the same
// float32 inputs, run by TestKernels at tValues (t < N, t = N, lengths
// that are no multiple of 8 or 16) on whole blocks (i0 = 0, i1 = t);
// softmax_strip_test.go calls them on strips of rows.
//
// SoftmaxRows: a = softmax over a row's keys (j ≤ i, or j < t for a
// bidirectional spec) of logits b, a fully masked row (all −Inf) giving
// a = 0. Modes:
// "random" (logits of σ 3), "extreme" (±1e4 mixed with ordinary ones),
// "masked" (rows all −Inf, −Inf but one key, about half −Inf), "alias"
// (masked rows, a is b). Tolerance: probTol per probability, as
// SoftmaxValue's.
//
// SoftmaxRowsBack: db = a ⊙ (g − Σ_j a g) row by row. Modes: "random"
// (probabilities with every fifth row zero, as a masked forward leaves
// it; normal g), "extreme" (g of ±1e4 mixed with ordinary values),
// "integers" (small integers: every sum exact, tolerance zero),
// "alias_a" (db is a) and "alias_g" (db is g). Tolerance: the row sum's
// (sumTol) carried through the product, and the difference's and the
// product's roundings.

func init() {
	kernelTests["SoftmaxRows"] = kernelTest{
		modes:    []string{"random", "extreme", "masked", "alias"},
		scenario: softmaxRowsScenario,
	}
	kernelTests["SoftmaxRowsBack"] = kernelTest{
		modes:    []string{"random", "extreme", "integers", "alias_a", "alias_g"},
		scenario: softmaxRowsBackScenario,
	}
	mutants = append(mutants, softmaxRowsMutants...)
}

func softmaxRowsScenario(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
	lb := e.logits(t)
	b := mixed(rng, lb, 3)
	switch mode {
	case "extreme":
		b = extremeLogits(rng, lb)
	case "masked", "alias":
		maskRows(rng, b)
	}
	ops := []*operand{
		{name: "b", lay: lb, vals: b.v},
		{name: "a", lay: lb, role: out},
	}
	if mode == "alias" {
		ops[1].alias = "b" // a is b
	}
	return scenario{ops: ops, want: map[string]*expect{"a": refSoftmaxRows(t, b)}}
}

// refSoftmaxRows: for i < t, a[i,j] = exp(b[i,j] − m_i) / Σ_{j'} exp(b[i,j'] − m_i)
// over the row's keys; a fully masked row is 0.
func refSoftmaxRows(t int, b mat) *expect {
	a := newExpect("a", b.lay)
	for i := 0; i < t; i++ {
		refSoftmaxRow(a, b, i)
	}
	return a
}

func softmaxRowsBackScenario(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
	l := e.logits(t)
	a, g := probabilities(rng, l, 2), mixed(rng, l, 1)
	switch mode {
	case "extreme":
		g = extremeLogits(rng, l)
	case "integers":
		a, g = ints(rng, l, 3), ints(rng, l, 3)
	}
	db := refSoftmaxRowsBack(t, a, g, l)
	if mode == "integers" {
		exactly(db)
	}
	ops := []*operand{
		{name: "a", lay: l, vals: a.v},
		{name: "g", lay: l, vals: g.v},
		{name: "db", lay: l, role: out},
	}
	switch mode {
	case "alias_a":
		ops[2].alias = "a" // db is a
	case "alias_g":
		ops[2].alias = "g" // db is g
	}
	return scenario{ops: ops, want: map[string]*expect{"db": db}}
}

// refSoftmaxRowsBack: db[i,j] = a[i,j]·(g[i,j] − Σ_{j'} a[i,j']·g[i,j'])
// over row i's keys.
func refSoftmaxRowsBack(t int, a, g mat, l layout) *expect {
	db := newExpect("db", l)
	for i := 0; i < t; i++ {
		L := l.rowLen(i)
		s, mag := 0.0, 0.0
		for j := 0; j < L; j++ {
			x := float64(a.at(i, j)) * float64(g.at(i, j))
			s += x
			mag += math.Abs(x)
		}
		es := sumTol(L, mag)
		for j := 0; j < L; j++ {
			aj, gj := float64(a.at(i, j)), float64(g.at(i, j))
			d := aj * (gj - s)
			db.set(i, j, d, math.Abs(aj)*(es+4*u*(math.Abs(gj)+math.Abs(s)))+4*u*math.Abs(d)+0x1p-140)
		}
	}
	return db
}

var softmaxRowsMutants = []mutant{
	{"leaves the last row unwritten", "SoftmaxRows", "random", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			out, r := a.s["a"], (a.t-1)*e.n
			keep := append([]float32(nil), out[r:r+a.t]...)
			ok(a)
			copy(out[r:r+a.t], keep)
			return 0
		}
	}},
	{"normalises without the diagonal", "SoftmaxRows", "masked", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			ok(a)
			out := a.s["a"]
			for i := 1; i < a.t; i++ {
				r := out[i*e.n : i*e.n+i+1]
				if d := 1 - r[i]; d > 0 {
					for j := range r {
						r[j] /= d
					}
				}
			}
			return 0
		}
	}},
	{"row sum leaves out the diagonal", "SoftmaxRowsBack", "random", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			p, g, db := a.s["a"], a.s["g"], a.s["db"]
			for i := 0; i < a.t; i++ {
				r := i * e.n
				s := 0.0
				for j := 0; j < i; j++ { // j < i: the diagonal term is missing
					s += float64(p[r+j]) * float64(g[r+j])
				}
				for j := 0; j <= i; j++ {
					db[r+j] = p[r+j] * (g[r+j] - float32(s))
				}
			}
			return 0
		}
	}},
	{"writes db before reading g (breaks db = g)", "SoftmaxRowsBack", "alias_g", 15, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			db := a.s["db"]
			for i := 0; i < a.t; i++ {
				clear(db[i*e.n : i*e.n+i+1])
			}
			return ok(a)
		}
	}},
}
