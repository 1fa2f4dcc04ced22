package synth

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
)

// Classification: a spec with "task": "classify" trains on a labelled file
// (Data: TSV label<TAB>text, CSV label,text or JSON Lines {"label", "text"},
// by the extension), its labels mapped to classes in order of first
// appearance and saved in the checkpoint; it validates on a validation
// file (Valid) or a held-out share of the training file (HoldOut), and
// reports the mean cross-entropy and the accuracy. Model.EvaluateLabelled
// and Model.Predict use a trained classifier.

// Metadata entries of a classifier run's optimizer state: its validation
// file (absolute) and held-out share, which a resume reads unless options
// override them.
const (
	keyValid   = "train.valid"
	keyHoldOut = "train.held_out"
)

// Valid names a classifier's validation file (a labelled file whose labels
// must all be labels of the training file). Only for a classifier; not
// with HoldOut.
func Valid(path string) Option { return setter("valid", func(o *options) { o.valid = path }) }

// HoldOut holds out a share in (0, 1) of a classifier's training file for
// validation, chosen from the seed. Only for a classifier; not with Valid.
func HoldOut(share float64) Option { return setter("hold-out", func(o *options) { o.holdOut = share }) }

// IsClassifier reports whether the model is a classifier (spec task
// "classify").
func (m *Model) IsClassifier() bool { return m.net.Spec.IsClassifier() }

// Labels are a classifier's labels in class order (nil for a language
// model).
func (m *Model) Labels() []string { return append([]string(nil), m.net.Labels...) }

// ClassEvalResult is a classifier's evaluation on a labelled file.
type ClassEvalResult struct {
	Loss     float64 // mean cross-entropy in nats over the examples
	Accuracy float64 // share of examples whose most likely class is their label
	Examples int
	Correct  int
}

// EvaluateLabelled is the card's evaluation of a classifier on the
// labelled file at path: the mean cross-entropy and the accuracy over its
// examples. A label that is not one of the model's is an error naming the
// file and line; so are the labelled files' other faults (a missing label,
// an empty text, a text longer than n). batch is the examples per pass
// (0: 16).
func (m *Model) EvaluateLabelled(ctx context.Context, path string, batch int) (ClassEvalResult, error) {
	set, err := m.readLabelled(path)
	if err != nil {
		return ClassEvalResult{}, err
	}
	if batch < 0 {
		return ClassEvalResult{}, fmt.Errorf("evaluate: batch %d must be ≥ 0", batch)
	}
	if batch == 0 {
		batch = 16
	}
	ev := train.NewEvaluator(m.net, min(batch, len(set.Examples)))
	r, err := ev.EvaluateClassify(ctx, set)
	return ClassEvalResult(r), err
}

// readLabelled reads a labelled file through the classifier's labels.
func (m *Model) readLabelled(path string) (*data.LabelledSet, error) {
	if !m.IsClassifier() {
		return nil, fmt.Errorf("spec %q is a language model, not a classifier: evaluate it on text", m.net.Spec.Name)
	}
	labels, err := data.NewLabels(m.net.Labels)
	if err != nil {
		return nil, fmt.Errorf("the classifier's labels: %w", err)
	}
	s := m.net.Spec
	return data.ReadLabelledWith(path, labels, data.LabelledOptions{N: s.N, Vocab: s.Vocab})
}

// Prediction is a classifier's answer for one text.
type Prediction struct {
	Label string    // the most likely label
	Class int       // its class
	Probs []float64 // every class's probability, in class order (Model.Labels)
}

// Predict classifies texts (each 1 to n bytes, every byte in the
// vocabulary), returning one Prediction per text.
func (m *Model) Predict(ctx context.Context, texts [][]byte) ([]Prediction, error) {
	net := m.net
	if !m.IsClassifier() {
		return nil, fmt.Errorf("spec %q is a language model, not a classifier: sample from it instead", net.Spec.Name)
	}
	if len(net.Labels) != net.Spec.Classes {
		return nil, fmt.Errorf("the classifier has %d labels for its %d classes", len(net.Labels), net.Spec.Classes)
	}
	seqs := make([][]int32, len(texts))
	for i, t := range texts {
		if len(t) == 0 {
			return nil, fmt.Errorf("text %d is empty", i+1)
		}
		if len(t) > net.Spec.N {
			return nil, fmt.Errorf("text %d has %d bytes, longer than the model's context n = %d", i+1, len(t), net.Spec.N)
		}
		if err := data.CheckVocab(fmt.Sprintf("text %d", i+1), t, net.Spec.Vocab); err != nil {
			return nil, err
		}
		s := make([]int32, len(t))
		for j, b := range t {
			s[j] = int32(b)
		}
		seqs[i] = s
	}
	const batch = 16
	ws := net.NewWorkspace(min(batch, max(1, len(seqs))))
	out := make([]Prediction, 0, len(seqs))
	for i := 0; i < len(seqs); i += batch {
		if err := cancelled(ctx); err != nil {
			return nil, err
		}
		j := min(i+batch, len(seqs))
		net.ClassifyBatch(ws, seqs[i:j], nil, false)
		for b := 0; b < j-i; b++ {
			out = append(out, prediction(net, ws.ClassLogits(b)))
		}
	}
	return out, nil
}

