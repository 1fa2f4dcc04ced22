package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// classBatches draws a classifier's batches: step s's batch is Batch
// examples chosen uniformly (with replacement) by a PCG stream seeded from
// (seed, s) alone, so a resumed run draws the batches an uninterrupted
// one does.
type classBatches struct {
	seqs   [][]int32 // every example's tokens
	labels []int32   // every example's class
	seed   uint64
	bSeqs  [][]int32 // the current batch
	bLab   []int32
}

func newClassBatches(set *data.LabelledSet, batch int, seed uint64) *classBatches {
	c := &classBatches{seed: seed, bSeqs: make([][]int32, batch), bLab: make([]int32, batch)}
	c.seqs, c.labels = ExampleTokens(set)
	return c
}

// ExampleTokens returns the examples' texts as tokens (one per byte) and
// their classes.
func ExampleTokens(set *data.LabelledSet) ([][]int32, []int32) {
	seqs := make([][]int32, len(set.Examples))
	labels := make([]int32, len(set.Examples))
	for i, e := range set.Examples {
		s := make([]int32, len(e.Text))
		for j, b := range e.Text {
			s[j] = int32(b)
		}
		seqs[i], labels[i] = s, int32(e.Class)
	}
	return seqs, labels
}

func (c *classBatches) batch(step int) {
	rng := rand.New(rand.NewPCG(c.seed^0x636c6173736966, uint64(step))) // "classif"
	for i := range c.bSeqs {
		k := rng.IntN(len(c.seqs))
		c.bSeqs[i], c.bLab[i] = c.seqs[k], c.labels[k]
	}
}

// NewClassifier makes a trainer for the classifier m on the labelled
// examples of set (their classes those of m.Labels), starting at step 0
// with zero optimizer moments. Each step draws Batch examples from (seed,
// step) alone (uniformly, with replacement) and runs them through
// model.ClassifyBatch: sequences of unequal lengths, no padding.
func NewClassifier(m *model.Model, set *data.LabelledSet, cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("training configuration: %w", err)
	}
	if m.Classes() == 0 {
		return nil, fmt.Errorf("spec %q is a language model: train it on text, not on a labelled file", m.Spec.Name)
	}
	if set == nil || len(set.Examples) == 0 {
		return nil, fmt.Errorf("training data: no labelled examples")
	}
	if err := CheckSetLabels(m, set); err != nil {
		return nil, err
	}
	t := &Trainer{
		Model: m, WS: m.NewWorkspace(cfg.Batch), Opt: optim.NewAdamW(m.Params, cfg.Optim),
		Cfg: cfg, Sched: cfg.Schedule(),
	}
	t.Opt.Runner = m
	t.Opt.Kernel = m.Kernels.AdamW
	t.cls = newClassBatches(set, cfg.Batch, cfg.Seed)
	t.eval = &Evaluator{Model: m, WS: t.WS, Batch: cfg.Batch}
	return t, nil
}

// CheckSetLabels checks that set's classes are the model's: its labels are
// m.Labels in the same order (a set read with data.ReadLabelledWith on the
// model's labels is), and every example's text fits the model.
func CheckSetLabels(m *model.Model, set *data.LabelledSet) error {
	names := set.Labels.Names()
	if len(m.Labels) != len(names) {
		return fmt.Errorf("labelled file %s has %d labels, the classifier (spec %q, classes %d) has %d", set.Path, len(names), m.Spec.Name, m.Spec.Classes, len(m.Labels))
	}
	for i, n := range names {
		if m.Labels[i] != n {
			return fmt.Errorf("labelled file %s: class %d is label %q, the classifier's is %q", set.Path, i, n, m.Labels[i])
		}
	}
	for _, e := range set.Examples {
		if len(e.Text) < 1 || len(e.Text) > m.Spec.N {
			return &data.LineError{Path: set.Path, Line: e.Line, Err: fmt.Errorf("text of %d bytes: want 1..n = %d", len(e.Text), m.Spec.N)}
		}
	}
	return nil
}

// classStep is TrainStep's forward and backward of a classifier: of the
// whole batch, or, on one of several processes (Distribute), of this
// process's share of it [lo, hi), followed by the reduction. Every process
// draws the whole batch from (seed, step), so the shares are of the same
// examples.
func (t *Trainer) classStep(step int) error {
	t.cls.batch(step)
	s := t.shard
	if s == nil {
		t.Loss = t.Model.ClassifyBatch(t.WS, t.cls.bSeqs, t.cls.bLab, true)
		return nil
	}
	loss := t.Model.ClassifyBatch(t.WS, t.cls.bSeqs[s.lo:s.hi], t.cls.bLab[s.lo:s.hi], true)
	return t.reduceShard(step, loss)
}

// ClassResult is a classifier's evaluation on labelled examples.
type ClassResult struct {
	Loss     float64 // mean cross-entropy in nats over the examples
	Accuracy float64 // share of examples whose argmax class is their label
	Examples int
	Correct  int
}

// EvaluateClassify is the card's evaluation of a classifier on set: the
// mean cross-entropy and the accuracy (argmax of the logits, the lowest
// class on a tie) over its examples, Batch at a time.
func (e *Evaluator) EvaluateClassify(ctx context.Context, set *data.LabelledSet) (ClassResult, error) {
	m := e.Model
	if m.Classes() == 0 {
		return ClassResult{}, fmt.Errorf("spec %q is a language model, not a classifier", m.Spec.Name)
	}
	if set == nil || len(set.Examples) == 0 {
		return ClassResult{}, fmt.Errorf("evaluation: no labelled examples")
	}
	if err := CheckSetLabels(m, set); err != nil {
		return ClassResult{}, err
	}
	seqs, labels := ExampleTokens(set)
	var r ClassResult
	var sum float64
	for i := 0; i < len(seqs); i += e.Batch {
		if err := ctx.Err(); err != nil {
			return ClassResult{}, fmt.Errorf("evaluation stopped: %w", context.Cause(ctx))
		}
		j := min(i+e.Batch, len(seqs))
		loss := m.ClassifyBatch(e.WS, seqs[i:j], labels[i:j], false)
		if e.WS.Interrupted() || math.IsNaN(loss) {
			if ctx.Err() != nil {
				return ClassResult{}, fmt.Errorf("evaluation stopped: %w", context.Cause(ctx))
			}
			return ClassResult{}, fmt.Errorf("evaluation stopped: %w", ErrInterrupted)
		}
		sum += loss * float64(j-i)
		for b := 0; b < j-i; b++ {
			if Argmax(e.WS.ClassLogits(b)) == int(labels[i+b]) {
				r.Correct++
			}
		}
	}
	r.Examples = len(seqs)
	r.Loss = sum / float64(r.Examples)
	r.Accuracy = float64(r.Correct) / float64(r.Examples)
	return r, nil
}

// Argmax is the index of the largest logit (the lowest index on a tie).
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// EvaluateClassify is the evaluation of the trainer's classifier on set,
// on the trainer's workspace.
func (t *Trainer) EvaluateClassify(ctx context.Context, set *data.LabelledSet) (ClassResult, error) {
	return t.eval.EvaluateClassify(ctx, set)
}
