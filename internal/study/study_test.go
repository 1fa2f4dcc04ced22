package study_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd_linear"
	_ "github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/internal/study"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// text writes the first size bytes of the default text to dir.
func text(t *testing.T, dir string, size int) string {
	t.Helper()
	p, err := synth.DefaultText()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(q, b[:size], 0o644); err != nil {
		t.Fatal(err)
	}
	return q
}

func lookup(t *testing.T, names ...string) []specs.Spec {
	t.Helper()
	ss, err := study.ResolveSpecs(names)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// tiny are the options of a study of small and odd_linear that takes a
// fraction of a second.
func tiny(t *testing.T, data string, more ...study.Option) []study.Option {
	return append([]study.Option{study.Specs(lookup(t, "small", "odd_linear")...), study.Data(data),
		study.Steps(8), study.Batch(2), study.EvalEvery(4), study.EvalWindows(2), study.Workers(2)}, more...)
}

func readCSV(t *testing.T, p string) [][]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		rows = append(rows, strings.Split(l, ","))
	}
	return rows
}

// reproducible drops the measured columns (tokens_per_s, wall_s) of
// results.csv: the rest of the table must not depend on interruptions.
func reproducible(rows [][]string) string {
	var b strings.Builder
	for _, r := range rows {
		b.WriteString(strings.Join(r[:len(r)-2], ",") + "\n")
	}
	return b.String()
}

