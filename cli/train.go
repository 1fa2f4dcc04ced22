package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/synthgen/synthgen/runtime/synth"
)

func runTrain(e *env, args []string) error {
	ctx, stop := interruptContext(e.errOut)
	defer stop()
	e.ctx = ctx
	return trainCmd(e, args)
}

func trainCmd(e *env, args []string) (err error) {
	fs := newFlagSet(e, "train", "Trains a model of a linked spec on a text file (or continues a saved run with -resume),\nprinting progress, and writes a checkpoint, its optimizer state and a CSV log.\nA classifier (spec \"task\": \"classify\") trains on a labelled file: TSV label<TAB>text, CSV\nlabel,text or JSON Lines {\"label\": …, \"text\": …}, by the extension; its labels become the\nclasses in order of first appearance, validated on -valid or a -hold-out share.")
	var (
		spec, dataPath, out, resume, valid             string
		holdOut                                        float64
		steps, lrSteps, batch, warmup, stopAt, workers int
		evalEvery, evalWindows, logEvery, saveEvery    int
		lr, clip, wd                                   float64
		seed                                           uint64
		mpiTimeout                                     time.Duration
		force                                          bool
		precision                                      string
	)
	fs.StringVar(&spec, "spec", defaultSpec(), "linked spec to train (`name`, or a spec file whose package is linked)")
	fs.StringVar(&dataPath, "data", "", "training text, read as bytes; the last 10% is held out (default: Go's Isaac.Newton-Opticks.txt)")
	fs.StringVar(&valid, "valid", "", "a classifier's validation `file` (labelled; every label must be one of the training file's)")
	fs.Float64Var(&holdOut, "hold-out", 0, "a classifier: hold out this share in (0, 1) of the training file for validation (not with -valid)")
	fs.IntVar(&steps, "steps", synth.DefaultSteps, "total steps of the run (with -resume: continue up to this step); the schedule's horizon. With -resume, a -steps beyond the saved run's stretches its cosine to the new total, so the learning rate goes back up; add -lr-steps <the saved steps> to keep the saved schedule (the rate then stays at 10% of the peak)")
	fs.IntVar(&lrSteps, "lr-steps", 0, "length of the learning-rate schedule (0: -steps); fix it to split one run into several: -steps 100 -lr-steps 200, then -resume -steps 200, ends with the weights of -steps 200")
	fs.IntVar(&batch, "batch", synth.DefaultBatch, "sequences of n tokens per step")
	fs.Float64Var(&lr, "lr", synth.DefaultLR, "peak learning rate (linear warm-up, then cosine decay to 10%)")
	fs.IntVar(&warmup, "warmup", -1, "warm-up steps (-1: min(100, 5% of -steps))")
	fs.Float64Var(&clip, "clip", synth.DefaultClip, "global gradient-norm bound, ≥ 0 (0: no clipping)")
	fs.Float64Var(&wd, "wd", synth.DefaultWeightDecay, "AdamW weight decay of matrices and embeddings")
	fs.Uint64Var(&seed, "seed", synth.DefaultSeed, "seed of the initialisation and of the batches")
	fs.StringVar(&out, "out", "", "checkpoint to write (default <spec>.safetensors, or the -resume file); the optimizer state goes to <name>.opt.safetensors and the log to <name>.csv beside it")
	fs.BoolVar(&force, "force", false, "replace existing files at -out (checkpoint, optimizer state, log) that this run did not start from (without it, training over them is an error), allow -workers above 4 per CPU, and a -batch whose memory estimate exceeds the machine's memory")
	fs.StringVar(&resume, "resume", "", "continue the run saved in this checkpoint `file` (and its .opt.safetensors)")
	fs.IntVar(&stopAt, "stop-at", 0, "stop and save after this step, to resume later (0: run to -steps)")
	fs.IntVar(&evalEvery, "eval-every", synth.DefaultEvalEvery, "evaluate on held-out text every this many steps (0: never)")
	fs.IntVar(&evalWindows, "eval-windows", synth.DefaultEvalWindows, "held-out windows per evaluation (0: all)")
	fs.IntVar(&logEvery, "log-every", synth.DefaultLogEvery, "print a progress line every this many steps when output is not a terminal")
	fs.IntVar(&saveEvery, "save-every", 0, "also save a checkpoint every this many steps (0: only at the end)")
	fs.IntVar(&workers, "workers", 0, "goroutine workers (0: GOMAXPROCS, shared by the ranks on one machine under mpirun); results do not depend on it")
	fs.StringVar(&precision, "precision", "f32", "number format of the linear layers', aft_full's and the random synthesizers' attention products: f32, or bf16 (bf16 operands, float32 accumulation, weights and optimizer state; on AMX, else AVX512-BF16; a CPU with neither trains in float32 and says so)")
	fs.DurationVar(&mpiTimeout, "mpi-timeout", defaultMPITimeout, "under mpirun (built with -tags mpi): end the job when a rank waits this long for the others (0: never)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if logEvery < 1 {
		return fmt.Errorf("-log-every %d must be ≥ 1", logEvery)
	}
	prec, err := synth.ParsePrecision(precision)
	if err != nil {
		return fmt.Errorf("-precision: %w", err)
	}
	if warmup < -1 {
		return fmt.Errorf("-warmup %d must be ≥ 0 (or -1: the default)", warmup)
	}
	// Started by mpirun: data-parallel training, one rank per process.
	mpiWorld, err := joinMPI(e, mpiTimeout)
	if err != nil {
		return err
	}
	if mpiWorld != nil {
		defer func() { err = mpiWorld.finish(err) }()
		e = mpiWorld.env(e)
	}

	// Only the flags given explicitly become options: the others take the
	// library's defaults on a new run and the saved values on a resume.
	p := newProgress(e, logEvery)
	opts := []synth.Option{synth.OnEvent(p.event)}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "data":
			opts = append(opts, synth.Data(dataPath))
		case "out":
			opts = append(opts, synth.Out(out))
		case "valid":
			opts = append(opts, synth.Valid(valid))
		case "hold-out":
			opts = append(opts, synth.HoldOut(holdOut))
		case "steps":
			opts = append(opts, synth.Steps(steps))
		case "lr-steps":
			opts = append(opts, synth.LRSteps(lrSteps))
		case "batch":
			opts = append(opts, synth.Batch(batch))
		case "lr":
			opts = append(opts, synth.LR(lr))
		case "warmup":
			if warmup >= 0 {
				opts = append(opts, synth.Warmup(warmup))
			}
		case "clip":
			opts = append(opts, synth.Clip(clip))
		case "wd":
			opts = append(opts, synth.WeightDecay(wd))
		case "seed":
			opts = append(opts, synth.Seed(seed))
		case "stop-at":
			opts = append(opts, synth.StopAt(stopAt))
		case "eval-every":
			opts = append(opts, synth.EvalEvery(evalEvery))
		case "eval-windows":
			opts = append(opts, synth.EvalWindows(evalWindows))
		case "save-every":
			opts = append(opts, synth.SaveEvery(saveEvery))
		case "workers":
			opts = append(opts, synth.Workers(workers))
		case "precision":
			opts = append(opts, synth.Precision(prec))
		case "force":
			if force {
				opts = append(opts, synth.Overwrite(), synth.AllowManyWorkers(), synth.AllowLargeMemory())
			}
		}
	})

	if mpiWorld != nil {
		opts = append(opts, synth.Ranks(mpiWorld.c))
		if w := mpiWorld.workers(); w > 0 && !explicit(fs, "workers") {
			opts = append(opts, synth.Workers(w))
		}
	}

	var run *synth.Run
	if resume != "" {
		if explicit(fs, "spec") {
			s, err := synth.LookupSpec(spec)
			if err != nil {
				return fmt.Errorf("-spec %s: %w", spec, err)
			}
			saved, _, err := synth.CheckpointSpec(resume)
			if err != nil {
				return fmt.Errorf("-resume: %w", err)
			}
			if s.JSON() != saved.JSON() {
				return fmt.Errorf("-spec %s does not match the spec of -resume %s (%s); drop -spec", spec, resume, saved.JSON())
			}
		}
		r, err := synth.ResumeRun(e.context(), resume, opts...)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(e.out, "%v before training started; nothing was trained or written\n", context.Cause(e.context()))
				return nil
			}
			return flagError(err)
		}
		run = r
	} else {
		if spec == "" {
			return fmt.Errorf("-spec is required: this program links %s", linkedList())
		}
		s, err := synth.LookupSpec(spec)
		if err != nil {
			return fmt.Errorf("-spec %s: %w", spec, err)
		}
		if run, err = synth.NewRun(e.context(), s, opts...); err != nil {
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(e.out, "%v before training started; nothing was trained or written\n", context.Cause(e.context()))
				return nil
			}
			return flagError(err)
		}
	}
	plan := run.Plan()
	fmt.Fprintln(e.out, plan)

	sum, err := run.Train(e.context())
	p.finish()
	if errors.Is(err, context.Canceled) && sum != nil && sum.Step == sum.Start {
		fmt.Fprintf(e.out, "%v: stopped before step %d of %d; nothing was trained or written\n", context.Cause(e.context()), sum.Start+1, sum.Steps)
		return nil
	}
	if errors.Is(err, context.Canceled) {
		// The cause is this process's signal, or (under mpirun) what
		// stopped another rank, which only err says.
		if cause := context.Cause(e.context()); cause != nil {
			fmt.Fprintf(e.out, "%v: stopped after step %d of %d\n", cause, sum.Step, sum.Steps)
		} else {
			fmt.Fprintln(e.out, err)
		}
		fmt.Fprintf(e.out, "saved step %d to %s (optimizer state %s); continue with: synth train -resume %s\n", sum.Step, sum.Out, sum.OptOut, sum.Out)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(e.out, "saved step %d to %s (optimizer state %s, log %s)\n", sum.Step, sum.Out, sum.OptOut, sum.CSV)
	if sum.Stopped {
		fmt.Fprintf(e.out, "stopped at step %d of %d; continue with: synth train -resume %s\n", sum.Step, sum.Steps, sum.Out)
	}
	fmt.Fprintln(e.out, sum)
	if mpiWorld != nil {
		mpiWorld.report(e, run, sum)
	}
	return nil
}
