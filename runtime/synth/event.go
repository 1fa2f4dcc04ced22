package synth

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/textfmt"
)

// Event reports a run's progress: a step done (Step > Start), possibly
// with an evaluation, or the evaluation of a new run's initial weights
// (Step = Start = 0, Evaluated, Loss NaN).
type Event struct {
	Step        int // the step just completed
	Start, Stop int // this run's first and last step
	Steps       int // the run's total (Stop < Steps when stopping early)

	Loss         float64       // the step's training loss (nats; NaN for the initial evaluation)
	LR           float64       // the learning rate the step used
	TokensPerSec float64       // training throughput of this run so far
	Elapsed      time.Duration // since Train began

	Evaluated bool       // this event carries an evaluation
	Eval      EvalResult // the evaluation, if Evaluated
	Val       float64    // Eval.Loss, NaN if not Evaluated
	LastVal   float64    // the latest evaluation's loss so far, NaN if none
	Vocab     int        // the model's vocabulary (a uniform guess scores ln Vocab)
}

// ETA is the expected time to Stop at the run's pace so far.
func (e Event) ETA() time.Duration {
	done := e.Step - e.Start
	if done <= 0 {
		return 0
	}
	return e.Elapsed / time.Duration(done) * time.Duration(e.Stop-e.Step)
}

// String is the event as one progress line:
//
//	step  40/200  loss 2.9123  lr 9.80e-04  61.2k tok/s  ETA 13s
//
// with "val 2.9521" after the loss when the event carries an evaluation
// (a line between evaluations shows none rather than repeat a stale one),
// or, for the initial evaluation, the held-out loss beside a uniform
// guess's.
func (e Event) String() string {
	if e.Step == e.Start && e.Evaluated && math.IsNaN(e.Loss) && e.Eval.Examples > 0 {
		return fmt.Sprintf("step %d: val loss %.4f, accuracy %.4f on %d examples; a uniform guess scores %.4f",
			e.Step, e.Val, e.Eval.Accuracy, e.Eval.Examples, math.Log(float64(e.Vocab)))
	}
	if e.Step == e.Start && e.Evaluated && math.IsNaN(e.Loss) {
		return fmt.Sprintf("step %d: val loss %.4f (%.4f bpb) on %d held-out windows; a uniform guess scores %.4f",
			e.Step, e.Val, e.Eval.BPB(), e.Eval.Windows, math.Log(float64(e.Vocab)))
	}
	val := ""
	if e.Evaluated {
		val = fmt.Sprintf("  val %.4f", e.Val)
		if e.Eval.Examples > 0 {
			val += fmt.Sprintf("  acc %.4f", e.Eval.Accuracy)
		}
	}
	eta := "-"
	if e.Step > e.Start {
		eta = textfmt.Duration(e.ETA())
	}
	return fmt.Sprintf("step %*d/%d  loss %.4f%s  lr %.2e  %s tok/s  ETA %s",
		len(fmt.Sprint(e.Stop)), e.Step, e.Stop, e.Loss, val, e.LR, textfmt.Count(e.TokensPerSec), eta)
}

// String describes the plan in a few lines: data, model, resume, schedule
// and outputs, then the notes.
func (p Plan) String() string {
	var b strings.Builder
	switch {
	case p.DefaultData:
		fmt.Fprintf(&b, "data: the default text %s\n", p.Data)
	case p.SavedData:
		fmt.Fprintf(&b, "data: %s (the saved run's)\n", p.Data)
	default:
		fmt.Fprintf(&b, "data: %s\n", p.Data)
	}
	s, c := p.Spec, p.Config
	switch {
	case !s.IsClassifier():
		fmt.Fprintf(&b, "data: %d bytes: %d for training, %d held out (%d windows of %d bytes)\n",
			p.TrainBytes+p.ValBytes, p.TrainBytes, p.ValBytes, p.ValWindows, s.N+1)
	case p.Valid != "":
		fmt.Fprintf(&b, "data: %d labelled examples for training, %d for validation from %s; %d labels %q\n", p.TrainExamples, p.ValExamples, p.Valid, len(p.Labels), p.Labels)
	case p.HoldOut != 0:
		fmt.Fprintf(&b, "data: %d labelled examples for training, %d held out (a share of %g); %d labels %q\n", p.TrainExamples, p.ValExamples, p.HoldOut, len(p.Labels), p.Labels)
	default:
		fmt.Fprintf(&b, "data: %d labelled examples for training, no validation; %d labels %q\n", p.TrainExamples, len(p.Labels), p.Labels)
	}
	fmt.Fprintf(&b, "model: spec %s (%s, n %d, d %d, %d heads, %d layers), %s parameters, kernels %s%s\n",
		s.Name, s.Variant, s.N, s.D, s.Heads, s.Layers, textfmt.Count(float64(p.NumParams)), p.ISA, precisionText(p.Precision))
	if p.Resume != "" {
		from := "checkpoint only"
		if p.WithOptimizer {
			from = "with optimizer state"
		}
		fmt.Fprintf(&b, "resume: %s at step %d (%s)\n", p.Resume, p.Start, from)
	}
	fmt.Fprintf(&b, "train: steps %d→%d of %d, batch %d×%d tokens, lr %g (warm-up %d, cosine to %g), clip %g, wd %g, seed %d\n",
		p.Start, p.Stop, c.Steps, c.Batch, s.N, c.LR, c.Warmup, c.LR*c.MinLRFrac, c.Clip, c.Optim.WeightDecay, c.Seed)
	if p.Ranks > 1 {
		fmt.Fprintf(&b, "ranks: %d data-parallel processes × %s, the batch of %d split %s; rank 0 evaluates, logs and saves\n",
			p.Ranks, plural(p.Workers, "worker"), c.Batch, shares(c.Batch, p.Ranks))
	}
	fmt.Fprintf(&b, "output: %s (optimizer state %s, log %s)", p.Out, p.OptOut, p.CSV)
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "\n%s", n)
	}
	return b.String()
}

// String is the summary in one line.
func (s *Summary) String() string {
	msg := fmt.Sprintf("trained steps %d→%d of %d in %s (%s tok/s)", s.Start, s.Step, s.Steps, textfmt.Duration(s.Elapsed), textfmt.Count(s.TokensPerSec))
	if !math.IsNaN(s.ValLoss) {
		msg += fmt.Sprintf(", val loss %.4f", s.ValLoss)
	}
	return msg + "; saved to " + s.Out
}

// precisionText is the model line's note of a bf16 run's products.
func precisionText(p string) string {
	if p == "" || p == "f32" {
		return ""
	}
	return ", linear layers in " + p + " (float32 accumulation and weights)"
}
