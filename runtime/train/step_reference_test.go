package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/fixed_random"
	_ "github.com/synthgen/synthgen/generated/odd"
	_ "github.com/synthgen/synthgen/generated/odd_aft_conv"
	_ "github.com/synthgen/synthgen/generated/odd_aft_full"
	_ "github.com/synthgen/synthgen/generated/odd_ffn"
	_ "github.com/synthgen/synthgen/generated/odd_linear"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// The reference step below is written from the documentation alone (the
// docs/training.md's "Training is AdamW (β 0.9/0.95, eps 1e-8, weight decay 0.1 on
// every tensor of two or more dimensions — linear weights, both embeddings,
// R, R1, R2, AFT's w — and none on biases, LayerNorm, mix and AFT-conv's
// u), linear warm-up … then cosine decay to 10% of the peak learning rate
// …, gradient-norm clipping", the model card's parameter names, and
// PyTorch's clip_grad_norm_ and AdamW), never from the optimizer's code.
const (
	refBeta1 = 0.9
	refBeta2 = 0.95
	refEps   = 1e-8
	refWD    = 0.1
	refFloor = 0.1 // the cosine ends at 10% of the peak

	// The run the cases are steps of: the schedule is refHorizon steps
	// long (-lr-steps), the run refSteps, so steps past the horizon stay
	// at the floor. The peak is high enough that the decay of a weight of
	// the initialisation's size (0.02) is far above float32 rounding.
	refPeak    = 4e-3
	refWarmup  = 8
	refHorizon = 40
	refSteps   = 60
	refBatch   = 2
)

// refLR is the schedule's learning rate at step s (0-based): peak·(s+1)/W
// during the W warm-up steps, then the cosine from the peak at step W to
// the floor at the horizon's last step, and the floor after it.
func refLR(s int) float64 {
	if s < refWarmup {
		return refPeak * float64(s+1) / refWarmup
	}
	p := math.Min(1, float64(s-refWarmup)/float64(refHorizon-1-refWarmup))
	lo := refFloor * refPeak
	return lo + (refPeak-lo)*(1+math.Cos(math.Pi*p))/2
}

// refDecay says, from a parameter's card name, whether AdamW decays it:
// docs/training.md's rule (every tensor of two or more dimensions but AFT-conv's
// u). ok is false for a name the rule does not know.
func refDecay(name string) (decay, ok bool) {
	last := name[strings.LastIndex(name, ".")+1:]
	switch {
	case name == "tok_emb", name == "pos_emb":
		return true, true
	case last == "bias", last == "mix", last == "u":
		return false, true
	case strings.HasPrefix(name, "lnf.") || strings.Contains(name, ".ln1.") || strings.Contains(name, ".ln2."):
		return false, true // LayerNorm's weight and bias
	case last == "weight", last == "R", last == "R1", last == "R2", last == "w":
		return true, true // linear layers' weights, the synthesizer matrices, AFT's w
	}
	return false, false
}

// refText is a training text every reference spec can read (bytes below
// odd_ffn's vocabulary of 75), with some structure to learn.
func refText() []byte {
	rng := rand.New(rand.NewPCG(11, 12))
	words := []string{"light ", "rays ", "of ", "the ", "prism ", "colours ", "refracted ", "and ", "Newton ", "glass "}
	var b []byte
	for len(b) < 6000 {
		w := words[rng.IntN(len(words))]
		for _, c := range []byte(w) {
			b = append(b, 32+(c-32)%42)
		}
	}
	return b
}

