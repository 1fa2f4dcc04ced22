package optim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// kernelSets is every instruction-set level of spec odd's kernels this
// binary links and this CPU runs, lowest first (training sets
// AdamW.Kernel to the dispatched level's AdamW).
func kernelSets(t testing.TB) []kernels.Set {
	t.Helper()
	sets, err := kernels.Sets("odd")
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) == 0 {
		t.Fatal("no kernel set of spec odd runs on this CPU")
	}
	return sets
}

// kernelParams is a parameter list with the cases Step must keep apart:
// decayed and undecayed tensors, a frozen one, and tensors that span
// several chunks (with a ragged last one). Weights are of order 1, so the
// decoupled decay moves them by lr·wd, far above float32 rounding.
func kernelParams(seed uint64) []*model.Param {
	rng := rand.New(rand.NewPCG(seed, 3))
	var ps []*model.Param
	for i, c := range []struct {
		n             int
		decay, frozen bool
	}{{37, true, false}, {chunkSize + 9, true, false}, {5, false, false}, {64, false, true}, {2*chunkSize + 3, false, false}, {1, true, false}} {
		p := &model.Param{Name: fmt.Sprint("p", i), Shape: []int{c.n}, Data: make([]float32, c.n), Decay: c.decay, Frozen: c.frozen}
		if !c.frozen {
			p.Grad = make([]float32, c.n)
		}
		for j := range p.Data {
			p.Data[j] = float32(rng.NormFloat64())
		}
		ps = append(ps, p)
	}
	return ps
}

// fillKernelState gives the optimizer a state of several steps in: random
// moments (v > 0) and new gradients of mixed scales, a few exactly 0.
func fillKernelState(o *AdamW, rng *rand.Rand) {
	for i, p := range o.Params {
		if p.Frozen {
			continue
		}
		for j := range p.Data {
			g := rng.NormFloat64() * math.Pow(10, -3*rng.Float64())
			if rng.IntN(50) == 0 {
				g = 0
			}
			p.Grad[j] = float32(g)
			o.M[i][j] = float32(rng.NormFloat64() * 0.01)
			o.V[i][j] = float32(1e-4 * (0.1 + rng.Float64()))
		}
	}
}

// sameWeights copies ref's weights into o (each step is compared from
// one state, not with the rounding differences of the steps before).
func sameWeights(o, ref *AdamW) {
	for i, p := range o.Params {
		copy(p.Data, ref.Params[i].Data)
	}
}

// TestStepKernelMatchesGo: Step through every linked level's AdamW kernel
// (what training runs) gives the float64 Go path's weights and moments to
// float32 rounding, at several update counts, learning rates and clipping
// factors. Training always sets Kernel, and the Go path is checked by hand
// (TestAdamWHand), so this is what ties the kernel call's arguments (the
// decay factor, β1, β2, eps, the bias corrections) to the formulas.
func TestStepKernelMatchesGo(t *testing.T) {
	for _, set := range kernelSets(t) {
		if set.AdamW == nil {
			t.Fatalf("%s: no AdamW kernel", set.ISA)
		}
		t.Run(set.ISA.String(), func(t *testing.T) {
			cfg := DefaultConfig()
			ref, got := NewAdamW(kernelParams(1), cfg), NewAdamW(kernelParams(1), cfg)
			got.Kernel = set.AdamW
			rngRef, rngGot := rand.New(rand.NewPCG(5, 5)), rand.New(rand.NewPCG(5, 5))
			for _, c := range []struct {
				steps         int // the update count before this step
				lr, gradScale float64
			}{{0, 1e-2, 1}, {1, 3e-2, 0.25}, {10, 5e-3, 1}, {2000, 1e-3, 0.5}} {
				ref.Steps, got.Steps = c.steps, c.steps
				fillKernelState(ref, rngRef)
				fillKernelState(got, rngGot)
				sameWeights(got, ref)
				before := snapshot(ref)
				ref.Step(c.lr, c.gradScale)
				got.Step(c.lr, c.gradScale)
				msg, worst := compareAdamW(got, ref, before, c.lr, c.gradScale)
				t.Logf("update %d: largest difference %.2g of its tolerance", c.steps+1, worst)
				if msg != "" {
					t.Errorf("update %d (lr %g, clip factor %g): kernel path differs from the Go path: %s", c.steps+1, c.lr, c.gradScale, msg)
				}
			}
			for i, p := range got.Params {
				if p.Frozen && (got.M[i] != nil || p.Data[0] != ref.Params[i].Data[0]) {
					t.Errorf("frozen parameter %s was touched", p.Name)
				}
			}
		})
	}
}

