// Package optim is the optimizer of the training loop: AdamW as PyTorch
// defines it (decoupled weight decay, bias-corrected moments), global
// gradient-norm clipping, and the learning-rate schedule (linear warm-up,
// then cosine decay to a fraction of the peak).
package optim

import (
	"fmt"
	"math"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/parallel"
)

// Defaults of the optimizer, used by the training command.
const (
	DefaultLR          = 1e-3 // peak learning rate
	DefaultBeta1       = 0.9
	DefaultBeta2       = 0.95
	DefaultEps         = 1e-8
	DefaultWeightDecay = 0.1 // applied to Param.Decay tensors only
	DefaultClip        = 1.0 // global gradient-norm bound
	DefaultMinLRFrac   = 0.1 // the cosine decays to this fraction of the peak
	DefaultMaxWarmup   = 100 // warm-up is min(100 steps, 5% of the run)
)

// Config is AdamW's hyper-parameters.
type Config struct {
	Beta1, Beta2 float64
	Eps          float64
	WeightDecay  float64 // decoupled decay, only on parameters with Decay set
}

// DefaultConfig is β1 0.9, β2 0.95, eps 1e-8, weight decay 0.1.
func DefaultConfig() Config {
	return Config{Beta1: DefaultBeta1, Beta2: DefaultBeta2, Eps: DefaultEps, WeightDecay: DefaultWeightDecay}
}

// AdamW holds the moments of every parameter. Frozen parameters get no
// moments and are never touched.
//
// Its passes over the parameters (GradNorm and Step) are cut into chunks of
// at most chunkSize elements of one parameter, in parameter order, and run
// as the tasks of Runner when it is set (the model's workers, say): each
// element's update is independent, and the norm's partial sums are added in
// chunk order, so results do not depend on the number of workers.
type AdamW struct {
	Config
	Params []*model.Param
	M, V   [][]float32 // first and second moments, parallel to Params (nil for frozen ones)
	Steps  int         // updates done so far (the bias-correction step count)

	// Runner runs the chunks' tasks (nil: the calling goroutine).
	Runner Runner
	// Kernel, when set (a spec's dispatched kernels.Set.AdamW), does each
	// chunk's update in float32 on the vector units; nil does it in
	// float64 in Go, the reference.
	Kernel kernels.AdamWFunc

	chunks  []chunk
	partial []float64 // GradNorm's per-chunk sums
	step    stepJob
	norm    normJob
}

// Runner runs tasks 0..tasks−1 of a job and returns when all are done
// (parallel.Pool.Run; the model's Run).
type Runner interface {
	Run(tasks int, job parallel.Job)
}

// chunkSize is the most elements of one parameter in a task.
const chunkSize = 1 << 14

// chunk is elements [lo, hi) of parameter param.
type chunk struct{ param, lo, hi int }

// chunksOf cuts the non-frozen parameters into chunks, in order.
func chunksOf(params []*model.Param) []chunk {
	var cs []chunk
	for i, p := range params {
		if p.Frozen {
			continue
		}
		for lo := 0; lo < len(p.Data); lo += chunkSize {
			cs = append(cs, chunk{i, lo, min(lo+chunkSize, len(p.Data))})
		}
	}
	return cs
}

// NewAdamW makes an optimizer for params with zero moments.
func NewAdamW(params []*model.Param, cfg Config) *AdamW {
	o := &AdamW{Config: cfg, Params: params, M: make([][]float32, len(params)), V: make([][]float32, len(params))}
	for i, p := range params {
		if p.Frozen {
			continue
		}
		o.M[i] = make([]float32, len(p.Data))
		o.V[i] = make([]float32, len(p.Data))
	}
	o.chunks = chunksOf(params)
	o.partial = make([]float64, len(o.chunks))
	return o
}

func (o *AdamW) run(job parallel.Job) {
	if o.Runner == nil {
		for i := range o.chunks {
			job.Run(0, i)
		}
		return
	}
	o.Runner.Run(len(o.chunks), job)
}

// normJob sums the squared gradients of one chunk.
type normJob struct{ o *AdamW }

func (j *normJob) Run(_, task int) { j.o.partial[task] = sumSquares(j.o.Params, j.o.chunks[task]) }

