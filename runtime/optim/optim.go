// Package optim is the optimizer of the training loop: AdamW as PyTorch
// defines it (decoupled weight decay, bias-corrected moments), global
// gradient-norm clipping, and the learning-rate schedule (linear warm-up,
// then cosine decay to a fraction of the peak).
package optim

//go:generate go run ../../gen/optimgen

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

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
//
// A parameter marked CausalTri (a causal spec's R) has a strict upper
// triangle that never gets a gradient. While its moments there are 0 (a
// fresh optimizer's; Step never makes them nonzero), AdamW's update there
// is exactly p·decay, so Step does only that multiplication there, and
// GradNorm skips those gradients (zeros, whose squares add nothing).
// Which parameters qualify is checked at the first Step and again after
// MomentsChanged, so a state whose moments are nonzero there (written by
// hand, or loaded from a file) gets the full update.
type AdamW struct {
	Config
	Params []*model.Param
	// M and V are the first and second moments, parallel to Params (nil
	// for frozen ones). Whoever writes them other than through Step (a
	// loader, a test) calls MomentsChanged afterwards.
	M, V  [][]float32
	Steps int // updates done so far (the bias-correction step count)

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

	// tri[i]: Params[i] is CausalTri and its moments are 0 on the strict
	// upper triangle, so Step only decays there; valid when triChecked.
	tri        []bool
	triChecked bool
	probe      [5][16]float32 // zeroIsDecay's p, g, m, v and decayOnly's p
}

// Runner runs tasks 0..tasks−1 of a job and returns when all are done
// (parallel.Pool.Run; the model's Run).
type Runner interface {
	Run(tasks int, job parallel.Job)
}

// chunkSize is the most elements of one parameter in a task.
const chunkSize = 1 << 14

// chunk is elements [lo, hi) of parameter param; tri: the parameter is
// CausalTri (isTri).
type chunk struct {
	param, lo, hi int
	tri           bool
}

