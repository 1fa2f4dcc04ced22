package study

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/synthgen/synthgen/internal/textfmt"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/specs"
)

// Tasks of a study (Settings.Task).
const (
	TaskLM       = ""         // byte-level language models on a text (the default)
	TaskClassify = "classify" // classifiers on labelled files
	TaskListOps  = "listops"  // classifiers on ListOps files, with LRA's accuracies beside them
)

// Classify makes the study a classification study (task TaskClassify or
// TaskListOps): every spec is a classifier trained on the labelled file
// Data, validated (the curves) on the labelled file valid, and scored
// (the table's loss and accuracy) on the labelled file test.
func Classify(task, valid, test string) Option {
	return setter("task", func(o *options) { o.s.Task, o.valid, o.test = task, valid, test })
}

// isClassify reports whether the study trains classifiers.
func (s Settings) isClassify() bool { return s.Task == TaskClassify || s.Task == TaskListOps }

// resolveClassify fixes the validation and test files of a classification
// study, checks every labelled file against every spec (each spec a
// classifier whose classes are the training file's labels, every text at
// most its n) and records their fingerprints.
func (o *options) resolveClassify() error {
	s := &o.s
	switch s.Task {
	case TaskLM:
		for _, sp := range s.Specs {
			if sp.IsClassifier() {
				return fmt.Errorf("spec %s is a classifier: compare it with a classification task (task classify or listops)", sp.Name)
			}
		}
		return nil
	case TaskClassify, TaskListOps:
	default:
		return fmt.Errorf("task %q: must be %q (language models), %q or %q", s.Task, "lm", TaskClassify, TaskListOps)
	}
	if o.valid == "" || o.test == "" {
		return fmt.Errorf("task %s: a classification study needs a validation file and a test file", s.Task)
	}
	for _, f := range []struct {
		path *string
		dst  *string
	}{{&o.valid, &s.ValidSHA256}, {&o.test, &s.TestSHA256}} {
		abs, err := filepath.Abs(*f.path)
		if err != nil {
			return fmt.Errorf("labelled file %s: %w", *f.path, err)
		}
		_, sum, err := fingerprint(abs)
		if err != nil {
			return err
		}
		*f.path, *f.dst = abs, sum
	}
	s.Valid, s.Test = o.valid, o.test
	return nil
}

// checkLabelled checks the labelled files of a classification study
// against every spec.
func checkLabelled(s Settings) error {
	done := map[[2]int]bool{}
	for _, sp := range s.Specs {
		if !sp.IsClassifier() {
			return fmt.Errorf("spec %s is a language model: a %s study compares classifiers (spec \"task\": \"classify\")", sp.Name, s.Task)
		}
		k := [2]int{sp.N, sp.Vocab}
		lo := data.LabelledOptions{N: sp.N, Vocab: sp.Vocab}
		tr, err := data.ReadLabelled(s.Data, lo)
		if err != nil {
			return fmt.Errorf("spec %s: %w", sp.Name, err)
		}
		if n := tr.Labels.Len(); n != sp.Classes {
			return fmt.Errorf("spec %s declares %d classes; the training file %s has %d labels", sp.Name, sp.Classes, s.Data, n)
		}
		if done[k] {
			continue
		}
		done[k] = true
		for _, p := range []string{s.Valid, s.Test} {
			if _, err := data.ReadLabelledWith(p, tr.Labels, lo); err != nil {
				return fmt.Errorf("spec %s: %w", sp.Name, err)
			}
		}
	}
	return nil
}

// LRAListOps is the ListOps column of Long Range Arena's Table 1 (Tay et
// al. 2020, accuracy in %, n 2000), by the model it names.
var LRAListOps = map[string]float64{
	"Transformer":   36.37,
	"Synthesizer":   36.99,
	"Linear Trans.": 16.13,
}

// lraModel is the model of LRA's table a spec compares with: vanilla the
// Transformer, the synthesizer variants and mixtures the Synthesizer,
// linear the Linear Transformer; "" for the others (AFT is not in LRA).
func lraModel(sp specs.Spec) string {
	switch {
	case sp.Variant == "vanilla":
		return "Transformer"
	case sp.IsSynthesizer():
		return "Synthesizer"
	case sp.Variant == "linear":
		return "Linear Trans."
	}
	return ""
}

// lraCell is the table's LRA column for spec.
func lraCell(sp specs.Spec) string {
	m := lraModel(sp)
	if m == "" {
		return "—"
	}
	return fmt.Sprintf("%.2f (%s)", LRAListOps[m], m)
}

// classMarkdown is a classification study's table.
func (t *Table) classMarkdown() string {
	var b strings.Builder
	s := t.Settings
	seeds := s.Seeds
	pm := func(mean, std float64, runs int, pct bool) string {
		f := "%.4f"
		if pct {
			mean, std, f = 100*mean, 100*std, "%.2f"
		}
		if seeds > 1 && runs > 1 {
			return fmt.Sprintf(f+" ± "+f, mean, std)
		}
		return fmt.Sprintf(f, mean)
	}
	lra := s.Task == TaskListOps
	b.WriteString("| spec | variant | n | params | train loss | test loss | test accuracy % |")
	if lra {
		b.WriteString(" LRA ListOps % (their setting) |")
	}
	b.WriteString(" tokens/s | wall time |\n|---|---|---:|---:|---:|---:|---:|")
	if lra {
		b.WriteString("---:|")
	}
	b.WriteString("---:|---:|\n")
	bySpec := map[string]specs.Spec{}
	for _, sp := range s.Specs {
		bySpec[sp.Name] = sp
	}
	examples := 0
	for _, r := range t.Rows {
		name := r.Spec
		if r.Runs < seeds {
			name += fmt.Sprintf(" (%d/%d seeds)", r.Runs, seeds)
		}
		examples = r.Examples
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s |", name, r.Variant, bySpec[r.Spec].N, textfmt.Count(float64(r.Params)),
			pm(r.TrainLoss, r.TrainLossStd, r.Runs, false), pm(r.ValLoss, r.ValLossStd, r.Runs, false), pm(r.Accuracy, r.AccuracyStd, r.Runs, true))
		if lra {
			fmt.Fprintf(&b, " %s |", lraCell(bySpec[r.Spec]))
		}
		fmt.Fprintf(&b, " %s | %s |\n", textfmt.Count(r.TokensPerSec), textfmt.Duration(time.Duration(r.WallSeconds*float64(time.Second))))
	}
	fmt.Fprintf(&b, "\n%d steps × batch %d, %s. Losses in nats per example: train loss is the mean batch loss of the last %d steps; test loss and accuracy are on the %d examples of %s.",
		s.Steps, s.Batch, seedText(s), min(TrainTail, s.Steps), examples, filepath.Base(s.Test))
	if lra {
		b.WriteString(" The LRA column is Long Range Arena's ListOps accuracy (Tay et al. 2020, Table 1) of the model named, for context only: their setting differs (n 2000, sequences of 500–2000 tokens, far more training steps), so the numbers are not comparable.")
	}
	b.WriteString(" tokens/s (training steps only) and wall time are measured and vary between runs.\n")
	return b.String()
}

// ClassCSVHeader is the first line of a classification study's results.csv.
const ClassCSVHeader = "spec,variant,params,runs,train_loss,train_loss_std,test_loss,test_loss_std,test_accuracy,test_accuracy_std,test_examples,tokens_per_s,wall_s"
