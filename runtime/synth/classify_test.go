package synth_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/enc_odd"
	_ "github.com/synthgen/synthgen/generated/odd"
	"github.com/synthgen/synthgen/internal/clstest"
	"github.com/synthgen/synthgen/runtime/synth"
)

// csvRows reads the CSV file at p.
func csvRows(t *testing.T, p string) [][]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("CSV %s: %d rows, %v", p, len(rows), err)
	}
	return rows
}

// labelledFile writes a TSV file of examples labelled by their first byte
// (x, y or z, first seen in that order).
func labelledFile(t *testing.T, dir, name string, examples int, seed uint64) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	var b strings.Builder
	for i := range examples {
		c := "xyz"[i%3]
		if i >= 3 {
			c = "xyz"[rng.IntN(3)]
		}
		n := 2 + rng.IntN(40)
		text := []byte{c}
		for range n {
			text = append(text, "ab ."[rng.IntN(4)])
		}
		fmt.Fprintf(&b, "%c\t%s\n", c, text)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestClassifier trains a classifier on a labelled file with a held-out
// share, resumes it exactly, evaluates it on a file and predicts.
func TestClassifier(t *testing.T) {
	s, err := clstest.Spec("odd", 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trainFile := labelledFile(t, dir, "train.tsv", 200, 1)
	opts := func(out string, extra ...synth.Option) []synth.Option {
		return append([]synth.Option{synth.Data(trainFile), synth.HoldOut(0.2), synth.Steps(60), synth.Batch(8), synth.LR(3e-3),
			synth.EvalEvery(30), synth.Out(out)}, extra...)
	}
	ctx := context.Background()
	full := filepath.Join(dir, "full.safetensors")
	var events []synth.Event
	sum, err := synth.Train(ctx, s, opts(full, synth.OnEvent(func(e synth.Event) { events = append(events, e) }))...)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	if !last.Evaluated || last.Eval.Examples != 40 || last.Eval.Accuracy < 0.8 {
		t.Fatalf("last event %+v: want an evaluation of 40 held-out examples, accuracy ≥ 0.8", last)
	}
	t.Logf("%v; %s", sum, last)
	// The CSV log has the validation accuracy of every evaluation (steps
	// 0, 30 and 60), the events', and no other.
	acc := map[int]float64{}
	for _, e := range events {
		if e.Evaluated {
			acc[e.Step] = e.Eval.Accuracy
		}
	}
	rows := csvRows(t, strings.TrimSuffix(full, ".safetensors")+".csv")
	if got := strings.Join(rows[0], ","); got != "step,loss,val_loss,lr,tokens_per_s,val_accuracy" {
		t.Fatalf("classifier's CSV header %q", got)
	}
	logged := 0
	for _, r := range rows[1:] {
		step, err := strconv.Atoi(r[0])
		if err != nil || len(r) != 6 {
			t.Fatalf("CSV row %q", r)
		}
		want, ok := acc[step]
		if !ok {
			if r[5] != "" {
				t.Errorf("step %d, not evaluated, logs accuracy %q", step, r[5])
			}
			continue
		}
		a, err := strconv.ParseFloat(r[5], 64)
		if err != nil || a < 0 || a > 1 || a != want {
			t.Errorf("step %d logs accuracy %q, want %v (in [0,1])", step, r[5], want)
		}
		logged++
	}
	if logged != 3 || len(acc) != 3 {
		t.Errorf("%d accuracies logged, %d evaluations; want 3 (steps 0, 30, 60)", logged, len(acc))
	}

	half := filepath.Join(dir, "half.safetensors")
	if _, err := synth.Train(ctx, s, opts(half, synth.StopAt(30))...); err != nil {
		t.Fatal(err)
	}
	r, err := synth.ResumeRun(ctx, half)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Plan(); p.HoldOut != 0.2 || p.ValExamples != 40 || strings.Join(p.Labels, "") != "xyz" {
		t.Fatalf("resumed plan: hold-out %v, %d validation examples, labels %q", p.HoldOut, p.ValExamples, p.Labels)
	}
	if _, err := r.Train(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := read(t, full), read(t, half); !bytes.Equal(a, b) {
		t.Fatal("the resumed classifier's checkpoint differs from the uninterrupted one's")
	}
	// The resumed run's log continues its own: the same rows as the
	// uninterrupted run's, but for the measured tokens_per_s.
	untimed := func(rows [][]string) string {
		var b strings.Builder
		for _, r := range rows {
			r[4] = ""
			fmt.Fprintln(&b, r)
		}
		return b.String()
	}
	if a, b := untimed(csvRows(t, strings.TrimSuffix(full, ".safetensors")+".csv")), untimed(csvRows(t, strings.TrimSuffix(half, ".safetensors")+".csv")); a != b {
		t.Errorf("the resumed classifier's log differs from the uninterrupted one's:\n%s\n%s", b, a)
	}

	m, err := synth.Load(ctx, full)
	if err != nil {
		t.Fatal(err)
	}
	if !m.IsClassifier() || strings.Join(m.Labels(), ",") != "x,y,z" {
		t.Fatalf("loaded: classifier %v, labels %q", m.IsClassifier(), m.Labels())
	}
	evalFile := labelledFile(t, dir, "eval.tsv", 60, 9)
	res, err := m.EvaluateLabelled(ctx, evalFile, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Examples != 60 || res.Accuracy < 0.8 || !(res.Loss > 0) {
		t.Fatalf("evaluation %+v", res)
	}
	preds, err := m.Predict(ctx, [][]byte{[]byte("xab a"), []byte("zb.ab"), []byte("y")})
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, p := range preds {
		got += p.Label
		if len(p.Probs) != 3 || p.Probs[p.Class] < 0.34 {
			t.Errorf("prediction %+v", p)
		}
	}
	t.Logf("predictions %q, evaluation %+v", got, res)
	if got != "xzy" {
		t.Errorf("predicted %q, want \"xzy\"", got)
	}

	// Errors: a label unseen in training (file and line), a too-long text,
	// an empty text, a missing label.
	bad := func(name, content string, want ...string) {
		t.Helper()
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		_, err := m.EvaluateLabelled(ctx, p, 0)
		if err == nil {
			t.Errorf("%s: evaluated", name)
			return
		}
		for _, w := range append(want, name) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not mention %q", name, err, w)
			}
		}
	}
	bad("unseen.tsv", "x\txa\nw\twab\n", "line 2", `"w"`)
	bad("long.tsv", "x\t"+strings.Repeat("a", 61)+"\n", "line 1", "longer")
	bad("empty.tsv", "x\txa\ny\t\n", "line 2", "empty text")
	bad("nolabel.tsv", "x\txa\n\tab\n", "line 2")
	if _, err := m.Predict(ctx, [][]byte{[]byte(strings.Repeat("a", 61))}); err == nil {
		t.Error("predicted a text longer than n")
	}
	if _, err := m.Evaluate(ctx, []byte(strings.Repeat("a", 200)), synth.EvalOptions{}); err == nil {
		t.Error("the language model's evaluation ran on a classifier")
	}
	// A training file with labels other than the spec's classes.
	two := filepath.Join(dir, "two.tsv")
	os.WriteFile(two, []byte("a\tx\nb\ty\n"), 0o644)
	if _, err := synth.NewRun(ctx, s, synth.Data(two), synth.Out(filepath.Join(dir, "two.safetensors"))); err == nil || !strings.Contains(err.Error(), "classes 3") {
		t.Errorf("2 labels for 3 classes: %v", err)
	}
	if _, err := synth.NewRun(ctx, s, synth.Out(filepath.Join(dir, "none.safetensors"))); err == nil || !strings.Contains(err.Error(), "labelled file") {
		t.Errorf("no data: %v", err)
	}
}

// TestBidirectionalGeneratesNothing: a bidirectional spec (a classifier
// whose positions see the later ones) is refused by Sample, Generate,
// Evaluate and NewServer with an error naming the classifier, never
// decoded; its attention maps (the classifier's forward) are available.
func TestBidirectionalGeneratesNothing(t *testing.T) {
	s, err := synth.LookupSpec("enc_odd")
	if err != nil {
		t.Fatal(err)
	}
	if s.Causal() || !s.IsClassifier() {
		t.Fatalf("enc_odd: causal %v, classifier %v", s.Causal(), s.IsClassifier())
	}
	m, err := synth.New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if out, err := m.Sample(ctx, []byte("abc"), synth.SampleOptions{Len: 5}); err == nil || !strings.Contains(err.Error(), "classifier") {
		t.Errorf("Sample: %q, %v; want a classifier's error", out, err)
	}
	var b bytes.Buffer
	if err := m.Generate(ctx, &b, []byte("abc"), synth.SampleOptions{Len: 5}); err == nil || !strings.Contains(err.Error(), "classifier") || b.Len() != 0 {
		t.Errorf("Generate: %q, %v; want a classifier's error and nothing written", b.String(), err)
	}
	if _, err := m.Evaluate(ctx, []byte(strings.Repeat("a", 200)), synth.EvalOptions{}); err == nil || !strings.Contains(err.Error(), "classifier") {
		t.Errorf("Evaluate: %v; want a classifier's error", err)
	}
	if _, err := synth.NewServer(map[string]*synth.Model{"enc": m}, synth.ServeOptions{}); err == nil || !strings.Contains(err.Error(), "classifier") {
		t.Errorf("NewServer: %v; want a classifier's error", err)
	}
	if _, err := m.Attention(ctx, []byte("abcdef")); err != nil {
		t.Errorf("Attention: %v", err)
	}
}
