package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/train"
)

// testEnv captures a command's output.
func testEnv() (*env, *bytes.Buffer) {
	var out bytes.Buffer
	return &env{out: &out, errOut: &out}, &out
}

// textFile writes the first size bytes of the default text to dir.
func textFile(t *testing.T, dir string, size int) string {
	t.Helper()
	p, err := data.DefaultFile()
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

func mustRun(t *testing.T, f func(*env, []string) error, args ...string) string {
	t.Helper()
	e, out := testEnv()
	if err := f(e, args); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out.String()
}

func fileBytes(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tinyTrain(dir, txt string, extra ...string) []string {
	return append([]string{"-spec", "small", "-data", txt, "-batch", "2", "-eval-every", "5", "-eval-windows", "2", "-log-every", "5"}, extra...)
}

func TestTrainEvalSampleInspect(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "s.safetensors")
	out := mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "12", "-out", ck)...)
	if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, txt) {
		t.Errorf("first line %q does not name the data", first)
	}
	for _, want := range []string{"step  5/12", "step 10/12", "step 12/12", "saved step 12 to " + ck} {
		if !strings.Contains(out, want) {
			t.Errorf("train output lacks %q:\n%s", want, out)
		}
	}
	// The CSV log: header, step 0's evaluation, then one row per step.
	csv := strings.Split(strings.TrimSpace(string(fileBytes(t, filepath.Join(dir, "s.csv")))), "\n")
	if csv[0] != "step,loss,val_loss,lr,tokens_per_s" || len(csv) != 14 {
		t.Fatalf("CSV log:\n%s", strings.Join(csv, "\n"))
	}
	if f := strings.Split(csv[6], ","); f[0] != "5" || f[2] == "" {
		t.Errorf("CSV row of step 5 (an evaluation step): %q", csv[6])
	}
	if _, err := os.Stat(filepath.Join(dir, "s.opt.safetensors")); err != nil {
		t.Error(err)
	}

	// eval prints "loss <6 decimals>" and matches the evaluator.
	out = mustRun(t, evalCmd, "-ckpt", ck, "-data", txt, "-windows", "7", "-batch", "3")
	mm := regexp.MustCompile(`(?m)^loss (\d+\.\d{6})$`).FindStringSubmatch(out)
	if mm == nil || !regexp.MustCompile(`(?m)^bpb \d+\.\d{6}$`).MatchString(out) {
		t.Fatalf("eval output:\n%s", out)
	}
	m, step, err := checkpoint.Load(ck)
	if err != nil || step != 12 {
		t.Fatal(err, step)
	}
	b := fileBytes(t, txt)
	r, err := train.NewEvaluator(m, 1).Evaluate(b, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.ParseFloat(mm[1], 64); got != mustParse(strconv.FormatFloat(r.Loss, 'f', 6, 64)) {
		t.Errorf("eval printed %s, evaluator says %.6f", mm[1], r.Loss)
	}
	if !strings.Contains(out, "7 windows") {
		t.Errorf("eval output lacks the window count:\n%s", out)
	}

	// sample: prompt then continuation, deterministic for a seed.
	s1 := mustRun(t, sampleCmd, "-ckpt", ck, "-prompt", "The light ", "-len", "40", "-seed", "3", "-topk", "10")
	s2 := mustRun(t, sampleCmd, "-ckpt", ck, "-prompt", "The light ", "-len", "40", "-seed", "3", "-topk", "10")
	if s1 != s2 || !strings.HasPrefix(s1, "The light ") || len(s1) != len("The light ")+40+1 {
		t.Errorf("samples %q and %q", s1, s2)
	}
	g := mustRun(t, sampleCmd, "-ckpt", ck, "-prompt", strings.Repeat("ab", 50), "-len", "5", "-temp", "0")
	if len(g) != 100+5+1 {
		t.Errorf("greedy sample with a prompt longer than n: %q", g)
	}

	// inspect lists the tensors, the count, the spec and the step.
	out = mustRun(t, inspectCmd, "-ckpt", ck)
	for _, want := range []string{"layers.1.attn.R", "[2, 64, 64]", "tok_emb", "step       12", `"name":"small"`, strconv.Itoa(m.NumParams()) + " parameters", "AdamW state at step 12"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func mustParse(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}

// TestResumeCLI: a run stopped at step 6 and resumed to 12 writes the same
// checkpoint bytes as an uninterrupted run of 12 steps.
func TestResumeCLI(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	a := filepath.Join(dir, "a.safetensors")
	b := filepath.Join(dir, "b.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "12", "-out", a)...)
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "12", "-stop-at", "6", "-out", b)...)
	if h, err := checkpoint.ReadHeader(b); err != nil || h.Step != 6 {
		t.Fatalf("stopped run: %v", err)
	}
	out := mustRun(t, trainCmd, "-resume", b, "-workers", "1") // steps, batch, seed and data from the saved run
	if !strings.Contains(out, "at step 6 (with optimizer state)") {
		t.Errorf("resume output:\n%s", out)
	}
	if !bytes.Equal(fileBytes(t, a), fileBytes(t, b)) {
		t.Fatal("resumed checkpoint differs from the uninterrupted one")
	}
	if !bytes.Equal(fileBytes(t, checkpoint.OptPath(a)), fileBytes(t, checkpoint.OptPath(b))) {
		t.Fatal("resumed optimizer state differs from the uninterrupted one")
	}
	// The resumed run appended to the CSV log.
	if rows := strings.Count(string(fileBytes(t, filepath.Join(dir, "b.csv"))), "\n"); rows != 14 {
		t.Errorf("resumed CSV has %d lines, want 14", rows)
	}
	// Extending the run is allowed; going backwards is not.
	e, _ := testEnv()
	if err := trainCmd(e, []string{"-resume", b, "-steps", "10"}); err == nil || !strings.Contains(err.Error(), "more steps") {
		t.Errorf("resume past -steps: %v", err)
	}
	out = mustRun(t, trainCmd, "-resume", b, "-steps", "14", "-eval-every", "0")
	if !strings.Contains(out, "stretched") || !strings.Contains(out, "saved step 14") {
		t.Errorf("extended run:\n%s", out)
	}
}

// TestResumeSplitRun: the case, "-steps 6" then "-resume -steps 12",
// is exact when the first part fixes the schedule's length with -lr-steps.
func TestResumeSplitRun(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	a := filepath.Join(dir, "a.safetensors")
	c := filepath.Join(dir, "c.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "12", "-out", a)...)
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "6", "-lr-steps", "12", "-out", c)...)
	mustRun(t, trainCmd, "-resume", c, "-steps", "12", "-workers", "2")
	if !bytes.Equal(fileBytes(t, a), fileBytes(t, c)) {
		t.Fatal("6 steps then -resume -steps 12 differs from 12 steps")
	}
}

