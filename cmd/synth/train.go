package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
	"github.com/synthgen/synthgen/runtime/train"
)

// Defaults of synth train, chosen so that the default run (spec random on
// the default text) takes about 3–5 minutes on the 2-core reference machine.
const (
	DefaultSteps       = 2000
	DefaultBatch       = 16
	DefaultEvalEvery   = 250
	DefaultEvalWindows = 64
	DefaultLogEvery    = 10
)

// keyData is the optimizer-state metadata naming the run's data file.
const keyData = "train.data"

// csvPath is the CSV log beside checkpoint path: x.safetensors → x.csv.
func csvPath(path string) string {
	return strings.TrimSuffix(path, ".safetensors") + ".csv"
}

func runTrain(args []string) error {
	e := stdEnv()
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(ch)
	e.interrupt = ch
	return trainCmd(e, args)
}

// trainOpts are synth train's flags.
type trainOpts struct {
	spec, data, out, resume                        string
	steps, lrSteps, batch, warmup, stopAt, workers int
	evalEvery, evalWindows                         int
	logEvery, saveEvery                            int
	lr, clip, wd                                   float64
	seed                                           uint64
}

func trainCmd(e *env, args []string) error {
	fs := newFlagSet(e, "train", "Trains a model of a linked spec on a text file (or continues a saved run with -resume),\nprinting progress, and writes a checkpoint, its optimizer state and a CSV log.")
	var o trainOpts
	fs.StringVar(&o.spec, "spec", DefaultSpec, "linked spec to train (`name`, or a spec file whose package is linked)")
	fs.StringVar(&o.data, "data", "", "training text, read as bytes; the last 10% is held out (default: Go's Isaac.Newton-Opticks.txt)")
	fs.IntVar(&o.steps, "steps", DefaultSteps, "total steps of the run (with -resume: continue up to this step); the schedule's horizon")
	fs.IntVar(&o.lrSteps, "lr-steps", 0, "length of the learning-rate schedule (0: -steps); fix it to split one run into several: -steps 100 -lr-steps 200, then -resume -steps 200, ends with the weights of -steps 200")
	fs.IntVar(&o.batch, "batch", DefaultBatch, "sequences of n tokens per step")
	fs.Float64Var(&o.lr, "lr", optim.DefaultLR, "peak learning rate (linear warm-up, then cosine decay to 10%)")
	fs.IntVar(&o.warmup, "warmup", -1, "warm-up steps (-1: min(100, 5% of -steps))")
	fs.Float64Var(&o.clip, "clip", optim.DefaultClip, "global gradient-norm bound (0: no clipping)")
	fs.Float64Var(&o.wd, "wd", optim.DefaultWeightDecay, "AdamW weight decay of matrices and embeddings")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the initialisation and of the batches")
	fs.StringVar(&o.out, "out", "", "checkpoint to write (default <spec>.safetensors, or the -resume file); the optimizer state goes to <name>.opt.safetensors and the log to <name>.csv beside it")
	fs.StringVar(&o.resume, "resume", "", "continue the run saved in this checkpoint `file` (and its .opt.safetensors)")
	fs.IntVar(&o.stopAt, "stop-at", 0, "stop and save after this step, to resume later (0: run to -steps)")
	fs.IntVar(&o.evalEvery, "eval-every", DefaultEvalEvery, "evaluate on held-out text every this many steps (0: never)")
	fs.IntVar(&o.evalWindows, "eval-windows", DefaultEvalWindows, "held-out windows per evaluation (0: all)")
	fs.IntVar(&o.logEvery, "log-every", DefaultLogEvery, "print a progress line every this many steps when output is not a terminal")
	fs.IntVar(&o.saveEvery, "save-every", 0, "also save a checkpoint every this many steps (0: only at the end)")
	fs.IntVar(&o.workers, "workers", 0, "goroutine workers (0: GOMAXPROCS); results do not depend on it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := setFlags(fs)
	switch {
	case o.evalEvery < 0:
		return fmt.Errorf("-eval-every %d must be ≥ 0", o.evalEvery)
	case o.evalWindows < 0:
		return fmt.Errorf("-eval-windows %d must be ≥ 0", o.evalWindows)
	case o.logEvery < 1:
		return fmt.Errorf("-log-every %d must be ≥ 1", o.logEvery)
	case o.saveEvery < 0:
		return fmt.Errorf("-save-every %d must be ≥ 0", o.saveEvery)
	case o.workers < 0:
		return fmt.Errorf("-workers %d must be ≥ 0", o.workers)
	case o.stopAt < 0:
		return fmt.Errorf("-stop-at %d must be ≥ 0", o.stopAt)
	}

	r, err := setupRun(e, &o, set)
	if err != nil {
		return err
	}
	return r.loop()
}

// trainRun is one training process: the trainer and everything around it.
type trainRun struct {
	e      *env
	o      *trainOpts
	t      *train.Trainer
	ds     *data.Dataset
	out    string
	stopAt int
	csv    *os.File
	csvw   *bufio.Writer
	extra  map[string]string
}

// setupRun builds the model (new or resumed), the data and the trainer.
func setupRun(e *env, o *trainOpts, set map[string]bool) (*trainRun, error) {
	cfg := train.DefaultConfig(o.steps, o.batch)
	cfg.LR, cfg.Clip, cfg.Optim.WeightDecay, cfg.Seed = o.lr, o.clip, o.wd, o.seed
	if o.warmup >= 0 {
		cfg.Warmup = o.warmup
	}
	cfg.Horizon = o.lrSteps
	if o.lrSteps > 0 && o.warmup < 0 {
		cfg.Warmup = optim.DefaultWarmup(o.lrSteps)
	}
	var (
		m        *model.Model
		step     int
		dataArg  = o.data
		notes    []string
		haveOpt  bool
		optPath  string
		fromFile string
		dataFrom string
	)
	if o.resume != "" {
		h, err := checkpoint.ReadHeader(o.resume)
		if err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		if set["spec"] {
			s, _, err := lookupSpec(o.spec)
			if err != nil {
				return nil, err
			}
			if s.JSON() != h.Spec.JSON() {
				return nil, fmt.Errorf("-spec %s does not match the spec of -resume %s (%s); drop -spec", o.spec, o.resume, h.Spec.JSON())
			}
		}
		k, err := checkpoint.Kernels(o.resume, &h.Spec)
		if err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		if m, err = model.New(h.Spec, k, 0); err != nil {
			return nil, fmt.Errorf("-resume %s: %w", o.resume, err)
		}
		if err := h.Into(m); err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
		step = h.Step
		optPath = checkpoint.OptPath(o.resume)
		if _, err := os.Stat(optPath); err == nil {
			f, err := checkpoint.Read(optPath)
			if err != nil {
				return nil, fmt.Errorf("-resume: optimizer state: %w", err)
			}
			saved, err := train.ConfigFromMetadata(optPath, f.Metadata)
			if err != nil {
				return nil, fmt.Errorf("-resume: %w", err)
			}
			haveOpt, fromFile = true, optPath
			// The saved run's settings, unless a flag overrides one.
			if !set["lr-steps"] {
				cfg.Horizon = saved.Horizon
			}
			if !set["steps"] {
				cfg.Steps = saved.Steps
			} else if o.steps != saved.Steps && cfg.Horizon == 0 {
				notes = append(notes, fmt.Sprintf("-steps %d differs from the saved run's %d: the cosine schedule is stretched to the new total from step %d on", o.steps, saved.Steps, step))
			}
			if !set["warmup"] {
				cfg.Warmup = saved.Warmup
			}
			keep := func(flag string, same bool, apply func()) {
				if !set[flag] {
					apply()
				} else if !same {
					notes = append(notes, fmt.Sprintf("-%s overrides the saved run's value: the result will differ from an uninterrupted run", flag))
				}
			}
			keep("batch", o.batch == saved.Batch, func() { cfg.Batch = saved.Batch })
			keep("lr", o.lr == saved.LR, func() { cfg.LR = saved.LR })
			keep("clip", o.clip == saved.Clip, func() { cfg.Clip = saved.Clip })
			keep("wd", o.wd == saved.Optim.WeightDecay, func() { cfg.Optim.WeightDecay = saved.Optim.WeightDecay })
			keep("seed", o.seed == saved.Seed, func() { cfg.Seed = saved.Seed })
			cfg.MinLRFrac, cfg.Optim.Beta1, cfg.Optim.Beta2, cfg.Optim.Eps = saved.MinLRFrac, saved.Optim.Beta1, saved.Optim.Beta2, saved.Optim.Eps
			if !set["data"] && f.Metadata[keyData] != "" {
				dataArg, dataFrom = f.Metadata[keyData], " (the saved run's; -data overrides)"
			}
		} else if errors.Is(err, fs.ErrNotExist) {
			notes = append(notes, fmt.Sprintf("warning: no optimizer state %s: AdamW moments start from zero, so this is not an exact continuation", optPath))
		} else {
			return nil, fmt.Errorf("-resume: optimizer state: %w", err)
		}
		if cfg.Steps <= step {
			return nil, fmt.Errorf("-resume %s is at step %d, already at or past -steps %d: pass a larger -steps", o.resume, step, cfg.Steps)
		}
	} else {
		s, k, err := lookupSpec(o.spec)
		if err != nil {
			return nil, err
		}
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		if m, err = model.New(s, k, cfg.Seed); err != nil {
			return nil, fmt.Errorf("build model %s: %w", s.Name, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m.SetWorkers(o.workers)

	out := o.out
	if out == "" {
		if o.resume != "" {
			out = o.resume
		} else {
			out = m.Spec.Name + ".safetensors"
		}
	}
	if err := checkOut(out); err != nil {
		return nil, err
	}
	stopAt := cfg.Steps
	if o.stopAt > 0 {
		if o.stopAt <= step || o.stopAt > cfg.Steps {
			return nil, fmt.Errorf("-stop-at %d must be after the start step %d and at most -steps %d", o.stopAt, step, cfg.Steps)
		}
		stopAt = o.stopAt
	}

	path, note, err := dataPath(dataArg)
	if err != nil {
		return nil, err
	}
	// The first line of output says which data the run reads.
	if note != "" {
		fmt.Fprintln(e.out, note)
	} else {
		fmt.Fprintf(e.out, "data: %s%s\n", path, dataFrom)
	}
	ds, err := data.Load(path, m.Spec.N, m.Spec.Vocab)
	if err != nil {
		return nil, err
	}
	t, err := train.New(m, ds.Train, cfg)
	if err != nil {
		return nil, err
	}
	if haveOpt {
		if _, err := t.LoadState(o.resume, step); err != nil {
			return nil, fmt.Errorf("-resume: %w", err)
		}
	} else {
		t.Step = step
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	r := &trainRun{e: e, o: o, t: t, ds: ds, out: out, stopAt: stopAt, extra: map[string]string{keyData: abs}}

	for _, n := range notes {
		fmt.Fprintln(e.out, n)
	}
	fmt.Fprintf(e.out, "data: %d bytes: %d for training, %d held out (%d windows of %d bytes)\n",
		len(ds.Train)+len(ds.Val), len(ds.Train), len(ds.Val), data.NumWindows(ds.Val, m.Spec.N, 0), m.Spec.N+1)
	fmt.Fprintf(e.out, "model: spec %s (%s, n %d, d %d, %d heads, %d layers), %s parameters, kernels %s\n",
		m.Spec.Name, m.Spec.Variant, m.Spec.N, m.Spec.D, m.Spec.Heads, m.Spec.Layers, humanCount(float64(m.NumParams())), m.Kernels.ISA)
	if o.resume != "" {
		from := "checkpoint only"
		if fromFile != "" {
			from = "with optimizer state"
		}
		fmt.Fprintf(e.out, "resume: %s at step %d (%s)\n", o.resume, step, from)
	}
	fmt.Fprintf(e.out, "train: steps %d→%d of %d, batch %d×%d tokens, lr %g (warm-up %d, cosine to %g), clip %g, wd %g, seed %d\n",
		step, stopAt, cfg.Steps, cfg.Batch, m.Spec.N, cfg.LR, cfg.Warmup, cfg.LR*cfg.MinLRFrac, cfg.Clip, cfg.Optim.WeightDecay, cfg.Seed)
	fmt.Fprintf(e.out, "output: %s (optimizer state %s, log %s)\n", out, checkpoint.OptPath(out), csvPath(out))
	return r, nil
}

// checkOut fails early when the checkpoint cannot be written to out.
func checkOut(out string) error {
	if fi, err := os.Stat(out); err == nil && fi.IsDir() {
		return fmt.Errorf("-out %s is a directory", out)
	}
	dir := filepath.Dir(out)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("-out %s: directory %s: %w", out, dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("-out %s: %s is not a directory", out, dir)
	}
	return nil
}

// openCSV opens the CSV log: appended to when resuming a run that has one,
// else created with its header.
func (r *trainRun) openCSV() error {
	p := csvPath(r.out)
	var f *os.File
	var err error
	fresh := true
	if r.o.resume != "" {
		if fi, serr := os.Stat(p); serr == nil && fi.Size() > 0 {
			fresh = false
		}
	}
	if fresh {
		f, err = os.Create(p)
	} else {
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o644)
	}
	if err != nil {
		return fmt.Errorf("CSV log: %w", err)
	}
	r.csv, r.csvw = f, bufio.NewWriter(f)
	if fresh {
		r.csvw.WriteString("step,loss,val_loss,lr,tokens_per_s\n")
	}
	return nil
}

func (r *trainRun) closeCSV() error {
	if r.csv == nil {
		return nil
	}
	err := r.csvw.Flush()
	if cerr := r.csv.Close(); err == nil {
		err = cerr
	}
	r.csv = nil
	if err != nil {
		return fmt.Errorf("CSV log %s: %w", csvPath(r.out), err)
	}
	return nil
}

func ftoa(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

// evaluate scores the held-out text (capped at -eval-windows windows).
func (r *trainRun) evaluate() (train.Result, error) {
	return r.t.Evaluate(r.ds.Val, r.o.evalWindows)
}

// save writes the checkpoint and optimizer state and flushes the log.
func (r *trainRun) save() error {
	if err := r.t.Save(r.out, r.extra); err != nil {
		return err
	}
	if r.csvw != nil {
		if err := r.csvw.Flush(); err != nil {
			return fmt.Errorf("CSV log %s: %w", csvPath(r.out), err)
		}
	}
	return nil
}

// loop trains to r.stopAt, evaluating, logging and saving on the way, and
// saves on an interrupt.
func (r *trainRun) loop() (err error) {
	if err := r.openCSV(); err != nil {
		return err
	}
	defer func() {
		if cerr := r.closeCSV(); err == nil {
			err = cerr
		}
	}()
	t := r.t
	n := t.Model.Spec.N
	tokensPerStep := t.Cfg.Batch * n
	p := newProgress(r.e, t.Step, r.stopAt, r.o.logEvery)
	if t.Step == 0 && r.o.evalEvery > 0 {
		res, err := r.evaluate()
		if err != nil {
			return err
		}
		p.val = res.Loss
		p.println("step 0: val loss %.4f (%.4f bpb) on %d held-out windows; a uniform guess scores %.4f", res.Loss, res.BPB(), res.Windows, math.Log(float64(t.Model.Spec.Vocab)))
		fmt.Fprintf(r.csvw, "0,,%s,,\n", ftoa(res.Loss))
	}
	for t.Step < r.stopAt {
		t0 := time.Now()
		if err := t.TrainStep(); err != nil {
			p.finish()
			return err
		}
		p.trainDur += time.Since(t0)
		s := t.Step
		tps := p.tokensPerSec(s, tokensPerStep)
		val := math.NaN()
		evaluated := false
		if r.o.evalEvery > 0 && (s%r.o.evalEvery == 0 || s == r.stopAt) {
			res, err := r.evaluate()
			if err != nil {
				p.finish()
				return err
			}
			val, p.val, evaluated = res.Loss, res.Loss, true
		}
		fmt.Fprintf(r.csvw, "%d,%s,%s,%s,%s\n", s, ftoa(t.Loss), ftoa(val), ftoa(t.LR), ftoa(math.Round(tps*10)/10))
		if evaluated && r.e.terminal {
			p.println("step %d: loss %.4f, val loss %.4f (%.4f bpb)", s, t.Loss, val, val/math.Ln2)
		}
		p.update(s, t.Loss, t.LR, tps, evaluated)
		if r.o.saveEvery > 0 && s%r.o.saveEvery == 0 && s < r.stopAt {
			if err := r.save(); err != nil {
				p.finish()
				return err
			}
		}
		select {
		case sig := <-r.e.interrupt:
			p.finish()
			fmt.Fprintf(r.e.out, "%v: stopping after step %d of %d\n", sig, s, t.Cfg.Steps)
			if err := r.save(); err != nil {
				return err
			}
			fmt.Fprintf(r.e.out, "saved step %d to %s (optimizer state %s); continue with: synth train -resume %s\n", s, r.out, checkpoint.OptPath(r.out), r.out)
			return nil
		default:
		}
	}
	p.finish()
	if err := r.save(); err != nil {
		return err
	}
	fmt.Fprintf(r.e.out, "saved step %d to %s (optimizer state %s, log %s)\n", t.Step, r.out, checkpoint.OptPath(r.out), csvPath(r.out))
	if t.Step < t.Cfg.Steps {
		fmt.Fprintf(r.e.out, "stopped at step %d of %d; continue with: synth train -resume %s\n", t.Step, t.Cfg.Steps, r.out)
	}
	if p.trainDur > 0 {
		fmt.Fprintf(r.e.out, "trained %d steps in %s (%s tok/s)\n", t.Step-p.first, fmtDur(time.Since(p.start)), humanCount(p.tokensPerSec(t.Step, tokensPerStep)))
	}
	return nil
}
