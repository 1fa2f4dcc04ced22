package synth

import (
	"io"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/optim"
)

// Defaults of a training run, the ones `synth train` uses: spec random on
// the default text takes about a minute on a 2-core machine.
const (
	DefaultSteps       = 2000
	DefaultBatch       = 16
	DefaultEvalEvery   = 250
	DefaultEvalWindows = 64
	DefaultLogEvery    = 10
	DefaultSeed        = 1

	DefaultLR          = optim.DefaultLR          // peak learning rate
	DefaultClip        = optim.DefaultClip        // global gradient-norm bound
	DefaultWeightDecay = optim.DefaultWeightDecay // AdamW's, on matrices and embeddings
)

// An Option sets one setting of a training run. A setting no option gives
// takes its default on a new run, and the saved run's value on a resumed
// one; giving one that differs from the saved run's is allowed and noted
// in Plan.Notes, since the result will then differ from an uninterrupted
// run. Load takes one Option too, ISA.
type Option func(*options)

// options are a run's settings; set records which ones an Option gave.
type options struct {
	set map[string]bool

	data, out, valid                         string
	holdOut                                  float64
	steps, lrSteps, batch, warmup            int
	stopAt, workers                          int
	evalEvery, evalWindows, saveEvery, every int
	lr, clip, wd                             float64
	seed                                     uint64
	onEvent                                  func(Event)
	log                                      io.Writer
	comm                                     Comm // Ranks: data-parallel over several processes
	isa                                      *kernels.ISA
	precision                                PrecisionKind
}

func defaults() options {
	return options{
		set:   map[string]bool{},
		steps: DefaultSteps, batch: DefaultBatch, warmup: -1,
		evalEvery: DefaultEvalEvery, evalWindows: DefaultEvalWindows, every: DefaultLogEvery,
		lr: optim.DefaultLR, clip: optim.DefaultClip, wd: optim.DefaultWeightDecay, seed: DefaultSeed,
	}
}

func setter(name string, apply func(*options)) Option {
	return func(o *options) { o.set[name] = true; apply(o) }
}

// Data trains on the text file at path, read as bytes; its last 10% is
// held out for evaluation. Default: the default text (DefaultText), or the
// saved run's file when resuming.
func Data(path string) Option { return setter("data", func(o *options) { o.data = path }) }

// Out writes the checkpoint to path (a .safetensors file); the optimizer
// state goes to <name>.opt.safetensors and the CSV log to <name>.csv
// beside it. Default: <spec name>.safetensors in the working directory, or
// the resumed checkpoint itself.
func Out(path string) Option { return setter("out", func(o *options) { o.out = path }) }

// Steps is the run's total number of steps (when resuming: the step to
// continue to). It is also the schedule's length unless LRSteps sets it.
func Steps(n int) Option { return setter("steps", func(o *options) { o.steps = n }) }

// LRSteps fixes the learning-rate schedule's length (warm-up plus cosine)
// independently of Steps, so that one run can be split into several:
// Steps(100), LRSteps(200), then a resume with Steps(200) ends with the
// weights of one 200-step run.
func LRSteps(n int) Option { return setter("lr-steps", func(o *options) { o.lrSteps = n }) }

// Batch is the number of sequences of n tokens per step.
func Batch(n int) Option { return setter("batch", func(o *options) { o.batch = n }) }

// LR is the peak learning rate: linear warm-up, then cosine decay to 10%.
func LR(x float64) Option { return setter("lr", func(o *options) { o.lr = x }) }

// Warmup is the number of warm-up steps (default min(100, 5% of the
// schedule's length)).
func Warmup(n int) Option { return setter("warmup", func(o *options) { o.warmup = n }) }

// Clip bounds the global gradient norm (0: no clipping).
func Clip(x float64) Option { return setter("clip", func(o *options) { o.clip = x }) }

// WeightDecay is AdamW's weight decay of matrices and embeddings.
func WeightDecay(x float64) Option { return setter("wd", func(o *options) { o.wd = x }) }

// Seed seeds the initialisation and the batches.
func Seed(s uint64) Option { return setter("seed", func(o *options) { o.seed = s }) }

// StopAt stops (and saves) after step n, before Steps, to resume later
// with the same schedule.
func StopAt(n int) Option { return setter("stop-at", func(o *options) { o.stopAt = n }) }

// Workers is the number of goroutines the model uses (0: GOMAXPROCS).
// Results do not depend on it.
func Workers(n int) Option { return setter("workers", func(o *options) { o.workers = n }) }

// EvalEvery evaluates on held-out text every n steps, at step 0 of a new
// run and at the last step (0: never).
func EvalEvery(n int) Option { return setter("eval-every", func(o *options) { o.evalEvery = n }) }

// EvalWindows caps the held-out windows of each evaluation (0: all).
func EvalWindows(n int) Option {
	return setter("eval-windows", func(o *options) { o.evalWindows = n })
}

// SaveEvery also saves a checkpoint every n steps (0: only at the end).
func SaveEvery(n int) Option { return setter("save-every", func(o *options) { o.saveEvery = n }) }

// OnEvent calls f after every step and evaluation, on the training
// goroutine; f must return quickly.
func OnEvent(f func(Event)) Option { return setter("on-event", func(o *options) { o.onEvent = f }) }

// Log prints a progress line to w every n steps (n ≤ 0: DefaultLogEvery),
// at every evaluation and at the last step (the plain-text form of the
// events, Event.String), and the run's summary when it completes.
func Log(w io.Writer, n int) Option {
	return setter("log", func(o *options) {
		o.log = w
		if n > 0 {
			o.every = n
		}
	})
}

// ISA runs the model's kernels at instruction-set level l or below
// (kernels.Go, kernels.AVX2, kernels.AVX512), whatever SYNTHGEN_ISA says;
// a level this CPU lacks is an error naming the missing features. Without
// it, the kernels run at kernels.Level(): the CPU's best, or the level
// SYNTHGEN_ISA caps it at. Results agree across levels to float32
// rounding, not bit for bit. It is also Load's option, for a model that
// evaluates, samples, predicts or serves.
func ISA(l kernels.ISA) Option { return setter("isa", func(o *options) { o.isa = &l }) }