// TestInterrupt: a signal before the run starts trains nothing, writes
// nothing and says so. (A signal during the run saves the step it reached:
// TestSIGTERM.)
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "i.safetensors")
	e, out := testEnv()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.ctx = ctx
	if err := trainCmd(e, tinyTrain(dir, txt, "-steps", "50", "-out", ck)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing was trained or written") {
		t.Errorf("output:\n%s", out)
	}
	for _, f := range []string{ck, filepath.Join(dir, "i.opt.safetensors"), filepath.Join(dir, "i.csv")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestDefaultData(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "d.safetensors")
	out := mustRun(t, trainCmd, "-spec", "small", "-steps", "1", "-batch", "1", "-eval-every", "0", "-out", ck)
	if first := strings.SplitN(out, "\n", 2)[0]; !strings.Contains(first, "default") || !strings.Contains(first, "Isaac.Newton-Opticks.txt") {
		t.Errorf("first line %q does not say the default data is used", first)
	}
}

// TestBadInput: every bad input is a clear error, never a panic.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("too short"), 0o644)
	split := filepath.Join(dir, "split.txt")
	os.WriteFile(split, make([]byte, 300), 0o644) // ≥ n+1 but its 10% is not
	notckpt := filepath.Join(dir, "notes.safetensors")
	os.WriteFile(notckpt, []byte("hello, world"), 0o644)
	ck := filepath.Join(dir, "c.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "1", "-out", ck)...)
	b := fileBytes(t, ck)
	trunc := filepath.Join(dir, "trunc.safetensors")
	os.WriteFile(trunc, b[:len(b)/2], 0o644)
	missing := filepath.Join(dir, "nope.txt")

	for _, c := range []struct {
		name string
		f    func(*env, []string) error
		args []string
		want string
	}{
		{"missing data", trainCmd, []string{"-spec", "small", "-data", missing}, "no such file"},
		{"directory data", trainCmd, []string{"-spec", "small", "-data", dir}, "directory"},
		{"short data", trainCmd, []string{"-spec", "small", "-data", short}, "too short"},
		{"split too short", trainCmd, []string{"-spec", "small", "-data", split}, "split"},
		{"unlinked spec", trainCmd, []string{"-spec", "nosuchspec", "-data", txt}, "not linked"},
		{"zero steps", trainCmd, []string{"-spec", "small", "-data", txt, "-steps", "0"}, "steps"},
		{"zero batch", trainCmd, []string{"-spec", "small", "-data", txt, "-batch", "0"}, "batch"},
		{"bad lr", trainCmd, []string{"-spec", "small", "-data", txt, "-lr", "-1"}, "learning rate"},
		{"bad out dir", trainCmd, []string{"-spec", "small", "-data", txt, "-out", filepath.Join(dir, "no", "x.safetensors")}, "directory"},
		{"out is dir", trainCmd, []string{"-spec", "small", "-data", txt, "-out", dir}, "directory"},
		{"bad stop-at", trainCmd, []string{"-spec", "small", "-data", txt, "-steps", "5", "-stop-at", "9"}, "stop-at"},
		{"resume missing", trainCmd, []string{"-resume", filepath.Join(dir, "none.safetensors")}, "none.safetensors"},
		{"resume not ckpt", trainCmd, []string{"-resume", notckpt}, "not a valid safetensors"},
		{"resume other spec", trainCmd, []string{"-resume", ck, "-spec", "random"}, "does not match"},
		{"positional", trainCmd, []string{"oops"}, "unexpected argument"},
		{"bad flag", trainCmd, []string{"-bogus"}, "bad usage"},
		{"eval missing ckpt", evalCmd, []string{"-ckpt", filepath.Join(dir, "none.safetensors"), "-data", txt}, "none.safetensors"},
		{"eval truncated", evalCmd, []string{"-ckpt", trunc, "-data", txt}, "trunc.safetensors"},
		{"eval not ckpt", evalCmd, []string{"-ckpt", notckpt, "-data", txt}, "notes.safetensors"},
		{"eval short data", evalCmd, []string{"-ckpt", ck, "-data", short}, "too short"},
		{"eval dir data", evalCmd, []string{"-ckpt", ck, "-data", dir}, "directory"},
		{"eval missing data", evalCmd, []string{"-ckpt", ck, "-data", missing}, "no such file"},
		{"eval bad windows", evalCmd, []string{"-ckpt", ck, "-data", txt, "-windows", "-1"}, "windows"},
		{"sample bad temp", sampleCmd, []string{"-ckpt", ck, "-temp", "-1"}, "temp"},
		{"sample empty prompt", sampleCmd, []string{"-ckpt", ck, "-prompt", ""}, "prompt"},
		{"sample missing ckpt", sampleCmd, []string{"-ckpt", missing}, "nope.txt"},
		{"inspect truncated", inspectCmd, []string{"-ckpt", trunc}, "trunc.safetensors"},
		{"inspect dir", inspectCmd, []string{"-ckpt", dir}, "directory"},
	} {
		e, _ := testEnv()
		err := c.f(e, c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
}

func TestDispatch(t *testing.T) {
	var errOut bytes.Buffer
	if code := run(nil, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Errorf("no command: %d %q", code, errOut.String())
	}
	if code := run([]string{"frobnicate"}, &errOut); code != 2 {
		t.Errorf("unknown command: %d", code)
	}
	for _, name := range []string{"train", "eval", "sample", "inspect", "info", "bench", "compare", "attn"} {
		if _, ok := commands[name]; !ok {
			t.Errorf("command %s missing", name)
		}
	}
	if code := run([]string{"eval", "-ckpt", filepath.Join(t.TempDir(), "x.safetensors")}, &errOut); code != 1 || !strings.Contains(errOut.String(), "synth eval:") {
		t.Errorf("failing command: %d %q", code, errOut.String())
	}
}
