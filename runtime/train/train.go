// Package train is the training loop of the byte-level models: one
// deterministic step at a time (a batch drawn from (seed, step), forward,
// backward, global gradient-norm clipping, AdamW at the scheduled learning
// rate), evaluation on held-out text as the model card defines it, and
// checkpoints that resume bit for bit.
//
// Determinism: the batch of step s depends on (seed, s) only, the model's
// results do not depend on its worker count, and the optimizer state (the
// moments, the update count) and the schedule are saved with every
// checkpoint, so training to step 200 in one run, or to step 100 and then
// resuming to 200 with the same flags, gives the same weights bit for bit.
package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// Config is everything that decides a run's trajectory.
type Config struct {
	Steps     int     // total steps of the run
	Horizon   int     // the schedule's length (warm-up plus cosine); 0 means Steps
	Batch     int     // sequences per step
	LR        float64 // peak learning rate
	Warmup    int     // warm-up steps
	MinLRFrac float64 // the cosine ends at MinLRFrac·LR
	Clip      float64 // global gradient-norm bound (≤ 0: no clipping)
	Seed      uint64  // seeds the initialisation and the batches
	Optim     optim.Config
}

// DefaultConfig is the default configuration of a run of steps steps of
// batch sequences: lr 1e-3, warm-up min(100, 5% of steps), cosine to 10%,
// clipping at 1.0, AdamW β1 0.9, β2 0.95, eps 1e-8, weight decay 0.1,
// seed 1.
func DefaultConfig(steps, batch int) Config {
	return Config{
		Steps: steps, Batch: batch,
		LR: optim.DefaultLR, Warmup: optim.DefaultWarmup(steps), MinLRFrac: optim.DefaultMinLRFrac,
		Clip: optim.DefaultClip, Seed: 1, Optim: optim.DefaultConfig(),
	}
}

// Schedule is the run's learning-rate schedule.
func (c Config) Schedule() optim.Schedule {
	return optim.Schedule{Peak: c.LR, MinFrac: c.MinLRFrac, Warmup: c.Warmup, Total: c.horizon()}
}

// MaxBatch bounds the batch, far above what a CPU run can hold in memory,
// so that an absurd batch (a mistyped flag) is an error rather than a fatal
// out-of-memory crash while allocating the workspace.
const MaxBatch = 1 << 16

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	if c.Batch < 1 || c.Batch > MaxBatch {
		return fmt.Errorf("batch %d must satisfy 1 ≤ batch ≤ %d", c.Batch, MaxBatch)
	}
	if c.Horizon < 0 {
		return fmt.Errorf("lr-steps %d must be ≥ 0", c.Horizon)
	}
	if err := c.Schedule().Validate(); err != nil {
		return err
	}
	if math.IsNaN(c.Clip) || math.IsInf(c.Clip, 0) {
		return fmt.Errorf("clip %g must be a finite number", c.Clip)
	}
	o := c.Optim
	if !(o.Beta1 >= 0 && o.Beta1 < 1) || !(o.Beta2 >= 0 && o.Beta2 < 1) {
		return fmt.Errorf("AdamW betas (%g, %g) must be in [0, 1)", o.Beta1, o.Beta2)
	}
	if !(o.Eps > 0) || math.IsInf(o.Eps, 0) {
		return fmt.Errorf("AdamW eps %g must be a positive number", o.Eps)
	}
	if !(o.WeightDecay >= 0) || math.IsInf(o.WeightDecay, 0) {
		return fmt.Errorf("weight decay %g must be a non-negative number", o.WeightDecay)
	}
	return nil
}

// horizon is the schedule's length.
func (c Config) horizon() int {
	if c.Horizon > 0 {
		return c.Horizon
	}
	return c.Steps
}