// sumSquares is Σ g² over chunk c's gradients, in float64: four running
// sums over the elements i mod 4, added at the end, so four additions are
// in flight rather than one chain.
func sumSquares(params []*model.Param, c chunk) float64 {
	g := params[c.param].Grad[c.lo:c.hi]
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

// GradNorm is the global L2 norm of the gradients of the optimizer's
// non-frozen parameters: float64 sums per chunk, added in chunk order.
func (o *AdamW) GradNorm() float64 {
	o.norm = normJob{o}
	o.run(&o.norm)
	o.norm = normJob{}
	var s float64
	for _, v := range o.partial {
		s += v
	}
	return math.Sqrt(s)
}

// GradNorm is the global L2 norm of the gradients of the non-frozen
// parameters, summed as AdamW.GradNorm sums them.
func GradNorm(params []*model.Param) float64 {
	var s float64
	for _, c := range chunksOf(params) {
		s += sumSquares(params, c)
	}
	return math.Sqrt(s)
}

// ClipScale is the factor clip_grad_norm_ multiplies the gradients by:
// maxNorm/(norm+1e-6) when that is below 1, else 1 (and 1 for maxNorm ≤ 0,
// which turns clipping off).
func ClipScale(norm, maxNorm float64) float64 {
	if maxNorm <= 0 {
		return 1
	}
	c := maxNorm / (norm + 1e-6)
	if c < 1 {
		return c
	}
	return 1
}

// Step applies one AdamW update with learning rate lr to every non-frozen
// parameter, using its gradient multiplied by gradScale (the clipping
// factor). As in PyTorch: p ← p − lr·wd·p (decay parameters only), then
// m ← β1·m + (1−β1)·g, v ← β2·v + (1−β2)·g², and
// p ← p − lr/(1−β1^k) · m / (√v/√(1−β2^k) + eps) at update k. The
// arithmetic is float64 per element, rounded to float32 on store, or, with
// Kernel set, float32 in the kernel (as PyTorch does for float32 tensors).
func (o *AdamW) Step(lr, gradScale float64) {
	o.Steps++
	k := float64(o.Steps)
	o.step = stepJob{o: o, lr: lr, gradScale: gradScale,
		stepSize: lr / (1 - math.Pow(o.Beta1, k)), sqrtBC2: math.Sqrt(1 - math.Pow(o.Beta2, k))}
	o.run(&o.step)
	o.step = stepJob{}
}

// stepJob is one update's arithmetic on one chunk.
type stepJob struct {
	o                                *AdamW
	lr, gradScale, stepSize, sqrtBC2 float64
}

func (j *stepJob) Run(_, task int) {
	o := j.o
	c := o.chunks[task]
	p := o.Params[c.param]
	decay := 1.0
	if p.Decay {
		decay = 1 - j.lr*o.WeightDecay
	}
	b1, b2, eps := o.Beta1, o.Beta2, o.Eps
	gradScale, stepSize, sqrtBC2 := j.gradScale, j.stepSize, j.sqrtBC2
	data := p.Data[c.lo:c.hi]
	m := o.M[c.param][c.lo:c.hi]
	v := o.V[c.param][c.lo:c.hi]
	grad := p.Grad[c.lo:c.hi]
	if o.Kernel != nil {
		o.Kernel(len(data), data, grad, m, v, float32(decay), float32(gradScale),
			float32(b1), float32(1-b1), float32(b2), float32(1-b2), float32(eps), float32(stepSize), float32(1/sqrtBC2))
		return
	}
	m, v, grad = m[:len(data)], v[:len(data)], grad[:len(data)]
	for i := range data {
		g := float64(grad[i]) * gradScale
		mi := b1*float64(m[i]) + (1-b1)*g
		vi := b2*float64(v[i]) + (1-b2)*g*g
		m[i] = float32(mi)
		v[i] = float32(vi)
		x := float64(data[i]) * decay
		x -= stepSize * mi / (math.Sqrt(vi)/sqrtBC2 + eps)
		data[i] = float32(x)
	}
}

// Schedule is the learning rate over a run of Total steps: a linear
// warm-up over the first Warmup steps to Peak, then a cosine decay that
// reaches MinFrac·Peak at the run's last step.
type Schedule struct {
	Peak    float64
	MinFrac float64
	Warmup  int
	Total   int
}

// DefaultWarmup is the warm-up of a run of total steps: 100 steps or 5% of
// the run, whichever is smaller.
func DefaultWarmup(total int) int {
	w := total / 20
	if w > DefaultMaxWarmup {
		w = DefaultMaxWarmup
	}
	return w
}

// NewSchedule is the default schedule of a run: peak lr, warm-up
// DefaultWarmup(total), decay to 10% of the peak.
func NewSchedule(peak float64, total int) Schedule {
	return Schedule{Peak: peak, MinFrac: DefaultMinLRFrac, Warmup: DefaultWarmup(total), Total: total}
}

// Validate reports a schedule that cannot run.
func (s Schedule) Validate() error {
	switch {
	case !(s.Peak > 0) || math.IsInf(s.Peak, 0):
		return fmt.Errorf("learning rate %g must be a positive number", s.Peak)
	case s.Total < 1:
		return fmt.Errorf("steps %d must be ≥ 1", s.Total)
	case s.Warmup < 0 || s.Warmup > s.Total:
		return fmt.Errorf("warm-up %d must satisfy 0 ≤ warm-up ≤ steps (%d)", s.Warmup, s.Total)
	case !(s.MinFrac >= 0 && s.MinFrac <= 1):
		return fmt.Errorf("final learning-rate fraction %g must be in [0, 1]", s.MinFrac)
	}
	return nil
}

// LR is the learning rate of step s (0-based): Peak·(s+1)/Warmup during
// the warm-up (s < Warmup), then
// min + (Peak−min)·(1+cos(π·p))/2 with p = (s−Warmup)/(Total−1−Warmup)
// running from 0 at the first step after the warm-up to 1 at the last step
// (Total−1), min = MinFrac·Peak. Steps past the end stay at min; a run
// with a single step after the warm-up takes it at the peak.
func (s Schedule) LR(step int) float64 {
	if step < s.Warmup {
		return s.Peak * float64(step+1) / float64(s.Warmup)
	}
	lo := s.MinFrac * s.Peak
	span := s.Total - 1 - s.Warmup
	if span <= 0 { // at most one step after the warm-up: it runs at the peak
		if step < s.Total {
			return s.Peak
		}
		return lo
	}
	p := float64(step-s.Warmup) / float64(span)
	if p > 1 {
		p = 1
	}
	return lo + (s.Peak-lo)*0.5*(1+math.Cos(math.Pi*p))
}
