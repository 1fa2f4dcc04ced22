package synth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
	"github.com/synthgen/synthgen/runtime/train"
	"github.com/synthgen/synthgen/specs"
)

// keyData is the optimizer-state metadata entry naming the run's data
// file (an absolute path), which a resume reads unless Data overrides it.
const keyData = "train.data"

// keyPrecision is the optimizer-state metadata entry holding the precision
// the run asked for (f32 or bf16), which a resumed run keeps unless an
// option sets another.
const keyPrecision = "train.precision"

// Config is everything that decides a run's trajectory: steps, schedule,
// batch, optimizer, clipping and seed.
type Config = train.Config

// Plan is what a run will do, decided before its first step: the model,
// the data, the settings (resolved from the options, the defaults and,
// when resuming, the saved run) and where it writes.
type Plan struct {
	Spec      specs.Spec
	NumParams int
	ISA       string // instruction set of the model's kernels
	Precision string // the linear layers' products: "f32", or "bf16 (amx)", "bf16 (avx512bf16)"

	Data        string // the training text's path
	DefaultData bool   // Data is the default text: no Data option, nothing saved
	SavedData   bool   // Data came from the resumed run's saved settings
	TrainBytes  int    // bytes trained on (the first 90%; a classifier's: its training texts' bytes)
	ValBytes    int    // bytes held out (the last 10%)
	ValWindows  int    // held-out windows of n+1 bytes

	// A classifier's data: its labels in class order, its training and
	// validation examples, and where the validation examples come from
	// (Valid, or the HoldOut share of the training file; neither: none).
	Labels                     []string
	TrainExamples, ValExamples int
	Valid                      string
	HoldOut                    float64

	Resume        string // the checkpoint resumed from ("" for a new run)
	WithOptimizer bool   // the resume has its optimizer state: an exact continuation

	Start, Stop int    // steps run: Start+1 … Stop
	Config      Config // Config.Steps is the run's total
	Workers     int    // the model's goroutines
	Ranks       int    // data-parallel processes (the Ranks option); 0 or 1: this one alone

	Out, OptOut, CSV string // checkpoint, optimizer state, CSV log

	// Notes are warnings about the run (an override of a saved setting, a
	// missing optimizer state, a stretched schedule), one sentence each.
	Notes []string
}

// Run is one training run: a model, its data, its optimizer and the files
// it writes. Make one with NewRun or ResumeRun, read its Plan, then call
// Train. The one-call forms are Train and Resume.
type Run struct {
	o     options
	plan  Plan
	model *Model
	t     *train.Trainer
	ds    *data.Dataset     // a language model's text
	cset  *data.LabelledSet // a classifier's training examples
	cval  *data.LabelledSet // a classifier's validation examples (nil: none)
	extra map[string]string
	dist  *dist // data-parallel state (Ranks); nil on one process

	layerHook func() // tests: called at each check of the interrupt between layers
}

// Train trains a new model of spec s with the given options, writing its
// checkpoint, optimizer state and CSV log (see Out), and returns how the
// run ended. See Run.Train for cancellation.
func Train(ctx context.Context, s specs.Spec, opts ...Option) (*Summary, error) {
	r, err := NewRun(ctx, s, opts...)
	if err != nil {
		return nil, err
	}
	return r.Train(ctx)
}

// Resume continues the run saved in checkpoint (and its .opt.safetensors),
// with the saved run's settings unless opts override them; Steps can
// extend the run. See Run.Train for cancellation.
func Resume(ctx context.Context, checkpoint string, opts ...Option) (*Summary, error) {
	r, err := ResumeRun(ctx, checkpoint, opts...)
	if err != nil {
		return nil, err
	}
	return r.Train(ctx)
}