// Metadata keys of the configuration in the optimizer-state file.
const (
	KeySteps     = "train.steps"
	KeyHorizon   = "train.lr_steps"
	KeyBatch     = "train.batch"
	KeyLR        = "train.lr"
	KeyWarmup    = "train.warmup"
	KeyMinLRFrac = "train.min_lr_frac"
	KeyClip      = "train.clip"
	KeySeed      = "train.seed"
	KeyBeta1     = "adam.beta1"
	KeyBeta2     = "adam.beta2"
	KeyEps       = "adam.eps"
	KeyDecay     = "adam.weight_decay"
)

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// Metadata encodes the configuration as strings (floats round-trip exactly).
func (c Config) Metadata() map[string]string {
	return map[string]string{
		KeySteps: strconv.Itoa(c.Steps), KeyHorizon: strconv.Itoa(c.Horizon), KeyBatch: strconv.Itoa(c.Batch),
		KeyLR: ftoa(c.LR), KeyWarmup: strconv.Itoa(c.Warmup), KeyMinLRFrac: ftoa(c.MinLRFrac),
		KeyClip: ftoa(c.Clip), KeySeed: strconv.FormatUint(c.Seed, 10),
		KeyBeta1: ftoa(c.Optim.Beta1), KeyBeta2: ftoa(c.Optim.Beta2),
		KeyEps: ftoa(c.Optim.Eps), KeyDecay: ftoa(c.Optim.WeightDecay),
	}
}

// ConfigFromMetadata decodes Metadata's encoding; file names the source in errors.
func ConfigFromMetadata(file string, meta map[string]string) (Config, error) {
	var c Config
	var err error
	get := func(key string) string {
		v, ok := meta[key]
		if !ok && err == nil {
			err = fmt.Errorf("%s: metadata %q is missing", file, key)
		}
		return v
	}
	integer := func(key string, dst *int) {
		v := get(key)
		if err != nil {
			return
		}
		x, e := strconv.Atoi(v)
		if e != nil {
			err = fmt.Errorf("%s: metadata %q = %q is not an integer", file, key, v)
		}
		*dst = x
	}
	float := func(key string, dst *float64) {
		v := get(key)
		if err != nil {
			return
		}
		x, e := strconv.ParseFloat(v, 64)
		if e != nil {
			err = fmt.Errorf("%s: metadata %q = %q is not a number", file, key, v)
		}
		*dst = x
	}
	integer(KeySteps, &c.Steps)
	if _, ok := meta[KeyHorizon]; ok {
		integer(KeyHorizon, &c.Horizon)
	}
	integer(KeyBatch, &c.Batch)
	float(KeyLR, &c.LR)
	integer(KeyWarmup, &c.Warmup)
	float(KeyMinLRFrac, &c.MinLRFrac)
	float(KeyClip, &c.Clip)
	if v := get(KeySeed); err == nil {
		s, e := strconv.ParseUint(v, 10, 64)
		if e != nil {
			err = fmt.Errorf("%s: metadata %q = %q is not an unsigned integer", file, KeySeed, v)
		}
		c.Seed = s
	}
	float(KeyBeta1, &c.Optim.Beta1)
	float(KeyBeta2, &c.Optim.Beta2)
	float(KeyEps, &c.Optim.Eps)
	float(KeyDecay, &c.Optim.WeightDecay)
	if err != nil {
		return Config{}, err
	}
	if e := c.Validate(); e != nil {
		return Config{}, fmt.Errorf("%s: saved training configuration: %w", file, e)
	}
	return c, nil
}

// Trainer runs the steps of one run on one model.
type Trainer struct {
	Model   *model.Model
	WS      *model.Workspace
	Opt     *optim.AdamW
	Sampler *data.Sampler
	Cfg     Config
	Sched   optim.Schedule
	Step    int // completed steps: the next step to run

	// Statistics of the last step.
	Loss     float64 // mean training cross-entropy (nats)
	GradNorm float64 // global gradient norm before clipping
	LR       float64 // the learning rate it used

	eval  *Evaluator
	cls   *classBatches // a classifier's batches (classify.go); nil for a language model
	shard *shard        // data-parallel training (Distribute); nil: the whole batch here
}

// New makes a trainer for m on the training text, starting at step 0 with
// zero optimizer moments.
func New(m *model.Model, text []byte, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("training configuration: %w", err)
	}
	if err := data.CheckVocab("training text", text, m.Spec.Vocab); err != nil {
		return nil, err
	}
	s, err := data.NewSampler(text, m.Spec.N, cfg.Batch, cfg.Seed)
	if err != nil {
		return nil, fmt.Errorf("training data: %w", err)
	}
	t := &Trainer{
		Model: m, WS: m.NewWorkspace(cfg.Batch), Opt: optim.NewAdamW(m.Params, cfg.Optim),
		Sampler: s, Cfg: cfg, Sched: cfg.Schedule(),
	}
	t.Opt.Runner = m               // the optimizer's passes run on the model's workers
	t.Opt.Kernel = m.Kernels.AdamW // and its update on the spec's kernel
	t.eval = &Evaluator{Model: m, WS: t.WS, Batch: cfg.Batch}
	return t, nil
}

