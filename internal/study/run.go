package study

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/synthgen/synthgen/internal/textfmt"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// ProgressKind says what a Progress reports.
type ProgressKind int

const (
	RunStarted  ProgressKind = iota // a run begins (or continues from its checkpoint)
	RunStep                         // a run's step or evaluation: Event is set
	RunFinished                     // a run is trained and evaluated: Result is set
	RunSkipped                      // a run was finished before: Result is set
)

// Progress reports a study's progress.
type Progress struct {
	Kind      ProgressKind
	Run, Runs int // the run's index (from 0) and the number of runs
	Spec      string
	Seed      uint64
	From      int         // RunStarted: the step the run starts from
	Event     synth.Event // RunStep: the run's event
	Result    *RunResult  // RunFinished, RunSkipped: the run's result

	// DoneSteps of TotalSteps training steps of the whole study are done.
	DoneSteps, TotalSteps int
	Elapsed               time.Duration // since Run began
	// ETA is the time the remaining steps of the whole study should take
	// at this invocation's pace so far (0 until a step is done).
	ETA time.Duration
}

// String is the progress as one line:
//
//	[ 3/14 dense seed 1] step 400/800  loss 2.0312  val 2.0688  61.2k tok/s | study 21% ETA 6m12s
func (p Progress) String() string {
	w := len(fmt.Sprint(p.Runs))
	head := fmt.Sprintf("[%*d/%d %s seed %d]", w, p.Run+1, p.Runs, p.Spec, p.Seed)
	study := fmt.Sprintf("study %.0f%%", 100*float64(p.DoneSteps)/float64(max(1, p.TotalSteps)))
	if p.ETA > 0 {
		study += " ETA " + textfmt.Duration(p.ETA)
	}
	switch p.Kind {
	case RunStarted:
		if p.From > 0 {
			return fmt.Sprintf("%s continuing from step %d | %s", head, p.From, study)
		}
		return fmt.Sprintf("%s training | %s", head, study)
	case RunFinished:
		return fmt.Sprintf("%s done: %s | %s", head, p.Result, study)
	case RunSkipped:
		return fmt.Sprintf("%s already done: %s", head, p.Result)
	}
	e := p.Event
	if e.Step == e.Start && math.IsNaN(e.Loss) {
		return fmt.Sprintf("%s step %d: val loss %.4f", head, e.Step, e.Val)
	}
	val := "" // only on an evaluation: no stale value between them
	if e.Evaluated {
		val = fmt.Sprintf("  val %.4f", e.Val)
		if e.Eval.Examples > 0 {
			val += fmt.Sprintf("  acc %.4f", e.Eval.Accuracy)
		}
	}
	return fmt.Sprintf("%s step %*d/%d  loss %.4f%s  %s tok/s | %s", head, len(fmt.Sprint(e.Stop)), e.Step, e.Stop, e.Loss, val, textfmt.Count(e.TokensPerSec), study)
}

// RunResult is one finished run.
type RunResult struct {
	Spec      string  `json:"spec"`
	Variant   string  `json:"variant"`
	Seed      uint64  `json:"seed"`
	Params    int     `json:"params"`
	Steps     int     `json:"steps"`
	TrainLoss float64 `json:"train_loss"` // mean of the last TrainTail steps' batch losses (nats)
	TrainTail int     `json:"train_tail"`
	ValLoss   float64 `json:"val_loss"` // on every held-out window (nats)
	BPB       float64 `json:"bpb"`      // ValLoss in bits per byte
	// ValWindows is the number of held-out windows ValLoss covers.
	ValWindows int `json:"val_windows"`
	// A classification study's: the accuracy and number of the test
	// examples (ValLoss is then the test loss; BPB 0).
	Accuracy float64 `json:"accuracy,omitempty"`
	Examples int     `json:"examples,omitempty"`
	// TokensPerSec and WallSeconds are measured (training steps only, and
	// all of the run's time including evaluations and saves, summed over
	// its invocations): they vary from run to run.
	TokensPerSec float64 `json:"tokens_per_s"`
	WallSeconds  float64 `json:"wall_seconds"`
	Checkpoint   string  `json:"checkpoint"`
}

// String is the result in one line.
func (r *RunResult) String() string {
	if r.Examples > 0 {
		return fmt.Sprintf("train loss %.4f, test loss %.4f, test accuracy %.2f%%, %s tok/s, %s", r.TrainLoss, r.ValLoss, 100*r.Accuracy, textfmt.Count(r.TokensPerSec), textfmt.Duration(time.Duration(r.WallSeconds*float64(time.Second))))
	}
	return fmt.Sprintf("train loss %.4f, val loss %.4f (%.4f bpb), %s tok/s, %s", r.TrainLoss, r.ValLoss, r.BPB, textfmt.Count(r.TokensPerSec), textfmt.Duration(time.Duration(r.WallSeconds*float64(time.Second))))
}