// NewRun prepares a new run of spec s: it checks every setting, builds the
// model and loads the data, but trains nothing and writes nothing. The
// spec's generated package must be linked into the program. Its files
// (Out, its optimizer state and log) must not exist unless Overwrite is
// given, and must be regular files (or absent) other than the data file.
// ctx is checked between the steps of the preparation: a cancelled ctx
// gives its error.
func NewRun(ctx context.Context, s specs.Spec, opts ...Option) (*Run, error) {
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	o := apply(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	cfg := o.config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := newModel(s, cfg.Seed, o.isa)
	if err != nil {
		return nil, err
	}
	return o.finish(ctx, m, cfg, Plan{}, nil)
}

// ResumeRun prepares the continuation of the run saved in path: the
// weights and step from the checkpoint, AdamW's moments and the run's
// settings from its optimizer state beside it (a missing state is allowed
// and noted: the moments then start from zero). The state must be of the
// checkpoint's step: after a save interrupted by a crash, that is the
// backup the save kept (Plan.Notes says so); a state of another step is an
// error that says to move it aside to resume from the weights alone, and
// so is a state that records the checksum of other weights (another run's
// at the same step). Written to another Out, the resume must not replace
// files there unless Overwrite is given.
// Options override the saved settings; overriding one (other than Steps,
// LRSteps, Workers, evaluation, logging and output) makes the result differ
// from an uninterrupted run, which Plan.Notes says. ctx is checked between
// the files read: a cancelled ctx gives its error.
func ResumeRun(ctx context.Context, path string, opts ...Option) (*Run, error) {
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	o := apply(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	cfg := o.config()
	var plan Plan
	h, err := checkpoint.ReadHeader(path)
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	k, err := dispatch(h.Spec, o.isa)
	if err != nil {
		return nil, fmt.Errorf("resume: %s: %w", path, err)
	}
	net, err := model.New(h.Spec, k, 0)
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", path, err)
	}
	if err := h.Into(net); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	m := &Model{net: net, step: h.Step}
	plan.Resume = path
	// The optimizer state of the checkpoint's step: beside it, or its
	// backup if a save was interrupted (see checkpoint.SaveRun). A state
	// of another step is an error that says how to resume without it.
	// The state must also be of the checkpoint's weights (when it records
	// their checksum): not another run's at the same step.
	optPath, note, err := checkpoint.ResolveOptFor(path, h.Step, checkpoint.WeightsSum(net))
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if note != "" {
		plan.Notes = append(plan.Notes, note)
	}
	if optPath != "" {
		// The header alone: LoadStateFrom reads the moments once, later.
		meta, err := checkpoint.ReadMetadata(optPath)
		if err != nil {
			return nil, fmt.Errorf("resume: optimizer state: %w", err)
		}
		saved, err := train.ConfigFromMetadata(optPath, meta)
		if err != nil {
			return nil, fmt.Errorf("resume: %w", err)
		}
		plan.WithOptimizer = true
		set := o.set
		// The saved run's settings, unless an option overrides one.
		if !set["lr-steps"] {
			cfg.Horizon = saved.Horizon
		}
		if !set["steps"] {
			cfg.Steps = saved.Steps
		} else if o.steps != saved.Steps && cfg.Horizon == 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("steps %d differs from the saved run's %d: the cosine schedule is stretched to the new total from step %d on, "+
				"so the learning rate goes back up (the cosine over %d steps is higher at step %d than over %d); "+
				"to keep the saved schedule instead (the rate then stays at its floor, 10%% of the peak, after step %d), fix its length: LRSteps(%d) (synth train: -lr-steps %d)",
				o.steps, saved.Steps, h.Step, o.steps, h.Step, saved.Steps, saved.Steps, saved.Steps, saved.Steps))
		}
		if !set["warmup"] {
			cfg.Warmup = saved.Warmup
		}
		keep := func(name string, same bool, apply func()) {
			if !set[name] {
				apply()
			} else if !same {
				plan.Notes = append(plan.Notes, fmt.Sprintf("%s overrides the saved run's value: the result will differ from an uninterrupted run", name))
			}
		}
		keep("batch", o.batch == saved.Batch, func() { cfg.Batch = saved.Batch })
		keep("lr", o.lr == saved.LR, func() { cfg.LR = saved.LR })
		keep("clip", o.clip == saved.Clip, func() { cfg.Clip = saved.Clip })
		keep("wd", o.wd == saved.Optim.WeightDecay, func() { cfg.Optim.WeightDecay = saved.Optim.WeightDecay })
		keep("seed", o.seed == saved.Seed, func() { cfg.Seed = saved.Seed })
		cfg.MinLRFrac, cfg.Optim.Beta1, cfg.Optim.Beta2, cfg.Optim.Eps = saved.MinLRFrac, saved.Optim.Beta1, saved.Optim.Beta2, saved.Optim.Eps
		if !set["data"] && meta[keyData] != "" {
			o.data, plan.SavedData = meta[keyData], true
		}
		if err := o.restorePrecision(meta, optPath, &plan); err != nil {
			return nil, err
		}
		o.restoreClass(meta)
	} else {
		plan.Notes = append(plan.Notes, fmt.Sprintf("warning: no optimizer state %s: AdamW moments start from zero, so this is not an exact continuation", checkpoint.OptPath(path)))
	}
	if cfg.Steps <= h.Step {
		return nil, fmt.Errorf("resume %s is at step %d, already at or past the run's %d steps: ask for more steps", path, h.Step, cfg.Steps)
	}
	return o.finish(ctx, m, cfg, plan, func(t *train.Trainer) error {
		if plan.WithOptimizer {
			if _, err := t.LoadStateFrom(optPath, h.Step); err != nil {
				return fmt.Errorf("resume: %w", err)
			}
		} else {
			t.Step = h.Step
		}
		return nil
	})
}

