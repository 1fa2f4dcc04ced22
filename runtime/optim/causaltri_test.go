package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/parallel"
)

// TestTriCursor: the runs cover [lo, hi) in order, alternate as they
// should, and call an element live exactly when its column ≤ its row.
func TestTriCursor(t *testing.T) {
	for _, n := range []int{1, 2, 5, 7, 64} {
		p := &model.Param{Shape: []int{3, n, n}, Data: make([]float32, 3*n*n)}
		for _, r := range [][2]int{{0, 3 * n * n}, {1, 3*n*n - 2}, {n + 1, 2*n*n + 3}, {4, 4}} {
			lo, hi := min(r[0], len(p.Data)), min(r[1], len(p.Data))
			var c triCursor
			c.start(p, lo, hi)
			at := lo
			for {
				a, b, live, ok := c.next()
				if !ok {
					break
				}
				if a != at || b <= a || b > hi {
					t.Fatalf("n %d [%d, %d): run [%d, %d) after %d", n, lo, hi, a, b, at)
				}
				for e := a; e < b; e++ {
					if want := e%n <= e/n%n; live != want {
						t.Fatalf("n %d: element %d (row %d, column %d) live %v", n, e, e/n%n, e%n, live)
					}
				}
				at = b
			}
			if at != max(lo, hi) {
				t.Fatalf("n %d [%d, %d): runs end at %d", n, lo, hi, at)
			}
		}
	}
}

// triParams is a parameter list with CausalTri stacks of several sizes (n
// odd and even, rows crossing chunk boundaries, ragged last chunks) among
// plain tensors; gradients random on the live triangle, 0 on the masked
// one (as Backward leaves them). plain leaves the marks off.
func triParams(seed uint64, plain bool) []*model.Param {
	rng := rand.New(rand.NewPCG(seed, 11))
	var ps []*model.Param
	for i, shape := range [][]int{{37}, {3, 129, 129}, {64, 64}, {2, 7, 7}, {chunkSize + 3}, {2, 181, 181}, {1, 1}} {
		n := 1
		for _, s := range shape {
			n *= s
		}
		tri := len(shape) > 1 && !plain
		p := &model.Param{Name: fmt.Sprint("p", i), Shape: shape, Data: make([]float32, n), Grad: make([]float32, n), Decay: len(shape) > 1, CausalTri: tri}
		for j := range p.Data {
			p.Data[j] = float32(rng.NormFloat64() * 0.02)
		}
		if i == 1 {
			p.Data[5] = float32(math.Copysign(0, -1)) // masked (row 0, column 5): -0 stays -0
			p.Data[6] = 1e-41                         // subnormal
		}
		ps = append(ps, p)
	}
	return ps
}

// triGrads fills new gradients: random where the element is live (or the
// tensor is not a stack of square matrices), 0 on the masked triangles.
func triGrads(ps []*model.Param, rng *rand.Rand) {
	for _, p := range ps {
		nn := p.Shape[len(p.Shape)-1]
		sq := len(p.Shape) > 1 && p.Shape[len(p.Shape)-2] == nn
		for j := range p.Grad {
			p.Grad[j] = 0
			if !sq || j%nn <= j/nn%nn {
				p.Grad[j] = float32(rng.NormFloat64() * math.Pow(10, -4*rng.Float64()))
			}
		}
	}
}

// TestCausalTriStepBitIdentical: 5 steps with the marks (masked triangles
// decayed only, skipped by the norm) give the unmarked path's weights,
// moments and norms bit for bit, with the kernel and in Go, on 1 and 2
// workers; the marked path is taken. Moments ≠ 0 on a masked triangle
// (written before the first step, or later and announced with
// MomentsChanged) turn it off for that parameter, with the same bits again;
// so does eps 0 (0/0 on the triangle: the plain path's NaN).
func TestCausalTriStepBitIdentical(t *testing.T) {
	sets := kernelSets(t)
	for _, kern := range []bool{false, true} {
		for _, workers := range []int{1, 2} {
			for _, eps := range []float64{DefaultEps, 0} {
				t.Run(fmt.Sprintf("kernel=%v/workers=%d/eps=%g", kern, workers, eps), func(t *testing.T) {
					cfg := DefaultConfig()
					cfg.Eps = eps
					mk := func(plain bool) *AdamW {
						o := NewAdamW(triParams(1, plain), cfg)
						if kern {
							o.Kernel = sets[len(sets)-1].AdamW
						}
						if workers > 1 {
							pool := parallel.New(workers)
							t.Cleanup(pool.Close)
							o.Runner = pool
						}
						return o
					}
					got, ref := mk(false), mk(true)
					rg, rr := rand.New(rand.NewPCG(2, 2)), rand.New(rand.NewPCG(2, 2))
					step := func(what string, lr float64) {
						t.Helper()
						triGrads(got.Params, rg)
						triGrads(ref.Params, rr)
						ng, nr := got.GradNorm(), ref.GradNorm()
						if math.Float64bits(ng) != math.Float64bits(nr) || GradNorm(got.Params) != ng {
							t.Fatalf("%s: norm %.17g (free function %.17g), unmarked %.17g", what, ng, GradNorm(got.Params), nr)
						}
						got.Step(lr, ClipScale(ng, 0.5))
						ref.Step(lr, ClipScale(nr, 0.5))
						sameState(t, what, got, ref)
					}
					for s := range 5 {
						step(fmt.Sprint("step ", s+1), 3e-2)
					}
					for i, ok := range got.tri {
						if ok != isTri(got.Params[i]) {
							t.Errorf("%s: decay-only %v", got.Params[i].Name, ok)
						}
					}
					if !slices.Contains(got.tri, true) {
						t.Fatal("no parameter took the decay-only path")
					}

					// Moments on the masked triangle, announced.
					dirty := 1 // p1: [3, 129, 129]
					for _, o := range []*AdamW{got, ref} {
						o.M[dirty][7], o.V[dirty][7] = 1e-3, 1e-6 // row 0, column 7
						o.MomentsChanged()
					}
					step("moments written, announced", 1e-2)
					if got.tri[dirty] {
						t.Errorf("moments ≠ 0 on %s's masked triangle, yet decay-only", got.Params[dirty].Name)
					}
					step("moments written, next step", 1e-2)
				})
			}
		}
	}
	// Moments on a masked triangle before the first step: checked there.
	o, ref := NewAdamW(triParams(1, false), DefaultConfig()), NewAdamW(triParams(1, true), DefaultConfig())
	o.M[3][1], ref.M[3][1] = 0.5, 0.5 // p3 [2, 7, 7]: row 0, column 1
	o.Step(1e-2, 1)
	ref.Step(1e-2, 1)
	sameState(t, "moments before the first step", o, ref)
	if o.tri[3] || !o.tri[1] {
		t.Errorf("decay-only per parameter %v: want p3 off, p1 on", o.tri)
	}
}