// Result is a study's outcome: the table of the finished runs and the
// files written.
type Result struct {
	Table    *Table
	Complete bool   // every run is finished
	Markdown string // paths of the files written
	CSV      string
	JSON     string
	LossPlot string // "" when no run has finished
	// AccuracyPlot is a classification study's accuracy.png ("" when no
	// run has finished, for a language-model study, or when the logs hold
	// no validation accuracy: EvalEvery 0).
	AccuracyPlot string
}

// Run trains every run that is not done, one after another with all the
// workers, and evaluates each on every held-out window; after each
// finished run it rewrites study.json, the results and loss.png, so an
// interruption keeps every finished result. When ctx is cancelled the
// current run finishes its step, saves a resumable checkpoint and Run
// returns the finished results with an error wrapping ctx's cause
// (errors.Is(err, context.Canceled) for a plain cancel); Open continues
// the study.
func (st *Study) Run(ctx context.Context) (*Result, error) {
	if err := os.MkdirAll(st.dir, 0o755); err != nil {
		return nil, fmt.Errorf("output folder %s: %w", st.dir, err)
	}
	if err := st.saveManifest(); err != nil {
		return nil, err
	}
	plan := st.Plan()
	start := time.Now()
	done0 := plan.DoneSteps // steps done before this invocation
	done := done0
	report := func(p Progress) {
		if st.o.onProgress == nil {
			return
		}
		p.Runs, p.DoneSteps, p.TotalSteps, p.Elapsed = len(plan.Runs), done, plan.TotalSteps, time.Since(start)
		if done > done0 {
			p.ETA = time.Duration(float64(p.Elapsed) / float64(done-done0) * float64(plan.TotalSteps-done))
		}
		st.o.onProgress(p)
	}
	for i, rp := range plan.Runs {
		rs := &st.state.Runs[i]
		if rs.Result != nil {
			report(Progress{Kind: RunSkipped, Run: i, Spec: rp.Spec.Name, Seed: rp.Seed, Result: rs.Result})
			continue
		}
		if err := ctx.Err(); err != nil {
			res, rerr := st.writeResults()
			return res, errors.Join(fmt.Errorf("study stopped before run %d of %d (%s seed %d): %w", i+1, len(plan.Runs), rp.Spec.Name, rp.Seed, context.Cause(ctx)), rerr)
		}
		report(Progress{Kind: RunStarted, Run: i, Spec: rp.Spec.Name, Seed: rp.Seed, From: rp.Step})
		before := done
		onEvent := func(ev synth.Event) {
			done = before + ev.Step - rp.Step
			report(Progress{Kind: RunStep, Run: i, Spec: rp.Spec.Name, Seed: rp.Seed, Event: ev})
		}
		r, err := st.train(ctx, rp, rs, onEvent)
		if err != nil {
			serr := st.saveManifest()
			res, rerr := st.writeResults()
			return res, errors.Join(err, serr, rerr)
		}
		done = before + st.o.s.Steps - rp.Step
		rs.Result = r
		if err := st.saveManifest(); err != nil {
			return nil, err
		}
		if _, err := st.writeResults(); err != nil {
			return nil, err
		}
		report(Progress{Kind: RunFinished, Run: i, Spec: rp.Spec.Name, Seed: rp.Seed, Result: r})
	}
	return st.writeResults()
}