// state is a copy of an optimizer's moments and gradients before a step.
type state struct{ p, m, v, g [][]float32 }

func snapshot(o *AdamW) state {
	var s state
	for i, p := range o.Params {
		s.m = append(s.m, append([]float32(nil), o.M[i]...))
		s.v = append(s.v, append([]float32(nil), o.V[i]...))
		s.g = append(s.g, append([]float32(nil), p.Grad...))
		s.p = append(s.p, append([]float32(nil), p.Data...))
	}
	return s
}

// compareAdamW returns "" when got's weights and moments equal ref's to
// float32 rounding, else the first difference. before is the state both
// started the step from, which scales the tolerances: each moment to a
// few ulp of its two terms (β·m and (1−β)·g' may nearly cancel), each
// weight to a few ulp of its two terms (the decayed weight and the
// update), 1e-5 of the update, and what m's tolerance does to the update.
//
// worst is the largest ratio of a difference to its tolerance.
func compareAdamW(got, ref *AdamW, before state, lr, gradScale float64) (msg string, worst float64) {
	const ulp = 1.0 / (1 << 23)
	k := float64(ref.Steps)
	for i, p := range got.Params {
		if p.Frozen {
			continue
		}
		q := ref.Params[i]
		for j := range p.Data {
			g := float64(before.g[i][j]) * gradScale
			m, mr := float64(got.M[i][j]), float64(ref.M[i][j])
			tolM := 4 * ulp * (ref.Beta1*math.Abs(float64(before.m[i][j])) + (1-ref.Beta1)*math.Abs(g) + math.Abs(mr))
			if d, tol := math.Abs(m-mr), tolM; d > tol {
				return fmt.Sprintf("m of %s[%d] = %.9g, want %.9g", p.Name, j, m, mr), d / tol
			} else {
				worst = max(worst, d/tol)
			}
			v, vr := float64(got.V[i][j]), float64(ref.V[i][j])
			if d, tol := math.Abs(v-vr), 4*ulp*vr; d > tol {
				return fmt.Sprintf("v of %s[%d] = %.9g, want %.9g", p.Name, j, v, vr), d / tol
			} else {
				worst = max(worst, d/tol)
			}
			den := math.Sqrt(vr/(1-math.Pow(ref.Beta2, k))) + ref.Eps
			update := lr / (1 - math.Pow(ref.Beta1, k)) * math.Abs(mr) / den
			// m's rounding error, relative to m, carries into the update.
			tolUpd := 1e-5*update + lr/(1-math.Pow(ref.Beta1, k))*tolM/den
			w, wr := float64(p.Data[j]), float64(q.Data[j])
			if d, tol := math.Abs(w-wr), 4*ulp*(math.Abs(float64(before.p[i][j]))+update+math.Abs(wr))+tolUpd; d > tol {
				return fmt.Sprintf("%s[%d] = %.9g, want %.9g (difference %.3g; before %.9g, m %.9g v %.9g g %.9g update %.3g)", p.Name, j, w, wr, d, before.p[i][j], mr, vr, g, update), d / tol
			} else {
				worst = max(worst, d/tol)
			}
		}
	}
	return "", worst
}

