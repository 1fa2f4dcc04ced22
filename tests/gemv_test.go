package tests

import (
	"math"
	"math/rand/v2"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// The decoder's linear layers (GemvDD, GemvDF, GemvFD, GemvDV: a
// kernels.GemvFunc per (K, N) pair) on t rows, against y = x·Wᵀ + bias in
// float64 from the same float32 inputs, run by TestKernels like the
// row-wise kernels (t rows, 0 and several included). The weight is drawn
// as the model holds it, W [N, K], and passed packed (kernels.GemvPack),
// so the reference reads W(j, p) where the formula does: a kernel reading
// the packed layout wrongly is caught, and the packing itself is checked
// on the way. Modes: "random" (normal values, one in ten zero, with a
// bias), "nobias" (bias empty: no bias) and "integers" (small integers:
// every partial sum exact in float32, whatever the order, so the result
// must be exact). Tolerance: sumTol over the K products and the bias.

func init() {
	for _, name := range []string{"GemvDD", "GemvDF", "GemvFD", "GemvDV"} {
		kt := gemvTest
		kt.lengths = func(e *env) []int { return []int{0, 1, 2, 7} }
		kernelTests[name] = kt
	}
	mutants = append(mutants, gemvMutants...)
}

// gemvShape is field's (K, N).
func (e *env) gemvShape(field string) (k, n int) {
	switch field {
	case "GemvDD":
		return e.d, e.d
	case "GemvDF":
		return e.d, e.ffn
	case "GemvFD":
		return e.ffn, e.d
	case "GemvDV":
		return e.d, e.vocab
	}
	panic("no Gemv shape for " + field)
}

var gemvTest = kernelTest{
	modes: []string{"random", "nobias", "integers"},
	scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
		K, N := e.gemvShape(field)
		lx, lw, lb, ly := rowsOf(t, K), rowsOf(N, K), vecLayout(N), rowsOf(t, N)
		x, w, b := mixed(rng, lx, 1), mixed(rng, lw, 1/math.Sqrt(float64(K))), mixed(rng, lb, 1)
		if mode == "integers" {
			x, w, b = ints(rng, lx, 3), ints(rng, lw, 3), ints(rng, lb, 3)
		}
		packed := newMat(vecLayout(N * K))
		kernels.GemvPack(packed.v, w.v, N, K)
		y := newExpect("y", ly)
		for r := 0; r < t; r++ {
			for j := 0; j < N; j++ {
				s, mag := 0.0, 0.0
				for p := 0; p < K; p++ {
					prod := float64(x.at(r, p)) * float64(w.at(j, p))
					s += prod
					mag += math.Abs(prod)
				}
				if mode != "nobias" {
					s += float64(b.v[j])
					mag += math.Abs(float64(b.v[j]))
				}
				y.set(r, j, s, sumTol(K+1, mag))
			}
		}
		if mode == "integers" {
			exactly(y)
		}
		return scenario{
			ops: []*operand{
				{name: "x", lay: lx, vals: x.v},
				{name: "w", lay: vecLayout(N * K), vals: packed.v},
				{name: "bias", lay: lb, vals: b.v, empty: mode == "nobias"},
				{name: "y", lay: ly, role: out},
			},
			want: map[string]*expect{"y": y},
		}
	},
}

// gemvMutants are wrong linear layers the checks must catch.
var gemvMutants = []mutant{
	{"Gemv reads W unpacked", "GemvDD", "random", 2, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			w := a.s["w"]
			orig := append([]float32(nil), w...)
			// Undo the packing: the kernel then reads W's own layout as
			// if it were packed (the layouts differ when N > 1).
			K, N := e.gemvShape("GemvDD")
			un := make([]float32, len(w))
			for j0 := 0; j0 < N; j0 += kernels.GemvCols {
				cols := min(kernels.GemvCols, N-j0)
				for j := 0; j < cols; j++ {
					for p := 0; p < K; p++ {
						un[(j0+j)*K+p] = w[j0*K+p*cols+j]
					}
				}
			}
			copy(w, un)
			defer copy(w, orig)
			return ok(a)
		}
	}},
	{"Gemv skips the last inner index", "GemvFD", "integers", 2, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			K, N := e.gemvShape("GemvFD")
			r := ok(a)
			x, w, y := a.s["x"], a.s["w"], a.s["y"]
			for i := range a.t {
				for j0 := 0; j0 < N; j0 += kernels.GemvCols {
					cols := min(kernels.GemvCols, N-j0)
					for j := 0; j < cols; j++ {
						y[i*N+j0+j] -= x[i*K+K-1] * w[j0*K+(K-1)*cols+j]
					}
				}
			}
			return r
		}
	}},
	{"Gemv drops the bias of the last column", "GemvDV", "integers", 1, func(e *env, ok invoker) invoker {
		return func(a args) float32 {
			r := ok(a)
			_, N := e.gemvShape("GemvDV")
			if b := a.s["bias"]; len(b) > 0 {
				for i := range a.t {
					a.s["y"][i*N+N-1] -= b[N-1]
				}
			}
			return r
		}
	}},
}