// TestTable: a two-spec, two-seed study writes the table (Markdown, CSV,
// JSON) with every column as documented, every run's files and loss.png.
func TestTable(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "study")
	st, err := study.New(out, tiny(t, data, study.Seeds(2))...)
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Plan(); len(p.Runs) != 4 || p.TotalSteps != 32 || p.DoneSteps != 0 || p.Resumed {
		t.Fatalf("plan %+v", p)
	}
	var kinds []study.ProgressKind
	var last study.Progress
	st2, _ := study.New(out, tiny(t, data, study.Seeds(2), study.OnProgress(func(p study.Progress) {
		if p.Kind != study.RunStep {
			kinds = append(kinds, p.Kind)
		}
		last = p
	}))...)
	res, err := st2.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || len(res.Table.Rows) != 2 || len(res.Table.Runs) != 4 {
		t.Fatalf("result %+v", res)
	}
	if len(kinds) != 8 || last.DoneSteps != 32 || last.TotalSteps != 32 {
		t.Errorf("progress kinds %v, last %+v", kinds, last)
	}
	for i, r := range res.Table.Rows {
		name := []string{"small", "odd_linear"}[i]
		m, err := synth.New(lookup(t, name)[0], 1)
		if err != nil {
			t.Fatal(err)
		}
		val, err := synth.HeldOut(data, m.Spec())
		if err != nil {
			t.Fatal(err)
		}
		if r.Spec != name || r.Params != m.NumParams() || r.Runs != 2 || r.ValWindows != len(val)/(m.Spec().N+1) {
			t.Errorf("row %d: %+v", i, r)
		}
		for _, x := range []float64{r.TrainLoss, r.ValLoss, r.BPB} {
			if !(x > 1 && x < 8) {
				t.Errorf("row %d: loss %g out of range: %+v", i, x, r)
			}
		}
		if math.Abs(r.BPB-r.ValLoss/math.Ln2) > 1e-9 || !(r.ValLossStd > 0) || !(r.TrainLossStd > 0) || !(r.TokensPerSec > 0) || !(r.WallSeconds > 0) {
			t.Errorf("row %d: %+v", i, r)
		}
		// The mean and sample std of the two seeds' runs.
		a, b := res.Table.Runs[2*i], res.Table.Runs[2*i+1]
		if a.Seed != 1 || b.Seed != 2 || math.Abs(r.ValLoss-(a.ValLoss+b.ValLoss)/2) > 1e-12 || math.Abs(r.ValLossStd-math.Abs(a.ValLoss-b.ValLoss)/math.Sqrt2) > 1e-12 {
			t.Errorf("row %d %+v from runs %+v %+v", i, r, a, b)
		}
		// The train loss is the mean of the last steps' logged losses.
		log := readCSV(t, strings.TrimSuffix(a.Checkpoint, ".safetensors")+".csv")
		sum := 0.0
		for _, l := range log[2:] { // header, step 0's evaluation
			x, _ := strconv.ParseFloat(l[1], 64)
			sum += x
		}
		if len(log) != 10 || math.Abs(a.TrainLoss-sum/8) > 1e-12 || a.TrainTail != 8 {
			t.Errorf("run %+v: train loss from a log of %d lines: want %g", a, len(log), sum/8)
		}
		// The final validation is the model's loss on every held-out window.
		mm, err := synth.Load(context.Background(), a.Checkpoint)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := mm.Evaluate(context.Background(), val, synth.EvalOptions{})
		if err != nil || ev.Loss != a.ValLoss || mm.Step() != 8 {
			t.Errorf("run %+v: evaluation %v %+v at step %d", a, err, ev, mm.Step())
		}
	}
	csv := readCSV(t, res.CSV)
	if strings.Join(csv[0], ",") != study.CSVHeader || len(csv) != 3 || csv[1][0] != "small" || csv[2][1] != "linear" || csv[1][3] != "2" {
		t.Errorf("results.csv: %v", csv)
	}
	var js study.Table
	b, err := os.ReadFile(res.JSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil || len(js.Rows) != 2 || len(js.Runs) != 4 || js.Rows[1].ValLoss != res.Table.Rows[1].ValLoss || js.Settings.Seeds != 2 {
		t.Errorf("results.json: %v %+v", err, js)
	}
	md, err := os.ReadFile(res.Markdown)
	if err != nil {
		t.Fatal(err)
	}
	if string(md) != res.Table.Markdown() || !strings.Contains(string(md), "| small | random | 120.3k | ") || strings.Count(string(md), " ± ") != 7 {
		t.Errorf("results.md:\n%s", md)
	}
	var names []string
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	for _, want := range []string{"loss.png", "results.csv", "results.json", "results.md", "small-seed1.safetensors", "small-seed2.opt.safetensors", "odd_linear-seed2.csv", "study.json"} {
		if i := sort.SearchStrings(names, want); i == len(names) || names[i] != want {
			t.Errorf("%s lacks %s: %v", out, want, names)
		}
	}
	if res.AccuracyPlot != "" || slices.Contains(names, study.AccuracyPlotFile) {
		t.Errorf("a language-model study wrote an accuracy plot (%q): %v", res.AccuracyPlot, names)
	}
	if log := readCSV(t, filepath.Join(out, "small-seed1.csv")); strings.Join(log[0], ",") != "step,loss,val_loss,lr,tokens_per_s" {
		t.Errorf("a language model's log header %q", log[0])
	}
	f, err := os.Open(res.LossPlot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if bd := img.Bounds(); bd.Dx() != 1400 || bd.Dy() != 620 {
		t.Errorf("loss.png is %v", bd)
	}

	// A new study in the same folder refuses to overwrite it.
	if _, err := study.New(out, tiny(t, data)...); err == nil || !strings.Contains(err.Error(), "already holds a study") {
		t.Errorf("New in a folder with a study: %v", err)
	}
}

// TestResume: a study cancelled in its second run keeps the first run's
// results and the second's checkpoint; Open continues it without
// retraining the first, and the table equals an uninterrupted study's
// (apart from the measured tokens/s and wall time).
func TestResume(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	a := filepath.Join(dir, "a")
	st, err := study.New(a, tiny(t, data)...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}

	b := filepath.Join(dir, "b")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err = study.New(b, tiny(t, data, study.OnProgress(func(p study.Progress) {
		if p.Run == 1 && p.Kind == study.RunStep && p.Event.Step == 3 {
			cancel()
		}
	}))...)
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Run(cctx)
	if !errors.Is(err, context.Canceled) || res == nil || res.Complete || len(res.Table.Rows) != 1 {
		t.Fatalf("cancelled study: %v %+v", err, res)
	}
	if rows := readCSV(t, filepath.Join(b, "results.csv")); len(rows) != 2 || rows[1][0] != "small" {
		t.Errorf("results.csv after the cancel: %v", rows)
	}
	first := filepath.Join(b, "small-seed1.safetensors")
	before, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	fi0, _ := os.Stat(first)

	var kinds []study.ProgressKind
	var from int
	st, err = study.Open(b, study.Workers(1), study.Steps(8), study.OnProgress(func(p study.Progress) {
		if p.Kind != study.RunStep {
			kinds = append(kinds, p.Kind)
		}
		if p.Kind == study.RunStarted {
			from = p.From
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if p := st.Plan(); !p.Resumed || !p.Runs[0].Done || p.Runs[1].Done || p.Runs[1].Step != 3 || p.DoneSteps != 11 {
		t.Errorf("plan of the resumed study: %+v", p)
	}
	got, err := st.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != 3 || kinds[0] != study.RunSkipped || kinds[1] != study.RunStarted || from != 3 {
		t.Errorf("progress of the resumed study: kinds %v, from %d", kinds, from)
	}
	after, _ := os.ReadFile(first)
	if fi1, _ := os.Stat(first); !bytes.Equal(before, after) || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Error("the finished run was retrained")
	}
	if w, g := reproducible(readCSV(t, want.CSV)), reproducible(readCSV(t, got.CSV)); w != g {
		t.Errorf("resumed study's table differs from an uninterrupted one:\n%s\nwant\n%s", g, w)
	}
	for i := range want.Table.Runs {
		w, g := want.Table.Runs[i], got.Table.Runs[i]
		if w.TrainLoss != g.TrainLoss || w.ValLoss != g.ValLoss || w.Params != g.Params {
			t.Errorf("run %d: %+v, want %+v", i, g, w)
		}
	}
	for _, name := range []string{"small-seed1.safetensors", "odd_linear-seed1.safetensors", "odd_linear-seed1.opt.safetensors"} {
		x, _ := os.ReadFile(filepath.Join(a, name))
		y, _ := os.ReadFile(filepath.Join(b, name))
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s differs between the uninterrupted and the resumed study", name)
		}
	}

	// A resumed study keeps its settings; and there must be one to resume.
	if _, err := study.Open(b, study.Steps(9)); err == nil || !strings.Contains(err.Error(), "steps 9 (the study's: 8)") {
		t.Errorf("Open with other steps: %v", err)
	}
	if _, err := study.Open(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "no study") {
		t.Errorf("Open of no study: %v", err)
	}
}

// TestBadInput: every bad input is an error before anything is trained,
// and the output folder's existing files are left as they were.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	empty := filepath.Join(dir, "empty.txt")
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(short, []byte("far too short for one window"), 0o644)
	unlinked := filepath.Join(dir, "mine.json")
	os.WriteFile(unlinked, []byte(`{"name": "mine", "n": 32, "d": 32, "heads": 2, "layers": 1, "variant": "random"}`), 0o644)
	aFile := filepath.Join(dir, "a-file")
	os.WriteFile(aFile, []byte("keep me"), 0o644)

	for _, c := range []struct {
		name  string
		specs []string // resolved with ResolveSpecs, if set
		opts  []study.Option
		out   string // default: a folder holding keep.txt
		want  string
	}{
		{name: "unknown spec", specs: []string{"small", "nosuch"}, want: `spec "nosuch" is not linked`},
		{name: "spec without a linked package", specs: []string{unlinked}, want: `spec "mine" is not linked`},
		{name: "glob matching nothing", specs: []string{filepath.Join(dir, "*.nothing")}, want: "matches no file"},
		{name: "spec twice", specs: []string{"small", "small"}, want: "given twice"},
		{name: "empty data file", opts: []study.Option{study.Data(empty)}, want: "is empty"},
		{name: "data shorter than a window", opts: []study.Option{study.Data(short)}, want: "too short"},
		{name: "missing data file", opts: []study.Option{study.Data(filepath.Join(dir, "nope.txt"))}, want: "no such file"},
		{name: "output folder is a file", out: aFile, want: "is a file"},
		{name: "zero steps", opts: []study.Option{study.Steps(0)}, want: "steps 0"},
		{name: "zero seeds", opts: []study.Option{study.Seeds(0)}, want: "seeds 0"},
		{name: "unlinked spec value", opts: []study.Option{study.Specs(specs.Spec{Name: "ghost", N: 8, D: 8, Heads: 1, Layers: 1, Variant: "random", Vocab: 256, FFN: 32})}, want: `spec "ghost" is not linked`},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "study")
				os.MkdirAll(out, 0o755)
				os.WriteFile(filepath.Join(out, "keep.txt"), []byte("keep me"), 0o644)
			}
			var err error
			if c.specs != nil {
				_, err = study.ResolveSpecs(c.specs)
				if err == nil {
					t.Fatalf("ResolveSpecs(%v): no error", c.specs)
				}
			} else {
				opts := append(tiny(t, data), c.opts...)
				_, err = study.New(out, opts...)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if out == aFile {
				if b, _ := os.ReadFile(aFile); string(b) != "keep me" {
					t.Error("the file given as output folder changed")
				}
				return
			}
			entries, _ := os.ReadDir(out)
			if b, _ := os.ReadFile(filepath.Join(out, "keep.txt")); len(entries) != 1 || string(b) != "keep me" {
				t.Errorf("output folder changed: %v", entries)
			}
		})
	}
}

// TestFamily: the default family is the 14 linked n128 variants, vanilla
// first.
func TestFamily(t *testing.T) {
	ref := lookup(t, "small")[0]
	fam, err := study.Family(ref)
	if err != nil || len(fam) != 1 || fam[0].Name != "small" {
		t.Errorf("family of small (only small and odd_linear linked here): %v %v", fam, err)
	}
}