// TestStepKernelCatchesMutants: the comparison of TestStepKernelMatchesGo
// rejects the kernel call with one argument wrong, as the mutation audit
// made it (issue 31): the decay factor 1 (no weight decay), β2 replaced by
// β1, and no bias correction of v. Each mutant wraps the real kernel.
func TestStepKernelCatchesMutants(t *testing.T) {
	sets := kernelSets(t)
	kernel := sets[len(sets)-1].AdamW
	for _, mu := range []struct {
		name string
		f    kernels.AdamWFunc
	}{
		{"weight decay dropped", func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			kernel(n, p, g, m, v, 1, gscale, b1, c1, b2, c2, eps, step, rbc2)
		}},
		{"β2 replaced by β1", func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			kernel(n, p, g, m, v, decay, gscale, b1, c1, b1, c1, eps, step, rbc2)
		}},
		{"no clipping", func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			kernel(n, p, g, m, v, decay, 1, b1, c1, b2, c2, eps, step, rbc2)
		}},
		{"v not bias-corrected", func(n int, p, g, m, v []float32, decay, gscale, b1, c1, b2, c2, eps, step, rbc2 float32) {
			kernel(n, p, g, m, v, decay, gscale, b1, c1, b2, c2, eps, step, 1)
		}},
	} {
		ref, got := NewAdamW(kernelParams(1), DefaultConfig()), NewAdamW(kernelParams(1), DefaultConfig())
		got.Kernel = mu.f
		caught := false
		rngRef, rngGot := rand.New(rand.NewPCG(5, 5)), rand.New(rand.NewPCG(5, 5))
		for _, c := range []struct {
			steps         int
			lr, gradScale float64
		}{{0, 1e-2, 1}, {1, 3e-2, 0.25}, {10, 5e-3, 1}} {
			ref.Steps, got.Steps = c.steps, c.steps
			fillKernelState(ref, rngRef)
			fillKernelState(got, rngGot)
			sameWeights(got, ref)
			before := snapshot(ref)
			ref.Step(c.lr, c.gradScale)
			got.Step(c.lr, c.gradScale)
			if msg, worst := compareAdamW(got, ref, before, c.lr, c.gradScale); msg != "" && !caught {
				t.Logf("%s: update %d rejected, a difference %.3g times its tolerance: %s", mu.name, c.steps+1, worst, msg)
				caught = true
			}
		}
		if !caught {
			t.Errorf("mutant %q passes the comparison with the Go path", mu.name)
		}
	}
}

// TestDefaultsDocumented pins the optimizer's defaults to the values the
// docs/training.md states ("AdamW (β 0.9/0.95, eps 1e-8, weight decay 0.1 …), linear
// warm-up (min(100, 5% of the run)) then cosine decay to 10% of the peak
// learning rate (1e-3), gradient-norm clipping at 1.0"): changing one must
// be a visible decision, made here and in docs/training.md together.
func TestDefaultsDocumented(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"DefaultLR", DefaultLR, 1e-3},
		{"DefaultBeta1", DefaultBeta1, 0.9},
		{"DefaultBeta2", DefaultBeta2, 0.95},
		{"DefaultEps", DefaultEps, 1e-8},
		{"DefaultWeightDecay", DefaultWeightDecay, 0.1},
		{"DefaultClip", DefaultClip, 1.0},
		{"DefaultMinLRFrac", DefaultMinLRFrac, 0.1},
		{"DefaultMaxWarmup", DefaultMaxWarmup, 100},
	} {
		if c.got != c.want {
			t.Errorf("%s = %g, docs/training.md says %g", c.name, c.got, c.want)
		}
	}
	if got, want := DefaultConfig(), (Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}); got != want {
		t.Errorf("DefaultConfig() = %+v, want %+v", got, want)
	}
	// Warm-up min(100 steps, 5% of the run), rounded down.
	for total, want := range map[int]int{1: 0, 19: 0, 20: 1, 39: 1, 40: 2, 200: 10, 1999: 99, 2000: 100, 2020: 100, 1 << 20: 100} {
		if got := DefaultWarmup(total); got != want {
			t.Errorf("DefaultWarmup(%d) = %d, want %d", total, got, want)
		}
	}
	s := NewSchedule(2e-3, 400)
	if want := (Schedule{Peak: 2e-3, MinFrac: 0.1, Warmup: 20, Total: 400}); s != want {
		t.Errorf("NewSchedule(2e-3, 400) = %+v, want %+v", s, want)
	}
	// The schedule itself, from the formulas: warm-up to the peak, the
	// cosine from the peak, its midpoint, and the floor at the last step.
	for _, c := range []struct {
		step int
		want float64
	}{{0, 1e-4}, {19, 2e-3}, {20, 2e-3}, {20 + 379/2, 2e-4 + 1.8e-3*0.5*(1+math.Cos(math.Pi*float64(379/2)/379))}, {399, 2e-4}, {1000, 2e-4}} {
		if got := s.LR(c.step); !approx(got, c.want, 1e-12) {
			t.Errorf("default schedule: LR(%d) = %g, want %g", c.step, got, c.want)
		}
	}
}