func apply(opts []Option) options {
	o := defaults()
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// validate checks the settings that need no model; the errors are
// OptionErrors naming the option.
func (o *options) validate() error {
	switch {
	case o.steps < 1:
		return optionErr("steps", o.steps, "must be ≥ 1")
	case o.batch < 1 || o.batch > train.MaxBatch:
		return optionErr("batch", o.batch, "must satisfy 1 ≤ batch ≤ %d", train.MaxBatch)
	case !(o.lr > 0) || math.IsInf(o.lr, 0):
		return optionErr("lr", o.lr, "the learning rate must be a positive number")
	case o.set["warmup"] && o.warmup < 0:
		return optionErr("warmup", o.warmup, "must be ≥ 0")
	case math.IsNaN(o.clip) || math.IsInf(o.clip, 0):
		return optionErr("clip", o.clip, "must be a finite number (0: no clipping)")
	case !(o.wd >= 0) || math.IsInf(o.wd, 0):
		return optionErr("wd", o.wd, "must be a finite number ≥ 0")
	case o.evalEvery < 0:
		return optionErr("eval-every", o.evalEvery, "must be ≥ 0")
	case o.evalWindows < 0:
		return optionErr("eval-windows", o.evalWindows, "must be ≥ 0")
	case o.saveEvery < 0:
		return optionErr("save-every", o.saveEvery, "must be ≥ 0")
	case o.workers < 0:
		return optionErr("workers", o.workers, "must be ≥ 0")
	case o.workers > MaxWorkers() && !o.set["many-workers"]:
		return optionErr("workers", o.workers, "is over the limit of %d (%d per CPU, %d CPUs): more only slow the run; allow it with the AllowManyWorkers option (synth train: -force)", MaxWorkers(), WorkersPerCPU, runtime.NumCPU())
	case o.set["clip"] && !(o.clip >= 0):
		return optionErr("clip", o.clip, "must be ≥ 0 (0: no clipping)")
	case o.stopAt < 0:
		return optionErr("stop-at", o.stopAt, "must be ≥ 0")
	case o.lrSteps < 0:
		return optionErr("lr-steps", o.lrSteps, "must be ≥ 0")
	case o.precision != F32 && o.precision != BF16:
		return optionErr("precision", o.precision, "must be F32 or BF16")
	}
	return nil
}

// config is the training configuration the options ask for.
func (o *options) config() Config {
	cfg := train.DefaultConfig(o.steps, o.batch)
	cfg.LR, cfg.Clip, cfg.Optim.WeightDecay, cfg.Seed = o.lr, o.clip, o.wd, o.seed
	if o.warmup >= 0 {
		cfg.Warmup = o.warmup
	}
	cfg.Horizon = o.lrSteps
	if o.lrSteps > 0 && o.warmup < 0 {
		cfg.Warmup = optim.DefaultWarmup(o.lrSteps)
	}
	return cfg
}

// finish loads the data, makes the trainer (restore sets its state) and
// completes the plan.
func (o options) finish(ctx context.Context, m *Model, cfg Config, plan Plan, restore func(*train.Trainer) error) (*Run, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// The precision first: on the bf16 path the workspace grows (see
	// model.WorkspaceBytes), and the memory check must see it.
	prec, note, err := setPrecision(m, o.precision)
	if err != nil {
		return nil, err
	}
	if !o.set["large-memory"] {
		need, ws := runBytes(m.net, cfg.Batch)
		if rule := overMemory(need, ws); rule != "" {
			return nil, optionErr("batch", cfg.Batch, "a run of spec %s at this batch %s: lower the batch, or allow it with the AllowLargeMemory option (synth train: -force)", m.net.Spec.Name, rule)
		}
	}
	m.net.SetWorkers(o.workers)
	start := m.step
	out := o.out
	if out == "" {
		if plan.Resume != "" {
			out = plan.Resume
		} else {
			out = m.net.Spec.Name + ".safetensors"
		}
	}
	stop := cfg.Steps
	if o.stopAt > 0 {
		if o.stopAt <= start || o.stopAt > cfg.Steps {
			return nil, optionErr("stop-at", o.stopAt, "must be after the start step %d and at most the run's %d steps", start, cfg.Steps)
		}
		stop = o.stopAt
	}
	s := m.net.Spec
	if !s.IsClassifier() && (o.set["valid"] || o.set["hold-out"]) {
		key := "valid"
		if o.set["hold-out"] {
			key = "hold-out"
		}
		return nil, optionErr(key, map[string]any{"valid": o.valid, "hold-out": o.holdOut}[key], "only for a classifier (spec task \"classify\"); spec %q is a language model, validated on the last 10%% of its text", s.Name)
	}
	path := o.data
	if path == "" && s.IsClassifier() {
		return nil, optionErr("data", "", "spec %q is a classifier: it trains on a labelled file (TSV, CSV or JSON Lines), which Data must name", s.Name)
	}
	if path == "" {
		p, err := data.DefaultFile()
		if err != nil {
			return nil, err
		}
		path, plan.DefaultData = p, true
	}
	if err := checkOut(out, path, plan.Resume); err != nil {
		return nil, err
	}
	if err := o.checkNotStarted(out, plan.Resume); err != nil {
		return nil, err
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	var (
		ds         *data.Dataset
		cset, cval *data.LabelledSet
		t          *train.Trainer
	)
	if s.IsClassifier() {
		cset, cval, err = o.classData(m.net, path)
	} else {
		ds, err = data.Load(path, s.N, s.Vocab)
	}
	if err != nil {
		return nil, err
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	if s.IsClassifier() {
		t, err = train.NewClassifier(m.net, cset, cfg)
	} else {
		t, err = train.New(m.net, ds.Train, cfg)
	}
	if err != nil {
		return nil, err
	}
	if restore != nil {
		if err := restore(t); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	plan.Spec, plan.NumParams, plan.ISA = s, m.net.NumParams(), m.net.Kernels.ISA.String()
	plan.Precision = prec
	if note != "" {
		plan.Notes = append(plan.Notes, note)
	}
	plan.Data = path
	if ds != nil {
		plan.TrainBytes, plan.ValBytes = len(ds.Train), len(ds.Val)
		plan.ValWindows = data.NumWindows(ds.Val, s.N, 0)
	} else {
		plan.Labels, plan.TrainExamples = m.net.Labels, len(cset.Examples)
		for _, e := range cset.Examples {
			plan.TrainBytes += len(e.Text)
		}
		if cval != nil {
			plan.ValExamples = len(cval.Examples)
		}
		plan.Valid, plan.HoldOut = o.valid, o.holdOut
	}
	plan.Start, plan.Stop, plan.Config, plan.Workers = start, stop, cfg, m.net.Workers()
	plan.Out, plan.OptOut, plan.CSV = out, checkpoint.OptPath(out), csvPath(out)
	r := &Run{o: o, plan: plan, model: m, t: t, ds: ds, cset: cset, cval: cval, extra: map[string]string{keyData: abs, keyPrecision: o.precision.String()}}
	o.classExtra(r.extra)
	if err := r.distribute(); err != nil {
		return nil, err
	}
	return r, nil
}

// TokensPerStep is the tokens a step trains on, what the throughputs
// (Event.TokensPerSec, Summary.TokensPerSec) count: Batch·n for a language
// model; for a classifier, Batch times the training examples' mean length.
func (p Plan) TokensPerStep() int {
	if p.Spec.IsClassifier() {
		return p.Config.Batch * p.TrainBytes / max(1, p.TrainExamples)
	}
	return p.Config.Batch * p.Spec.N
}

// csvPath is the CSV log beside checkpoint path: x.safetensors → x.csv.
func csvPath(path string) string {
	return strings.TrimSuffix(path, ".safetensors") + ".csv"
}

// checkOut fails early when the run's files cannot be written: out, its
// optimizer state and its CSV log must each be a regular file or absent
// (never a directory, device, FIFO or socket, nor a link to one), in an
// existing folder, and none may be one of the run's inputs: the data file
// and, unless out is resumed in place, the checkpoint resumed and its
// optimizer state.
func checkOut(out, data, resume string) error {
	inputs := []string{data}
	if resume != "" && !sameFile(out, resume) {
		inputs = append(inputs, resume, checkpoint.OptPath(resume), checkpoint.OptPrevPath(resume))
	}
	for _, p := range []string{out, checkpoint.OptPath(out), csvPath(out)} {
		if err := checkpoint.CheckOutput(p, inputs...); err != nil {
			return err
		}
	}
	return nil
}

// Plan says what the run will do.
func (r *Run) Plan() Plan { return r.plan }

// Model is the run's model; its weights and Step follow the training.
func (r *Run) Model() *Model { return r.model }

// Step is the number of completed steps.
func (r *Run) Step() int { return r.t.Step }

// Save writes the checkpoint and the optimizer state of the current step
// (to Plan.Out and Plan.OptOut), each atomically; on a rank other than 0
// of a run over several (Ranks) it does nothing.
func (r *Run) Save() error {
	if !r.writes() {
		return nil
	}
	return r.t.Save(r.plan.Out, r.extra)
}

// Summary is how a run ended.
type Summary struct {
	Start, Step int // the step the run started from and the last one it completed
	Steps       int // the run's total: Step < Steps when it stopped early
	// Stopped says the run stopped before Steps: at StopAt, or cancelled.
	Stopped bool
	Loss    float64 // the last step's training loss (nats)
	ValLoss float64 // the last evaluation's loss (NaN if none)
	// TokensPerSec is the training throughput (steps only, not
	// evaluations or saves).
	TokensPerSec float64
	Elapsed      time.Duration // wall time of Train
	Out, OptOut  string        // the checkpoint and optimizer state written
	CSV          string        // the CSV log
}

// Train runs the steps of the plan, evaluating every EvalEvery steps,
// saving every SaveEvery steps and at the end, reporting through OnEvent
// and Log, and writing the CSV log, whose rows reach the disk (synced)
// before each save and which a resume in place cuts back to the resumed
// checkpoint's step, so that it holds each step once. When ctx is cancelled
// it abandons the current step (or evaluation) at its next layer, before
// the step's update, saves a resumable checkpoint of the last completed
// step (unless it is on disk already: a new run cancelled during its first
// step writes nothing), and returns the summary with an error wrapping
// ctx's cause (errors.Is(err, context.Canceled) for a plain cancel). Over
// several ranks (Ranks), the ranks instead finish the current step and
// agree on the step to stop after. Any other error leaves the last
// saved checkpoint intact. On one process, a ctx cancelled before Train
// starts trains no step and writes nothing: the summary's Step is its
// Start. (Over several ranks, the ranks agree on the step to stop after,
// as for a cancel during the run.)
func (r *Run) Train(ctx context.Context) (sum *Summary, err error) {
	if err := cancelled(ctx); err != nil && r.dist == nil {
		s := r.t.Step
		return &Summary{Start: s, Step: s, Steps: r.t.Cfg.Steps, Stopped: true, Loss: math.NaN(), ValLoss: math.NaN(), Out: r.plan.Out, OptOut: r.plan.OptOut, CSV: r.plan.CSV},
			fmt.Errorf("training stopped before step %d of %d (nothing written): %w", s+1, r.t.Cfg.Steps, err)
	}
	ctx, release := r.collective(ctx) // on several ranks: every rank stops after the same step
	defer release()
	if r.dist == nil {
		// On one process, a cancel also stops the step (or evaluation) in
		// flight, between two layers: see the workspace's interrupt.
		r.t.WS.SetInterrupt(func() bool {
			if r.layerHook != nil {
				r.layerHook()
			}
			return ctx.Err() != nil
		})
		defer r.t.WS.SetInterrupt(nil)
	}
	// Resumed in place, the log continues the run's; else it starts anew.
	inPlace := r.plan.Resume != "" && sameFile(r.plan.Out, r.plan.Resume)
	lg := newCSVLog(r.csvLogPath(), inPlace, r.t.Step, r.t.Model.Spec.IsClassifier())
	defer func() {
		if cerr := lg.close(); err == nil {
			err = cerr
		}
	}()
	t, o := r.t, r.o
	spec := t.Model.Spec
	tokensPerStep := r.plan.TokensPerStep()
	vocab := spec.Vocab
	if spec.IsClassifier() { // a uniform guess scores ln classes
		vocab = spec.Classes
	}
	start := time.Now()
	var trainDur time.Duration
	first := t.Step
	saved := first // the step of the checkpoint on disk (first: the resumed one, or none)
	sum = &Summary{Start: first, Steps: t.Cfg.Steps, ValLoss: math.NaN(), Out: r.plan.Out, OptOut: r.plan.OptOut, CSV: r.plan.CSV}
	tps := func() float64 {
		if trainDur <= 0 {
			return 0
		}
		return float64((t.Step-first)*tokensPerStep) / trainDur.Seconds()
	}
	finish := func() *Summary {
		sum.Step, sum.Loss, sum.TokensPerSec, sum.Elapsed = t.Step, t.Loss, tps(), time.Since(start)
		sum.Stopped = t.Step < t.Cfg.Steps
		r.model.step = t.Step
		return sum
	}
	emit := func(ev Event) {
		if o.log != nil && (ev.Evaluated || ev.Step%o.every == 0 || ev.Step == ev.Stop) {
			fmt.Fprintln(o.log, ev.String())
		}
		if o.onEvent != nil {
			o.onEvent(ev)
		}
	}
	base := Event{Start: first, Stop: r.plan.Stop, Steps: t.Cfg.Steps, Vocab: vocab, Loss: math.NaN(), Val: math.NaN(), LastVal: math.NaN()}

	if t.Step == 0 && o.evalEvery > 0 {
		res, ok, err := r.evaluate(ctx)
		switch {
		case !ok:
		case err == nil:
			sum.ValLoss = res.Loss
			ev := base
			ev.Evaluated, ev.Val, ev.LastVal, ev.Eval = true, res.Loss, res.Loss, res
			emit(ev)
			lg.row(csvRow{step: 0, loss: math.NaN(), val: res.Loss, lr: math.NaN(), tps: math.NaN(), acc: res.Accuracy})
		case ctx.Err() == nil:
			return finish(), err
		} // cancelled: the first step runs, then the run saves and stops
	}
	for t.Step < r.plan.Stop {
		t0 := time.Now()
		if err := t.TrainStep(); err != nil {
			if errors.Is(err, train.ErrInterrupted) && ctx.Err() != nil {
				return finish(), r.abandon(ctx, lg, first, saved)
			}
			return finish(), err
		}
		trainDur += time.Since(t0)
		s := t.Step
		r.model.step = s
		ev := base
		ev.Step, ev.Loss, ev.LR, ev.TokensPerSec, ev.LastVal = s, t.Loss, t.LR, tps(), sum.ValLoss
		ev.Elapsed = time.Since(start)
		if o.evalEvery > 0 && (s%o.evalEvery == 0 || s == r.plan.Stop) {
			res, ok, err := r.evaluate(ctx)
			switch {
			case !ok:
			case err == nil:
				sum.ValLoss = res.Loss
				ev.Evaluated, ev.Val, ev.LastVal, ev.Eval = true, res.Loss, res.Loss, res
			case ctx.Err() == nil:
				return finish(), err
			} // cancelled during the evaluation: save below, unevaluated
		}
		acc := math.NaN()
		if ev.Evaluated {
			acc = ev.Eval.Accuracy
		}
		lg.row(csvRow{step: s, loss: t.Loss, val: ev.Val, lr: t.LR, tps: math.Round(ev.TokensPerSec*10) / 10, acc: acc})
		emit(ev)
		if o.saveEvery > 0 && s%o.saveEvery == 0 && s < r.plan.Stop {
			if err := r.save(lg); err != nil {
				return finish(), err
			}
			saved = s
		}
		if ctx.Err() != nil {
			if saved != s { // not just saved by SaveEvery
				if err := r.save(lg); err != nil {
					return finish(), err
				}
			}
			return finish(), fmt.Errorf("training stopped after step %d of %d (saved to %s): %w", s, t.Cfg.Steps, r.plan.Out, context.Cause(ctx))
		}
	}
	if err := r.save(lg); err != nil {
		return finish(), err
	}
	finish()
	if o.log != nil {
		fmt.Fprintln(o.log, sum)
	}
	return sum, nil
}

// abandon ends a run whose ctx was cancelled during a step, which the
// interrupt abandoned before its update: the weights are those of the
// last completed step, t.Step, which it saves unless that checkpoint is
// on disk already (saved: the step of the last save, or the run's first
// step, whose checkpoint is the one resumed or, for a new run, none: then
// nothing is written). It returns the run's error.
func (r *Run) abandon(ctx context.Context, lg *csvLog, first, saved int) error {
	t := r.t
	cause := context.Cause(ctx)
	switch {
	case t.Step == first && r.plan.Resume == "":
		return fmt.Errorf("training stopped during step %d of %d, abandoned (nothing written): %w", t.Step+1, t.Cfg.Steps, cause)
	case t.Step == first:
		return fmt.Errorf("training stopped during step %d of %d, abandoned (nothing written: the resumed checkpoint %s of step %d is kept): %w", t.Step+1, t.Cfg.Steps, r.plan.Resume, t.Step, cause)
	case t.Step == saved:
		return fmt.Errorf("training stopped during step %d of %d, abandoned (step %d was saved to %s): %w", t.Step+1, t.Cfg.Steps, t.Step, r.plan.Out, cause)
	}
	if err := r.save(lg); err != nil {
		return err
	}
	return fmt.Errorf("training stopped during step %d of %d, abandoned (saved step %d to %s): %w", t.Step+1, t.Cfg.Steps, t.Step, r.plan.Out, cause)
}

// save writes the log's rows to disk, then the checkpoint and optimizer
// state: the log holds every step of a checkpoint that is saved (a crash in
// between leaves rows past the checkpoint's step, which a resume drops).
// A log that this save created is removed again if the checkpoint fails.
func (r *Run) save(lg *csvLog) error {
	first := lg.f == nil
	if err := lg.flush(); err != nil {
		return err
	}
	if err := r.Save(); err != nil {
		if first {
			lg.remove()
		}
		return err
	}
	return nil
}

func ftoa(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
