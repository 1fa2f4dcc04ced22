package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/clstest"
)

// TestClassifyCLI: synth listops writes labelled files; synth train trains
// a classifier on them (validating on -valid), a run stopped and resumed
// writes the uninterrupted run's checkpoint, synth eval prints the loss and
// accuracy, synth predict labels texts from -text and -file, and bad
// labelled files are errors naming the file and line.
func TestClassifyCLI(t *testing.T) {
	s, err := clstest.Spec("odd", 10)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lo := filepath.Join(dir, "lo")
	mustRun(t, listopsCmd, "-out", lo, "-seed", "5", "-train", "400", "-val", "50", "-test", "50", "-min-len", "10", "-max-len", "60")
	trainF, valF, testF := filepath.Join(lo, "train.tsv"), filepath.Join(lo, "val.tsv"), filepath.Join(lo, "test.tsv")
	args := func(out string, extra ...string) []string {
		return append([]string{"-spec", s.Name, "-data", trainF, "-valid", valF, "-steps", "20", "-batch", "4", "-eval-every", "10", "-log-every", "10", "-out", out}, extra...)
	}
	full := filepath.Join(dir, "full.safetensors")
	got := mustRun(t, trainCmd, args(full)...)
	for _, w := range []string{"400 labelled examples for training, 50 for validation", "acc "} {
		if !strings.Contains(got, w) {
			t.Errorf("train output lacks %q:\n%s", w, got)
		}
	}
	half := filepath.Join(dir, "half.safetensors")
	mustRun(t, trainCmd, args(half, "-stop-at", "10")...)
	mustRun(t, trainCmd, "-resume", half)
	if !bytes.Equal(fileBytes(t, full), fileBytes(t, half)) {
		t.Fatal("the resumed classifier's checkpoint differs from the uninterrupted run's")
	}

	got = mustRun(t, inspectCmd, "-ckpt", full)
	if !strings.Contains(got, "labels     10 classes:") || !strings.Contains(got, "head.weight") {
		t.Errorf("inspect output lacks the labels or the head:\n%s", got)
	}
	got = mustRun(t, evalCmd, "-ckpt", full, "-data", testF)
	for _, w := range []string{"50 examples", "loss ", "accuracy "} {
		if !strings.Contains(got, w) {
			t.Errorf("eval output lacks %q:\n%s", w, got)
		}
	}
	got = mustRun(t, predictCmd, "-ckpt", full, "-text", "[SM3[MAX45]2]")
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 2 || len(strings.Split(lines[1], "\t")) != 11 {
		t.Errorf("predict -text: %q", got)
	}
	texts := filepath.Join(dir, "texts.txt")
	os.WriteFile(texts, []byte("[MAX12]\n\n[MIN34]\n"), 0o644)
	got = mustRun(t, predictCmd, "-ckpt", full, "-file", texts)
	if lines := strings.Split(strings.TrimSpace(got), "\n"); len(lines) != 3 {
		t.Errorf("predict -file: %q", got)
	}

	fail := func(f func(*env, []string) error, want []string, a ...string) {
		t.Helper()
		e, _ := testEnv()
		err := f(e, a)
		if err == nil {
			t.Errorf("%v: no error", a)
			return
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not mention %q", a, err, w)
			}
		}
	}
	bad := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	unseen := bad("unseen.tsv", "3\t[MAX3]\nseven\t[MAX7]\n")
	fail(evalCmd, []string{"unseen.tsv line 2", `"seven"`}, "-ckpt", full, "-data", unseen)
	long := bad("long.tsv", "3\t"+strings.Repeat("3", 61)+"\n")
	fail(evalCmd, []string{"long.tsv line 1", "longer"}, "-ckpt", full, "-data", long)
	empty := bad("empty.tsv", "3\t[MAX3]\n4\t\n")
	fail(trainCmd, []string{"empty.tsv line 2", "empty text"}, "-spec", s.Name, "-data", empty, "-out", filepath.Join(dir, "e.safetensors"))
	nolabel := bad("nolabel.tsv", "3\t[MAX3]\n\t[MAX4]\n")
	fail(trainCmd, []string{"nolabel.tsv line 2"}, "-spec", s.Name, "-data", nolabel, "-out", filepath.Join(dir, "n.safetensors"))
	longText := bad("longtexts.txt", "[MAX1]\n"+strings.Repeat("1", 70)+"\n")
	fail(predictCmd, []string{"longtexts.txt line 2", "longer"}, "-ckpt", full, "-file", longText)
	fail(trainCmd, []string{"-hold-out", "only for a classifier"}, "-spec", "odd", "-data", trainF, "-hold-out", "0.1", "-out", filepath.Join(dir, "lm.safetensors"))
}

// TestCompareListOps: synth compare -task listops writes ListOps files
// sized to the specs' n, trains the classifiers and prints the accuracy
// table with LRA's column; -resume of the finished study changes nothing.
func TestCompareListOps(t *testing.T) {
	var names []string
	for _, b := range []string{"odd", "odd_linear"} {
		s, err := clstest.Spec(b, 10)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, s.Name)
	}
	out := filepath.Join(t.TempDir(), "study")
	got := mustRun(t, compareCmd, "-task", "listops", "-specs", strings.Join(names, ","), "-steps", "6", "-batch", "4", "-eval-every", "3",
		"-listops-train", "300", "-listops-val", "30", "-listops-test", "40", "-out", out)
	for _, w := range []string{"lengths 15…60", "test accuracy %", "LRA ListOps", "40 examples of test.tsv", "study done", "loss.png and " + filepath.Join(out, "accuracy.png")} {
		if !strings.Contains(got, w) {
			t.Errorf("output lacks %q:\n%s", w, got)
		}
	}
	got = mustRun(t, compareCmd, "-resume", "-out", out)
	if !strings.Contains(got, "already done") || !strings.Contains(got, "test accuracy %") {
		t.Errorf("resume of a finished study:\n%s", got)
	}
	e, _ := testEnv()
	if err := compareCmd(e, []string{"-task", "classify", "-specs", names[0], "-out", filepath.Join(t.TempDir(), "x")}); err == nil || !strings.Contains(err.Error(), "-valid and -test") {
		t.Errorf("classify without files: %v", err)
	}
}
