package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd"
	"github.com/synthgen/synthgen/internal/clstest"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// classFile writes a labelled TSV file of examples whose label is the
// first letter of their text ("a", "b" or "c"; 3 classes, first seen in
// that order), texts of 3 to 40 bytes, and reads it.
func classFile(t testing.TB, name string, examples int, seed uint64) *data.LabelledSet {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	for i := range examples {
		c := "abc"[i%3]
		if i >= 3 {
			c = "abc"[rng.IntN(3)]
		}
		n := 3 + rng.IntN(38)
		text := make([]byte, n)
		text[0] = c
		for j := 1; j < n; j++ {
			text[j] = "xyz "[rng.IntN(4)]
		}
		fmt.Fprintf(&b, "%c\t%s\n", c, text)
	}
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	set, err := data.ReadLabelled(p, data.LabelledOptions{N: 60, Vocab: 256})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func newClassTrainer(t testing.TB, set *data.LabelledSet, cfg Config, workers int) *Trainer {
	t.Helper()
	s, err := clstest.Spec("odd", 3)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.For(s)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(s, k, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	m.Labels = set.Labels.Names()
	m.SetWorkers(workers)
	tr, err := NewClassifier(m, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestClassifierLearns: a classifier learns to tell texts by their first
// byte, and the evaluation's loss and accuracy say so.
func TestClassifierLearns(t *testing.T) {
	set := classFile(t, "train.tsv", 300, 1)
	cfg := DefaultConfig(150, 8)
	cfg.LR = 3e-3
	tr := newClassTrainer(t, set, cfg, 2)
	before, err := tr.EvaluateClassify(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, tr, cfg.Steps)
	after, err := tr.EvaluateClassify(context.Background(), set)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("before: loss %.4f accuracy %.3f; after: loss %.4f accuracy %.3f", before.Loss, before.Accuracy, after.Loss, after.Accuracy)
	if after.Examples != 300 || !(after.Loss < before.Loss*0.5) || after.Accuracy < 0.9 {
		t.Fatalf("did not learn: before %+v, after %+v", before, after)
	}
	if math.Abs(math.Log(3)-before.Loss) > 0.2 {
		t.Errorf("untrained loss %v, want about ln 3", before.Loss)
	}
	if _, err := tr.Evaluate([]byte("some text of enough bytes"), 0); err == nil {
		t.Error("the language model's evaluation ran on a classifier")
	}
}

// TestClassifierExactResume: 40 steps in one go, or 20, a checkpoint (with
// the labels) and a resume to 40, give the same weights and moments bit
// for bit.
func TestClassifierExactResume(t *testing.T) {
	const total, half = 40, 20
	set := classFile(t, "train.tsv", 60, 2)
	cfg := tinyConfig(total)
	a := newClassTrainer(t, set, cfg, 2)
	runSteps(t, a, total)

	b := newClassTrainer(t, set, cfg, 2)
	runSteps(t, b, half)
	p := filepath.Join(t.TempDir(), "half.safetensors")
	if err := b.Save(p, nil); err != nil {
		t.Fatal(err)
	}
	m, step, err := checkpoint.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if step != half || strings.Join(m.Labels, ",") != "a,b,c" {
		t.Fatalf("checkpoint step %d, labels %q", step, m.Labels)
	}
	m.SetWorkers(1)
	c, err := NewClassifier(m, set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.LoadState(p, step); err != nil {
		t.Fatal(err)
	}
	runSteps(t, c, total)
	for i, pa := range a.Model.Params {
		pc := c.Model.Params[i]
		for j := range pa.Data {
			if math.Float32bits(pa.Data[j]) != math.Float32bits(pc.Data[j]) {
				t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", pa.Name, j, pa.Data[j], pc.Data[j])
			}
		}
		for j := range a.Opt.M[i] {
			if a.Opt.M[i][j] != c.Opt.M[i][j] || a.Opt.V[i][j] != c.Opt.V[i][j] {
				t.Fatalf("moments of %s[%d] differ", pa.Name, j)
			}
		}
	}
}

// TestClassifierErrors: labels that are not the model's, and a language
// model given labelled data.
func TestClassifierErrors(t *testing.T) {
	set := classFile(t, "train.tsv", 30, 3)
	s, err := clstest.Spec("odd", 3)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := kernels.For(s)
	m, _ := model.New(s, k, 1)
	m.Labels = []string{"a", "c", "b"}
	if _, err := NewClassifier(m, set, tinyConfig(2)); err == nil || !strings.Contains(err.Error(), `"c"`) {
		t.Errorf("labels in another order: %v", err)
	}
	lk, _ := kernels.Lookup("odd")
	lm, _ := model.New(lk.Spec, lk, 1)
	if _, err := NewClassifier(lm, set, tinyConfig(2)); err == nil || !strings.Contains(err.Error(), "language model") {
		t.Errorf("language model: %v", err)
	}
}