// sameState fails unless got and ref hold bit-identical weights and moments.
func sameState(t *testing.T, what string, got, ref *AdamW) {
	t.Helper()
	for i, p := range got.Params {
		for _, s := range []struct {
			name string
			x, y []float32
		}{{"weight", p.Data, ref.Params[i].Data}, {"m", got.M[i], ref.M[i]}, {"v", got.V[i], ref.V[i]}} {
			for j := range s.x {
				if math.Float32bits(s.x[j]) != math.Float32bits(s.y[j]) {
					t.Fatalf("%s: %s of %s[%d] = %g (%#x), unmarked path's %g (%#x)", what, s.name, p.Name, j, s.x[j], math.Float32bits(s.x[j]), s.y[j], math.Float32bits(s.y[j]))
				}
			}
		}
	}
}

// TestZeroIsDecayCatchesKernels: the probe that guards the decay-only
// path rejects updates whose result on g = m = v = 0 is not p·decay: one
// that subtracts −0 (turns −0 weights into +0), one that leaves a tiny
// step, one that writes m.
func TestZeroIsDecayCatchesKernels(t *testing.T) {
	sets := kernelSets(t)
	real := sets[len(sets)-1].AdamW
	o := NewAdamW(triParams(1, false), DefaultConfig())
	o.Kernel = real
	o.step = stepJob{o: o, lr: 1e-3, gradScale: 1, stepSize: 1e-3, sqrtBC2: 0.5}
	if !o.step.zeroIsDecay(0.999) || !o.step.zeroIsDecay(1) {
		t.Fatal("the real kernel fails the probe")
	}
	for name, k := range map[string]func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32){
		"p·decay + 0 (−0 becomes +0)": func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			real(n, p, g, m, v, decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
			for i := range p[:n] {
				p[i] += 0
			}
		},
		"a tiny step": func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			real(n, p, g, m, v, decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
			p[0] -= 1e-45
		},
		"m written": func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			real(n, p, g, m, v, decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
			m[n-1] = float32(math.Copysign(0, -1))
		},
	} {
		o.Kernel = k
		if o.step.zeroIsDecay(0.999) {
			t.Errorf("the probe accepts %s", name)
		}
	}
}

// plainSumSquares is sumSquares as it was before the masked triangles and
// the loads ahead: the reference the rewritten sum must match bit for bit.
func plainSumSquares(g []float32) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(g); i += 4 {
		q := g[i : i+4 : i+4]
		s0 += float64(q[0]) * float64(q[0])
		s1 += float64(q[1]) * float64(q[1])
		s2 += float64(q[2]) * float64(q[2])
		s3 += float64(q[3]) * float64(q[3])
	}
	for ; i < len(g); i++ {
		s0 += float64(g[i]) * float64(g[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// TestSumSquaresSameBits: the norm's chunk sums, marked or not, equal the
// plain four-sum loop's bit for bit on every chunk (lengths of every
// residue mod 4, rows crossing chunks, gradients of widely mixed scales).
func TestSumSquaresSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, plain := range []bool{false, true} {
		ps := triParams(4, plain)
		triGrads(ps, rng)
		for _, c := range chunksOf(ps) {
			got, want := sumSquares(ps, c), plainSumSquares(ps[c.param].Grad[c.lo:c.hi])
			if math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("marks %v, %s [%d, %d): sum %.17g, plain loop %.17g", !plain, ps[c.param].Name, c.lo, c.hi, got, want)
			}
		}
	}
}