// NonFiniteError reports a step whose loss or gradient norm is NaN or
// infinite; the weights are left as they were before the step.
type NonFiniteError struct {
	Step           int
	Loss, GradNorm float64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("step %d: loss %g, gradient norm %g is not finite (lower -lr?); weights kept from the step before", e.Step, e.Loss, e.GradNorm)
}

// ErrInterrupted is matched (errors.Is) by TrainStep's error when the
// workspace's interrupt (model.Workspace.SetInterrupt on t.WS) stopped the
// step's forward or backward pass: the step is abandoned before its
// update, so the weights, the optimizer state and t.Step are those of the
// step before.
var ErrInterrupted = errors.New("interrupted")

// TrainStep runs step t.Step (batch, forward, backward, clipping, AdamW)
// and advances t.Step. It allocates nothing unless it fails. An interrupt
// (ErrInterrupted) abandons the step, leaving the weights and t.Step as
// they were.
func (t *Trainer) TrainStep() error {
	step := t.Step
	if t.cls != nil {
		if err := t.classStep(step); err != nil {
			return err
		}
		if t.WS.Interrupted() {
			t.Loss = math.NaN()
			return fmt.Errorf("step %d abandoned before its update: %w", step+1, ErrInterrupted)
		}
	} else if t.Sampler.Batch(step); t.shard != nil { // one of several processes: its share, then the sum
		if err := t.shardStep(step); err != nil {
			return err
		}
	} else {
		t.Loss = t.Model.Forward(t.WS, t.Sampler.Inputs, t.Sampler.Targets, t.Cfg.Batch)
		if !t.WS.Interrupted() {
			t.Model.Backward(t.WS)
		}
		if t.WS.Interrupted() {
			t.Loss = math.NaN()
			return fmt.Errorf("step %d abandoned before its update: %w", step+1, ErrInterrupted)
		}
	}
	t.GradNorm = t.Opt.GradNorm()
	if math.IsNaN(t.Loss) || math.IsInf(t.Loss, 0) || math.IsNaN(t.GradNorm) || math.IsInf(t.GradNorm, 0) {
		return &NonFiniteError{Step: step, Loss: t.Loss, GradNorm: t.GradNorm}
	}
	t.LR = t.Sched.LR(step)
	t.Opt.Step(t.LR, optim.ClipScale(t.GradNorm, t.Cfg.Clip))
	t.Step++
	return nil
}

// Evaluate is the model card's loss of the model on text (at most limit
// windows when limit > 0), batched on the trainer's workspace.
func (t *Trainer) Evaluate(text []byte, limit int) (Result, error) {
	return t.eval.Evaluate(text, limit)
}

// EvaluateContext is Evaluate, stopping with ctx's error once ctx is done.
func (t *Trainer) EvaluateContext(ctx context.Context, text []byte, limit int) (Result, error) {
	return t.eval.EvaluateContext(ctx, text, limit)
}

// Save writes the checkpoint to path and the optimizer state (moments and
// configuration, plus extra metadata) beside it, the state first, with
// checkpoint.SaveRun: a crash at any instant leaves a checkpoint and an
// optimizer state of one step on disk (checkpoint.ResolveOpt finds it), and
// a failed write leaves the previous pair.
func (t *Trainer) Save(path string, extra map[string]string) error {
	meta := t.Cfg.Metadata()
	for k, v := range extra {
		meta[k] = v
	}
	return checkpoint.SaveRun(path, t.Model, t.Opt, t.Step, meta)
}

// LoadState loads the optimizer state saved beside checkpoint path (of
// step step) into t, sets t.Step and returns the state's metadata.
func (t *Trainer) LoadState(path string, step int) (map[string]string, error) {
	return t.LoadStateFrom(checkpoint.OptPath(path), step)
}

// LoadStateFrom loads the optimizer state in the file optPath, which must
// belong to a checkpoint of step step (checkpoint.ResolveOpt finds it), into
// t, sets t.Step and returns the state's metadata.
func (t *Trainer) LoadStateFrom(optPath string, step int) (map[string]string, error) {
	meta, err := checkpoint.LoadOpt(optPath, t.Model, t.Opt, step)
	if err != nil {
		return nil, err
	}
	t.Step = step
	return meta, nil
}