// chunksOf cuts the non-frozen parameters into chunks, in order.
func chunksOf(params []*model.Param) []chunk {
	var cs []chunk
	for i, p := range params {
		if p.Frozen {
			continue
		}
		tri := isTri(p)
		for lo := 0; lo < len(p.Data); lo += chunkSize {
			cs = append(cs, chunk{i, lo, min(lo+chunkSize, len(p.Data)), tri})
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
	o.tri = make([]bool, len(params))
	return o
}

// MomentsChanged tells the optimizer that M or V were written other than
// by Step (a loaded state, say): the next Step checks again which
// CausalTri parameters hold zero moments on their strict upper triangle
// (only those get the decay-only update there).
func (o *AdamW) MomentsChanged() { o.triChecked = false }

// checkTri sets o.tri: a CausalTri parameter qualifies when its moments
// are exactly 0 wherever its gradient is structurally 0.
func (o *AdamW) checkTri() {
	for i, p := range o.Params {
		o.tri[i] = false
		if !isTri(p) || len(o.M[i]) != len(p.Data) || len(o.V[i]) != len(p.Data) {
			continue
		}
		clean := true
		var c triCursor
		for c.start(p, 0, len(p.Data)); clean; {
			a, b, live, ok := c.next()
			if !ok {
				break
			}
			if live {
				continue
			}
			for k := a; k < b; k++ {
				if o.M[i][k] != 0 || o.V[i][k] != 0 {
					clean = false
					break
				}
			}
		}
		o.tri[i] = clean
	}
	o.triChecked = true
}

// triCursor walks elements [lo, hi) of a CausalTri parameter (a stack of
// n×n matrices, n its last dimension) as runs that are all live (row r,
// columns ≤ r) or all dead (columns > r).
type triCursor struct{ n, e, hi int }

func (t *triCursor) start(p *model.Param, lo, hi int) {
	*t = triCursor{n: p.Shape[len(p.Shape)-1], e: lo, hi: hi}
}

// next is the next run [a, b) and whether it is live; ok is false at the
// end.
func (t *triCursor) next() (a, b int, live, ok bool) {
	if t.e >= t.hi {
		return 0, 0, false, false
	}
	n := t.n
	col := t.e % n
	row := t.e / n % n
	rowStart := t.e - col
	a = t.e
	if col <= row {
		b, live = min(rowStart+row+1, t.hi), true
	} else {
		b = min(rowStart+n, t.hi)
	}
	t.e = b
	return a, b, live, true
}

// isTri reports whether p is a trained CausalTri parameter that triCursor
// can walk: at least two dimensions, the last two equal, and as many
// elements as its shape says.
func isTri(p *model.Param) bool {
	if !p.CausalTri || p.Frozen {
		return false
	}
	k := len(p.Shape)
	if k < 2 || p.Shape[k-1] != p.Shape[k-2] || p.Shape[k-1] < 1 {
		return false
	}
	n := 1
	for _, s := range p.Shape {
		n *= s
	}
	return n == len(p.Data)
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
// sums, element k of the chunk (k counted from c.lo) going to sum k mod 4
// (the last len mod 4 elements to sum 0), added at the end as
// (s0+s1)+(s2+s3), so four additions are in flight rather than one chain.
// A CausalTri parameter's dead elements (gradient exactly 0) are skipped:
// adding +0 leaves a sum as it was, so the result is bit for bit the one
// of the whole chunk.
func sumSquares(params []*model.Param, c chunk) float64 {
	grad := params[c.param].Grad
	g := grad[c.lo:c.hi]
	var acc [4]float64
	n4 := len(g) &^ 3
	if !c.tri {
		addSquares(g[:n4], grad[c.lo:], 0, &acc)
	} else {
		var cur triCursor
		cur.start(params[c.param], c.lo, c.lo+n4)
		for {
			a, b, live, ok := cur.next()
			if !ok {
				break
			}
			if live {
				addSquares(grad[a:b], grad[a:], a-c.lo, &acc)
			}
		}
	}
	for _, x := range g[n4:] { // the tail is all sum 0's; its dead zeros add nothing
		acc[0] += float64(x) * float64(x)
	}
	return (acc[0] + acc[1]) + (acc[2] + acc[3])
}

// touchAhead is how far ahead of the sum addSquares loads a float of
// far, one per cache line: 4 KB. The sum is one chain per accumulator,
// about 5 instructions per 4 bytes, so the out-of-order window alone keeps
// only a few cache lines in flight and a gradient that comes from memory
// streams at a fraction of the memory's pace; the early loads (whose
// values are not used) fetch the lines before the sum gets there.
const touchAhead = 1024

// touched collects the early loads' bits, so that the compiler keeps them.
var touched uint32

// addSquares adds g[j]² to acc[(first+j) mod 4] for every j, in order.
// far is g and what follows it in memory (read ahead, see touchAhead, by
// the Go loop; the AVX kernel, when it runs, prefetches for itself).
func addSquares(g, far []float32, first int, acc *[4]float64) {
	j := 0
	for ; j < len(g) && (first+j)&3 != 0; j++ {
		acc[(first+j)&3] += float64(g[j]) * float64(g[j])
	}
	if n := (len(g) - j) &^ 3; n > 0 && vecAVX {
		sumSquaresAVX(&g[j], n, acc) // lanes in order, as below, bit for bit
		j += n
		for k := 0; j < len(g); j, k = j+1, k+1 {
			acc[k] += float64(g[j]) * float64(g[j])
		}
		return
	}
	s0, s1, s2, s3 := acc[0], acc[1], acc[2], acc[3]
	var touch uint32
	for ; j+16 <= len(g); j += 16 {
		if k := j + touchAhead; k < len(far) {
			touch |= math.Float32bits(far[k])
		}
		q := g[j : j+16 : j+16]
		s0 += float64(q[0]) * float64(q[0])
		s1 += float64(q[1]) * float64(q[1])
		s2 += float64(q[2]) * float64(q[2])
		s3 += float64(q[3]) * float64(q[3])
		s0 += float64(q[4]) * float64(q[4])
		s1 += float64(q[5]) * float64(q[5])
		s2 += float64(q[6]) * float64(q[6])
		s3 += float64(q[7]) * float64(q[7])
		s0 += float64(q[8]) * float64(q[8])
		s1 += float64(q[9]) * float64(q[9])
		s2 += float64(q[10]) * float64(q[10])
		s3 += float64(q[11]) * float64(q[11])
		s0 += float64(q[12]) * float64(q[12])
		s1 += float64(q[13]) * float64(q[13])
		s2 += float64(q[14]) * float64(q[14])
		s3 += float64(q[15]) * float64(q[15])
	}
	if touch == 1 { // almost never: a write the compiler cannot drop
		atomic.StoreUint32(&touched, touch)
	}
	for ; j+4 <= len(g); j += 4 {
		q := g[j : j+4 : j+4]
		s0 += float64(q[0]) * float64(q[0])
		s1 += float64(q[1]) * float64(q[1])
		s2 += float64(q[2]) * float64(q[2])
		s3 += float64(q[3]) * float64(q[3])
	}
	acc[0], acc[1], acc[2], acc[3] = s0, s1, s2, s3
	for k := 0; j < len(g); j, k = j+1, k+1 {
		acc[k] += float64(g[j]) * float64(g[j])
	}
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
	if !o.triChecked {
		o.checkTri()
	}
	o.step.triFast = slices.Contains(o.tri, true) && o.step.zeroIsDecay(o.decay(true)) && o.step.zeroIsDecay(o.decay(false))
	o.run(&o.step)
	o.step = stepJob{}
}

// decay is the decoupled-decay factor of a parameter with Decay set or not
// at the current step's learning rate.
func (o *AdamW) decay(set bool) float64 {
	if set {
		return 1 - o.step.lr*o.WeightDecay
	}
	return 1
}

// stepJob is one update's arithmetic on one chunk.
type stepJob struct {
	o                                *AdamW
	lr, gradScale, stepSize, sqrtBC2 float64
	// triFast: the update of an element with g = m = v = 0 is exactly
	// decayOnly's (checked by zeroIsDecay with this step's arguments), so
	// the dead elements of o.tri's parameters get decayOnly.
	triFast bool
}

func (j *stepJob) Run(_, task int) {
	o := j.o
	c := o.chunks[task]
	p := o.Params[c.param]
	decay := o.decay(p.Decay)
	m, v := o.M[c.param], o.V[c.param]
	if !c.tri || !j.triFast || !o.tri[c.param] {
		j.update(decay, p.Data[c.lo:c.hi], p.Grad[c.lo:c.hi], m[c.lo:c.hi], v[c.lo:c.hi])
		return
	}
	var cur triCursor
	cur.start(p, c.lo, c.hi)
	for {
		a, b, live, ok := cur.next()
		if !ok {
			return
		}
		if live {
			j.update(decay, p.Data[a:b], p.Grad[a:b], m[a:b], v[a:b])
		} else {
			j.decayOnly(decay, p.Data[a:b]) // g, m, v are 0 there and stay 0
		}
	}
}

// update is AdamW's update of the elements data with gradients grad and
// moments m, v (of equal lengths), with the kernel or in Go.
func (j *stepJob) update(decay float64, data, grad, m, v []float32) {
	o := j.o
	b1, b2, eps := o.Beta1, o.Beta2, o.Eps
	gradScale, stepSize, sqrtBC2 := j.gradScale, j.stepSize, j.sqrtBC2
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

// decayOnly is update's arithmetic on elements whose gradient and moments
// are 0, when zeroIsDecay holds: the weight times decay (in float32 with
// the kernel, as the kernel rounds p·decay; in float64 rounded to float32
// without), the moments left at 0.
func (j *stepJob) decayOnly(decay float64, data []float32) {
	if j.o.Kernel != nil {
		d := float32(decay)
		i := 0
		if n := len(data) &^ 7; n > 0 && vecAVX {
			scaleAVX(&data[0], n, d) // the same float32 products
			i = n
		}
		for ; i < len(data); i++ {
			data[i] *= d
		}
		return
	}
	for i := range data {
		data[i] = float32(float64(data[i]) * decay)
	}
}

// zeroIsDecay runs update on elements with g = m = v = 0 and weights of
// every kind (±0, normal, subnormal, the largest, ±Inf) and reports
// whether it gave decayOnly's weights bit for bit and left m and v at +0:
// true for finite arguments and eps > 0, but it is the update (kernel or
// Go) as compiled that is asked, with this step's arguments.
func (j *stepJob) zeroIsDecay(decay float64) bool {
	pr := &j.o.probe
	for i := range pr {
		clear(pr[i][:])
	}
	w := []float32{float32(math.Copysign(0, -1)), 0, 1, -1, 0.02, -3e-3, 1e-40, -1e-45, math.SmallestNonzeroFloat32,
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), 1.17549435e-38, 123456.7, -7e-20}
	copy(pr[0][:], w)
	copy(pr[4][:], w)
	j.update(decay, pr[0][:], pr[1][:], pr[2][:], pr[3][:])
	j.decayOnly(decay, pr[4][:])
	for i := range pr[0] {
		if math.Float32bits(pr[0][i]) != math.Float32bits(pr[4][i]) || math.Float32bits(pr[2][i]) != 0 || math.Float32bits(pr[3][i]) != 0 {
			return false
		}
	}
	return true
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
