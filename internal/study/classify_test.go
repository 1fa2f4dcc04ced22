package study_test

import (
	"context"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd"
	"github.com/synthgen/synthgen/internal/clstest"
	"github.com/synthgen/synthgen/internal/study"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/listops"
	"github.com/synthgen/synthgen/specs"
)

// listopsFiles writes small ListOps files of sequences of 15 to 60 bytes.
func listopsFiles(t *testing.T, dir string) (train, val, test string) {
	t.Helper()
	s, err := listops.Generate(3, listops.Options{MinLen: 15, MaxLen: 60}, listops.Counts{Train: 300, Val: 40, Test: 50})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := listops.WriteFiles(dir, s, data.FormatTSV, false); err != nil {
		t.Fatal(err)
	}
	p := func(split string) string { return filepath.Join(dir, split+".tsv") }
	return p("train"), p("val"), p("test")
}

func classifiers(t *testing.T, bases ...string) []specs.Spec {
	t.Helper()
	var ss []specs.Spec
	for _, b := range bases {
		s, err := clstest.Spec(b, 10)
		if err != nil {
			t.Fatal(err)
		}
		ss = append(ss, s)
	}
	return ss
}

// TestClassifyStudy: a ListOps study of two classifiers writes a table of
// test loss and accuracy with LRA's column, the same table when
// interrupted and resumed, and refuses language models and bad files.
func TestClassifyStudy(t *testing.T) {
	dir := t.TempDir()
	train, val, test := listopsFiles(t, filepath.Join(dir, "lo"))
	opts := func(more ...study.Option) []study.Option {
		return append([]study.Option{study.Specs(classifiers(t, "odd", "odd_linear")...), study.Data(train),
			study.Classify(study.TaskListOps, val, test), study.Steps(8), study.Batch(4), study.EvalEvery(4), study.Workers(2)}, more...)
	}
	ctx := context.Background()
	st, err := study.New(filepath.Join(dir, "a"), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md := res.Table.Markdown()
	for _, w := range []string{"test accuracy %", "LRA ListOps", "36.99 (Synthesizer)", "16.13 (Linear Trans.)", "50 examples of test.tsv", "not comparable"} {
		if !strings.Contains(md, w) {
			t.Errorf("table lacks %q:\n%s", w, md)
		}
	}
	if len(res.Table.Rows) != 2 || res.Table.Rows[0].Examples != 50 || res.Table.Rows[0].Accuracy <= 0 {
		t.Fatalf("rows %+v", res.Table.Rows)
	}
	rows := readCSV(t, res.CSV)
	if strings.Join(rows[0], ",") != study.ClassCSVHeader || len(rows) != 3 {
		t.Fatalf("results.csv %v", rows)
	}
	if _, err := os.Stat(res.LossPlot); err != nil {
		t.Fatal(err)
	}
	// Every run's log has the validation accuracy of steps 0, 4 and 8, and
	// accuracy.png draws them.
	logs, _ := filepath.Glob(filepath.Join(dir, "a", "*-seed1.csv"))
	if len(logs) != 2 {
		t.Fatalf("run logs %v", logs)
	}
	for _, name := range logs {
		log := readCSV(t, name)
		col := slices.Index(log[0], "val_accuracy")
		if col < 0 {
			t.Fatalf("%s's log header %q has no val_accuracy", name, log[0])
		}
		var steps []string
		for _, r := range log[1:] {
			if r[col] == "" {
				continue
			}
			if a, err := strconv.ParseFloat(r[col], 64); err != nil || a < 0 || a > 1 {
				t.Errorf("%s's log: step %s accuracy %q, want in [0,1]", name, r[0], r[col])
			}
			steps = append(steps, r[0])
		}
		if strings.Join(steps, ",") != "0,4,8" {
			t.Errorf("%s's log has accuracies at steps %v, want 0,4,8", name, steps)
		}
	}
	if res.AccuracyPlot != filepath.Join(dir, "a", study.AccuracyPlotFile) {
		t.Fatalf("accuracy plot %q", res.AccuracyPlot)
	}
	f, err := os.Open(res.AccuracyPlot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s: %v", res.AccuracyPlot, err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("%s is %v", res.AccuracyPlot, b)
	}
	t.Log("\n" + md)

	// Interrupted after the first run, then resumed: the same table.
	bdir := filepath.Join(dir, "b")
	cctx, cancel := context.WithCancel(ctx)
	st, err = study.New(bdir, opts(study.OnProgress(func(p study.Progress) {
		if p.Kind == study.RunFinished {
			cancel()
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Run(cctx); err == nil {
		t.Fatal("the cancelled study returned no error")
	}
	st, err = study.Open(bdir, study.Workers(1))
	if err != nil {
		t.Fatal(err)
	}
	res2, err := st.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := reproducible(readCSV(t, res.CSV)), reproducible(readCSV(t, res2.CSV)); a != b {
		t.Fatalf("resumed study's table differs:\n%s\nvs\n%s", a, b)
	}

	// Bad input.
	lm := lookup(t, "odd")
	if _, err := study.New(filepath.Join(dir, "c"), append(opts(), study.Specs(lm...))...); err == nil || !strings.Contains(err.Error(), "language model") {
		t.Errorf("a language model in a classification study: %v", err)
	}
	if _, err := study.New(filepath.Join(dir, "d"), study.Specs(classifiers(t, "odd")...), study.Data(train)); err == nil || !strings.Contains(err.Error(), "classifier") {
		t.Errorf("a classifier in a language-model study: %v", err)
	}
	bad := filepath.Join(dir, "bad.tsv")
	os.WriteFile(bad, []byte("3\tX34]\n11\tX1]\n"), 0o644)
	if _, err := study.New(filepath.Join(dir, "e"), append(opts(), study.Classify(study.TaskListOps, bad, test))...); err == nil || !strings.Contains(err.Error(), "bad.tsv line 2") {
		t.Errorf("an unseen label in the validation file: %v", err)
	}
}