// refTrainer is a trainer of spec name on its kernels of level isa, one
// worker, the default configuration (β, eps, weight decay, floor from the
// code's defaults, so the reference checks them too) with the reference's
// peak, warm-up and horizon.
func refTrainer(t *testing.T, name string, isa kernels.ISA) *Trainer {
	t.Helper()
	k, err := kernels.LookupAt(name, isa)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := k.Chosen["AdamW"]; !ok || l != isa {
		t.Fatalf("%s at %s: the AdamW kernel is %s's (provided: %v), not the level's own", name, isa, l, ok)
	}
	m, err := model.New(k.Spec, k, 3)
	if err != nil {
		t.Fatal(err)
	}
	m.SetWorkers(1)
	cfg := DefaultConfig(refSteps, refBatch)
	cfg.Horizon, cfg.Warmup, cfg.LR = refHorizon, refWarmup, refPeak
	tr, err := New(m, refText(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// refCase is one step to compare: its index, whether the optimizer starts
// it from zero moments (a run's first step) or from a state some steps in,
// and whether the gradient norm is above Clip (clipped) or below.
type refCase struct {
	step    int
	fresh   bool
	clipped bool
}

// refCases cover the first step, warm-up, mid-cosine, the horizon's last
// step (the floor) and a step past it, with the norm above and below Clip.
var refCases = []refCase{
	{0, true, true}, {3, false, true}, {3, false, false}, {23, false, true}, {23, false, false},
	{refHorizon - 1, false, true}, {50, false, false},
}

// refResult is how a step compared with the reference.
type refResult struct {
	worst   float64 // the largest difference as a fraction of its tolerance
	norm    float64 // the gradient norm
	lr      float64 // the reference's learning rate
	scale   float64 // the reference's clipping factor
	problem string  // the first difference beyond tolerance ("": none)
	// numbers is the first difference of the weights or moments ("":
	// none), apart from the bookkeeping (Trainer.LR, GradNorm, Step).
	numbers string
}

// refStep runs case c on tr and compares it with the reference step: it
// puts tr at step c.step (with random moments of the gradient's scale
// unless c.fresh), computes the step's gradient with the model, sets Clip
// to put the norm above or below it, runs TrainStep (mutate, when not nil,
// first changes the trainer as a faulty implementation would), and checks
// the learning rate, the norm, the weights and both moments.
func refStep(t *testing.T, tr *Trainer, c refCase, rng *rand.Rand, fd bool, mutate func(*Trainer)) refResult {
	t.Helper()
	m, o := tr.Model, tr.Opt
	tr.Step = c.step
	// The gradient of this step's batch, which TrainStep computes again
	// (the model is deterministic): checked below to be the one it used.
	tr.Sampler.Batch(c.step)
	tr.Model.Forward(tr.WS, tr.Sampler.Inputs, tr.Sampler.Targets, tr.Cfg.Batch)
	tr.Model.Backward(tr.WS)
	frozen := func(p *model.Param) bool {
		return m.Spec.Has("fixed_random") && strings.HasSuffix(p.Name, ".attn.R")
	}
	n := len(m.Params)
	w0, g, m0, v0 := make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n)
	var sumSq float64
	for i, p := range m.Params {
		if frozen(p) != p.Frozen {
			t.Fatalf("%s: frozen %v, the card says %v", p.Name, p.Frozen, frozen(p))
		}
		w0[i] = float64s(p.Data)
		if p.Frozen {
			continue
		}
		g[i] = float64s(p.Grad)
		for _, x := range g[i] {
			sumSq += x * x
		}
	}
	norm := math.Sqrt(sumSq)
	if fd {
		fdCheck(t, tr, g, norm)
	}
	if c.fresh {
		o.Steps = 0
	} else {
		o.Steps = c.step // as in a run: one update per step so far
	}
	for i, p := range m.Params {
		if p.Frozen {
			continue
		}
		var ms float64 // the gradient's RMS
		for _, x := range g[i] {
			ms += x * x
		}
		rms := math.Sqrt(ms / float64(len(g[i])))
		for j := range p.Data {
			if c.fresh {
				o.M[i][j], o.V[i][j] = 0, 0
				continue
			}
			o.M[i][j] = float32(g[i][j]*rng.NormFloat64() + 0.3*rms*rng.NormFloat64())
			o.V[i][j] = float32((g[i][j]*g[i][j] + rms*rms) * (0.2 + rng.Float64()))
		}
		m0[i], v0[i] = float64s(o.M[i]), float64s(o.V[i])
	}
	o.MomentsChanged() // moments written by hand
	if c.clipped {
		tr.Cfg.Clip = norm / 4
	} else {
		tr.Cfg.Clip = norm * 4
	}
	k := float64(o.Steps + 1) // this update's count
	clip := tr.Cfg.Clip

	if mutate != nil {
		mutate(tr)
	}
	if err := tr.TrainStep(); err != nil {
		t.Fatal(err)
	}

	// The reference: PyTorch's clip_grad_norm_ factor, the schedule's
	// rate, and AdamW with decoupled decay and bias-corrected moments.
	res := refResult{norm: norm, lr: refLR(c.step), scale: math.Min(1, clip/(norm+1e-6))}
	if c.clipped != (res.scale < 1) {
		t.Fatalf("step %d: clipping factor %g, but the case is clipped=%v", c.step, res.scale, c.clipped)
	}
	fail := func(format string, args ...any) {
		if res.problem == "" {
			res.problem = fmt.Sprintf(format, args...)
		}
	}
	if tr.LR != res.lr {
		fail("learning rate %.17g, the schedule's is %.17g", tr.LR, res.lr)
	}
	if math.Abs(tr.GradNorm-norm) > 1e-12*norm {
		fail("gradient norm %.17g, the gradient's is %.17g", tr.GradNorm, norm)
	}
	if tr.Step != c.step+1 || o.Steps != int(k) {
		fail("after the step: Step %d, AdamW.Steps %d; want %d, %d", tr.Step, o.Steps, c.step+1, int(k))
	}
	const ulp = 1.0 / (1 << 23)
	// check compares one value (what, of element j of parameter name)
	// with the reference's, formatting only on failure.
	check := func(what, name string, j int, got, want, tol float64) {
		if d := math.Abs(got - want); d > tol {
			msg := fmt.Sprintf("%s%s[%d] = %.9g, the reference's is %.9g (difference %.3g, tolerance %.3g)", what, name, j, got, want, d, tol)
			fail("%s", msg)
			if res.numbers == "" {
				res.numbers = msg
			}
		} else if tol > 0 {
			res.worst = max(res.worst, d/tol)
		}
	}
	bc1, bc2 := 1-math.Pow(refBeta1, k), 1-math.Pow(refBeta2, k)
	for i, p := range m.Params {
		if p.Frozen {
			for j, x := range p.Data {
				if float64(x) != w0[i][j] {
					fail("frozen %s[%d] moved from %g to %g", p.Name, j, w0[i][j], x)
				}
			}
			if o.M[i] != nil || o.V[i] != nil {
				fail("frozen %s has moments", p.Name)
			}
			continue
		}
		decay, ok := refDecay(p.Name)
		if !ok {
			t.Fatalf("parameter %s: docs/training.md's decay rule does not name it", p.Name)
		}
		for j := range p.Data {
			if gj := float64(p.Grad[j]); gj != g[i][j] {
				fail("%s's gradient [%d] in the step was %g, not the model's %g", p.Name, j, gj, g[i][j])
			}
			gs := g[i][j] * res.scale
			mj := refBeta1*m0[i][j] + (1-refBeta1)*gs
			vj := refBeta2*v0[i][j] + (1-refBeta2)*gs*gs
			upd := res.lr * (mj / bc1) / (math.Sqrt(vj/bc2) + refEps)
			w := w0[i][j]
			if decay {
				w *= 1 - res.lr*refWD
			}
			w -= upd
			// Tolerances: float32 rounding, a few ulp of each sum's terms
			// (they may nearly cancel), and for the weight 1e-5 of the
			// update (the kernel's float32 arithmetic) plus what m's
			// rounding does to the update.
			tolM := 4 * ulp * (refBeta1*math.Abs(m0[i][j]) + (1-refBeta1)*math.Abs(gs) + math.Abs(mj))
			check("m of ", p.Name, j, float64(o.M[i][j]), mj, tolM)
			check("v of ", p.Name, j, float64(o.V[i][j]), vj, 4*ulp*vj)
			tolUpd := 1e-5*math.Abs(upd) + res.lr/bc1*tolM/(math.Sqrt(vj/bc2)+refEps)
			check("", p.Name, j, float64(p.Data[j]), w,
				4*ulp*(math.Abs(w0[i][j])+math.Abs(upd)+math.Abs(w))+tolUpd)
		}
	}
	return res
}

func float64s(x []float32) []float64 {
	y := make([]float64, len(x))
	for i, v := range x {
		y[i] = float64(v)
	}
	return y
}

// fdCheck checks the gradient g (of norm norm, from the model's backward)
// against the loss by a central finite difference along g itself: with
// the weights moved by ±δ·g/norm (rounded to float32: d± the moves made),
// L(w+d+) − L(w−d−) must equal g·(d+ − d−), which for exact moves is
// 2δ·norm, so this checks the norm that clipping uses. The weights are
// restored bit for bit.
func fdCheck(t *testing.T, tr *Trainer, g [][]float64, norm float64) {
	t.Helper()
	m := tr.Model
	saved := make([][]float32, len(m.Params))
	for i, p := range m.Params {
		saved[i] = append([]float32(nil), p.Data...)
	}
	delta := 1e-2 / norm // the loss moves by about 1e-2
	loss := func(sign float64) (l, dir float64) {
		for i, p := range m.Params {
			if p.Frozen {
				continue
			}
			for j := range p.Data {
				p.Data[j] = float32(float64(saved[i][j]) + sign*delta*g[i][j]/norm)
				dir += g[i][j] * (float64(p.Data[j]) - float64(saved[i][j]))
			}
		}
		return tr.Model.Forward(tr.WS, tr.Sampler.Inputs, tr.Sampler.Targets, tr.Cfg.Batch), dir
	}
	lp, dp := loss(1)
	lm, dm := loss(-1)
	for i, p := range m.Params {
		copy(p.Data, saved[i])
	}
	fdDiff, want := lp-lm, dp-dm
	t.Logf("finite difference along the gradient: ΔL %.6g, g·Δw %.6g (relative difference %.2g)", fdDiff, want, math.Abs(fdDiff-want)/want)
	if math.Abs(fdDiff-want) > 1e-2*want {
		t.Errorf("the loss's finite difference along the gradient is %.6g, the gradient's product %.6g: the gradient (and its norm) is off", fdDiff, want)
	}
}

// refSpecs are the specs of the reference test: the five-way synthesizer
// mixture, AFT-conv (a 2-D u that is not decayed), AFT-full (a decayed w),
// linear attention, a model with vocabulary 75 and ffn 50, and
// fixed_random (a frozen R) at the best level only, being larger.
var refSpecs = []struct {
	name      string
	allLevels bool
}{{"odd", true}, {"odd_aft_conv", true}, {"odd_aft_full", true}, {"odd_linear", true}, {"odd_ffn", true}, {"fixed_random", false}}

// TestStepMatchesReference compares TrainStep with the reference step, at
// every instruction-set level this binary links and this CPU runs, for
// several variants, at the first step, in warm-up, mid-cosine and at the
// floor, with the gradient norm above and below Clip.
func TestStepMatchesReference(t *testing.T) {
	for _, spec := range refSpecs {
		sets, err := kernels.Sets(spec.name)
		if err != nil {
			t.Fatal(err)
		}
		if !spec.allLevels {
			sets = sets[len(sets)-1:]
		}
		for _, set := range sets {
			t.Run(spec.name+"/"+set.ISA.String(), func(t *testing.T) {
				tr := refTrainer(t, spec.name, set.ISA)
				rng := rand.New(rand.NewPCG(1, 2))
				cases := refCases
				if !spec.allLevels {
					cases = []refCase{{3, false, true}, {23, false, false}}
				}
				for i, c := range cases {
					r := refStep(t, tr, c, rng, i == 0, nil)
					t.Logf("step %d (fresh %v): norm %.4g, clip factor %.4g, lr %.4g: largest difference %.2g of its tolerance",
						c.step, c.fresh, r.norm, r.scale, r.lr, r.worst)
					if r.problem != "" {
						t.Errorf("step %d (clipped %v, fresh %v): %s", c.step, c.clipped, c.fresh, r.problem)
					}
				}
			})
		}
	}
}

// TestReferenceCatchesMutants: the comparison of TestStepMatchesReference
// rejects a training step with one fault, among them the mutants of the
// audit of issue 31 that passed every test before (no weight decay on the
// kernel path, β2 replaced by β1, no clipping, no schedule, the cosine
// floor 0 by default, β2 0.999 by default). Each mutant changes the
// trainer as the faulty code would, just before TrainStep, and must be
// rejected by the weights and moments themselves.
func TestReferenceCatchesMutants(t *testing.T) {
	sets, err := kernels.Sets("odd")
	if err != nil {
		t.Fatal(err)
	}
	isa := sets[len(sets)-1].ISA
	for _, mu := range []struct {
		name   string
		mutate func(*Trainer)
	}{
		{"weight decay dropped", func(tr *Trainer) { tr.Opt.WeightDecay = 0 }},
		{"β2 replaced by β1", func(tr *Trainer) { tr.Opt.Beta2 = tr.Opt.Beta1 }},
		{"β2 0.999 (the default changed)", func(tr *Trainer) { tr.Opt.Beta2 = 0.999 }},
		{"eps 1e-6", func(tr *Trainer) { tr.Opt.Eps = 1e-6 }},
		{"never clips", func(tr *Trainer) { tr.Cfg.Clip = 0 }},
		{"constant peak learning rate", func(tr *Trainer) {
			tr.Sched = optim.Schedule{Peak: tr.Sched.Peak, MinFrac: 1, Total: tr.Sched.Total}
		}},
		{"cosine floor 0 (the default changed)", func(tr *Trainer) { tr.Sched.MinFrac = 0 }},
		{"warm-up one step longer", func(tr *Trainer) { tr.Sched.Warmup = refWarmup + 1 }},
		{"schedule over the run's steps, not the horizon", func(tr *Trainer) { tr.Sched.Total = refSteps }},
		{"no bias correction", func(tr *Trainer) { tr.Opt.Steps = 1 << 20 }},
		{"decay on every tensor", func(tr *Trainer) {
			for _, p := range tr.Model.Params {
				p.Decay = true
			}
		}},
		{"decay on no tensor", func(tr *Trainer) {
			for _, p := range tr.Model.Params {
				p.Decay = false
			}
		}},
	} {
		tr := refTrainer(t, "odd", isa)
		rng := rand.New(rand.NewPCG(1, 2))
		caught := ""
		for _, c := range refCases {
			// The weights and moments must show the fault, not only the
			// trainer's bookkeeping (Trainer.LR, say).
			if r := refStep(t, tr, c, rng, false, mu.mutate); r.numbers != "" {
				caught = fmt.Sprintf("step %d (clipped %v): %s", c.step, c.clipped, r.numbers)
				break
			}
		}
		if caught == "" {
			t.Errorf("mutant %q passes the reference step at every case", mu.name)
		} else {
			t.Logf("%s: rejected at %s", mu.name, caught)
		}
	}
}

// TestDefaultConfigDocumented pins the training defaults to docs/training.md's
// values (the reference's constants above): AdamW β 0.9/0.95, eps 1e-8,
// weight decay 0.1, warm-up min(100, 5% of the run), cosine to 10% of the
// peak 1e-3, clipping at 1.0, seed 1.
func TestDefaultConfigDocumented(t *testing.T) {
	for _, c := range []struct{ steps, batch, warmup int }{{3000, 16, 100}, {400, 8, 20}, {19, 1, 0}} {
		want := Config{Steps: c.steps, Batch: c.batch, LR: 1e-3, Warmup: c.warmup, MinLRFrac: refFloor, Clip: 1, Seed: 1,
			Optim: optim.Config{Beta1: refBeta1, Beta2: refBeta2, Eps: refEps, WeightDecay: refWD}}
		if got := DefaultConfig(c.steps, c.batch); got != want {
			t.Errorf("DefaultConfig(%d, %d) = %+v, want %+v", c.steps, c.batch, got, want)
		}
	}
}