func prediction(net *model.Model, logits []float32) Prediction {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	s := 0.0
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		s += p[i]
	}
	for i := range p {
		p[i] /= s
	}
	c := train.Argmax(logits)
	return Prediction{Label: net.Labels[c], Class: c, Probs: p}
}

// classData loads a classifier run's labelled data: through the model's
// labels when it has them (a resume), else labelling the classes in order
// of first appearance in the training file, which must then name exactly
// the spec's classes.
func (o *options) classData(net *model.Model, path string) (trainSet, val *data.LabelledSet, err error) {
	s := net.Spec
	lo := data.LabelledOptions{N: s.N, Vocab: s.Vocab}
	if net.Labels == nil {
		trainSet, val, err = data.LoadClassify(data.ClassifyData{Train: path, Val: o.valid, HeldOut: o.holdOut, Seed: o.seed, LabelledOptions: lo})
		if err != nil {
			return nil, nil, err
		}
		if n := trainSet.Labels.Len(); n != s.Classes {
			return nil, nil, fmt.Errorf("labelled file %s has %d distinct labels (%v), but spec %q declares classes %d: they must be equal", path, n, trainSet.Labels.Names(), s.Name, s.Classes)
		}
		net.Labels = trainSet.Labels.Names()
		return trainSet, val, nil
	}
	labels, err := data.NewLabels(net.Labels)
	if err != nil {
		return nil, nil, err
	}
	trainSet, err = data.ReadLabelledWith(path, labels, lo)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case o.valid != "" && o.holdOut != 0:
		return nil, nil, fmt.Errorf("a validation file (%s) and a held-out share (%g): give one", o.valid, o.holdOut)
	case o.valid != "":
		val, err = data.ReadLabelledWith(o.valid, labels, lo)
	case o.holdOut != 0:
		trainSet, val, err = trainSet.Split(o.holdOut, o.seed)
	}
	if err != nil {
		return nil, nil, err
	}
	return trainSet, val, nil
}

// classExtra is the run metadata of a classifier's validation settings.
func (o *options) classExtra(extra map[string]string) {
	if o.valid != "" {
		if abs, err := filepath.Abs(o.valid); err == nil {
			extra[keyValid] = abs
		} else {
			extra[keyValid] = o.valid
		}
	}
	if o.holdOut != 0 {
		extra[keyHoldOut] = strconv.FormatFloat(o.holdOut, 'g', -1, 64)
	}
}

// restoreClass takes the saved validation settings of a resumed classifier
// run, unless options give them.
func (o *options) restoreClass(meta map[string]string) {
	if o.set["valid"] || o.set["hold-out"] {
		return
	}
	if v := meta[keyValid]; v != "" {
		o.valid = v
	}
	if v := meta[keyHoldOut]; v != "" {
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			o.holdOut = x
		}
	}
}

// evaluate is the run's validation: the held-out windows of a language
// model, or a classifier's validation examples (ok false: none to
// evaluate on).
func (r *Run) evaluate(ctx context.Context) (res EvalResult, ok bool, err error) {
	t := r.t
	if r.cval == nil && r.ds == nil {
		return EvalResult{}, false, nil
	}
	if r.cval != nil {
		c, err := t.EvaluateClassify(ctx, r.cval)
		if err != nil {
			return EvalResult{}, true, err
		}
		return EvalResult{Loss: c.Loss, Examples: c.Examples, Accuracy: c.Accuracy}, true, nil
	}
	l, err := t.EvaluateContext(ctx, r.ds.Val, r.o.evalWindows)
	return lmResult(l), true, err
}

func lmResult(r train.Result) EvalResult {
	return EvalResult{Loss: r.Loss, Windows: r.Windows, Tokens: r.Tokens, Accuracy: math.NaN()}
}