// train trains (or continues) one run to its last step and evaluates it,
// accumulating its measured times into rs.
func (st *Study) train(ctx context.Context, rp RunPlan, rs *runState, onEvent func(synth.Event)) (*RunResult, error) {
	s := st.o.s
	t0 := time.Now()
	defer func() { rs.WallSeconds += time.Since(t0).Seconds() }()
	var m *synth.Model
	perStep, err := tokensPerStep(s, rp.Spec)
	if err != nil {
		return nil, err
	}
	if rp.Step < s.Steps {
		opts := []synth.Option{
			synth.Data(s.Data), synth.Out(rp.Checkpoint), synth.EvalEvery(s.EvalEvery), synth.EvalWindows(s.EvalWindows),
			synth.Workers(st.o.workers), synth.OnEvent(onEvent),
		}
		if s.isClassify() {
			opts = append(opts, synth.Valid(s.Valid))
		}
		var run *synth.Run
		var err error
		if rp.Step > 0 {
			run, err = synth.ResumeRun(ctx, rp.Checkpoint, opts...)
		} else {
			opts = append(opts, synth.Steps(s.Steps), synth.Batch(s.Batch), synth.Seed(rp.Seed))
			if st.resumed {
				// A run of this study that never saved a resumable pair: its
				// files, if any, are the study's own (New checked the folder).
				opts = append(opts, synth.Overwrite())
			}
			run, err = synth.NewRun(ctx, rp.Spec, opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("spec %s seed %d: %w", rp.Spec.Name, rp.Seed, err)
		}
		if notes := run.Plan().Notes; len(notes) > 0 {
			return nil, fmt.Errorf("spec %s seed %d: the run would not continue exactly: %v", rp.Spec.Name, rp.Seed, notes)
		}
		sum, err := run.Train(ctx)
		if sum != nil && sum.Step > sum.Start && sum.TokensPerSec > 0 {
			steps := sum.Step - sum.Start
			rs.TrainedSteps += steps
			rs.TrainSeconds += float64(steps*perStep) / sum.TokensPerSec
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("study stopped in spec %s seed %d: %w", rp.Spec.Name, rp.Seed, err)
			}
			return nil, fmt.Errorf("spec %s seed %d: %w", rp.Spec.Name, rp.Seed, err)
		}
		m = run.Model()
	} else {
		var err error
		if m, err = synth.Load(ctx, rp.Checkpoint); err != nil {
			return nil, fmt.Errorf("spec %s seed %d: %w", rp.Spec.Name, rp.Seed, err)
		}
		m.SetWorkers(st.o.workers)
	}
	var ev synth.EvalResult
	var cev synth.ClassEvalResult
	if s.isClassify() {
		var err error
		if cev, err = m.EvaluateLabelled(ctx, s.Test, 0); err != nil {
			return nil, fmt.Errorf("spec %s seed %d: final evaluation: %w", rp.Spec.Name, rp.Seed, err)
		}
	} else {
		val, err := synth.HeldOut(s.Data, rp.Spec)
		if err != nil {
			return nil, fmt.Errorf("spec %s: %w", rp.Spec.Name, err)
		}
		if ev, err = m.Evaluate(ctx, val, synth.EvalOptions{}); err != nil {
			return nil, fmt.Errorf("spec %s seed %d: final evaluation: %w", rp.Spec.Name, rp.Seed, err)
		}
	}
	log, err := readLog(runCSV(rp.Checkpoint), s.Steps)
	if err != nil {
		return nil, fmt.Errorf("spec %s seed %d: %w", rp.Spec.Name, rp.Seed, err)
	}
	tail := min(TrainTail, s.Steps)
	sumLoss, k := 0.0, 0
	for _, p := range log.train {
		if p.step > s.Steps-tail {
			sumLoss += p.loss
			k++
		}
	}
	if k != tail {
		return nil, fmt.Errorf("spec %s seed %d: log %s has %d of the last %d steps' losses", rp.Spec.Name, rp.Seed, runCSV(rp.Checkpoint), k, tail)
	}
	r := &RunResult{
		Spec: rp.Spec.Name, Variant: rp.Spec.Variant, Seed: rp.Seed, Params: m.NumParams(), Steps: s.Steps,
		TrainLoss: sumLoss / float64(k), TrainTail: tail,
		ValLoss: ev.Loss, BPB: ev.BPB(), ValWindows: ev.Windows,
		Checkpoint: rp.Checkpoint,
	}
	if s.isClassify() {
		r.ValLoss, r.BPB, r.Accuracy, r.Examples = cev.Loss, 0, cev.Accuracy, cev.Examples
	}
	if rs.TrainSeconds > 0 {
		r.TokensPerSec = float64(rs.TrainedSteps*perStep) / rs.TrainSeconds
	}
	r.WallSeconds = rs.WallSeconds + time.Since(t0).Seconds()
	return r, nil
}

// tokensPerStep is the tokens of one training step, as synth counts them
// for its throughput: batch × n, or for a classifier batch × the mean
// length of the training file's texts.
func tokensPerStep(s Settings, sp specs.Spec) (int, error) {
	if !s.isClassify() {
		return s.Batch * sp.N, nil
	}
	set, err := data.ReadLabelled(s.Data, data.LabelledOptions{N: sp.N, Vocab: sp.Vocab})
	if err != nil {
		return 0, fmt.Errorf("spec %s: %w", sp.Name, err)
	}
	bytes := 0
	for _, e := range set.Examples {
		bytes += len(e.Text)
	}
	return s.Batch * bytes / len(set.Examples), nil
}

// TrainTail is the number of last steps whose batch losses make a run's
// train loss (a single batch's loss is noisy).
const TrainTail = 50

func (st *Study) saveManifest() error {
	b, err := json.MarshalIndent(st.state, "", "  ")
	if err != nil {
		return fmt.Errorf("study manifest: %w", err)
	}
	return writeAtomic(st.path(ManifestFile), append(b, '\n'))
}

func (st *Study) path(name string) string { return filepath.Join(st.dir, name) }
