package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/study"
)

func tinyCompare(txt, out string, extra ...string) []string {
	return append([]string{"-specs", "small,odd_linear", "-data", txt, "-steps", "6", "-batch", "2", "-eval-every", "3", "-eval-windows", "2", "-out", out}, extra...)
}

// TestCompareAttn: synth compare prints the plan, progress and the table
// and writes its files; interrupted (here before it starts) and resumed,
// it finishes; synth attn draws a checkpoint's maps.
func TestCompareAttn(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	out := filepath.Join(dir, "study")

	e, buf := testEnv()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.ctx = ctx
	if err := compareCmd(e, tinyCompare(txt, out)); err != nil {
		t.Fatal(err)
	}
	if s := buf.String(); !strings.Contains(s, "continue with: synth compare -resume -out "+out) {
		t.Fatalf("cancelled compare:\n%s", s)
	}
	got := mustRun(t, compareCmd, "-resume", "-out", out, "-steps", "6")
	for _, want := range []string{"resuming study in " + out, "[1/2 small seed 1] step 3/6", "| spec | variant | params | train loss | val loss | bits/byte | tokens/s | wall time |",
		"| small | random | 120.3k |", "| odd_linear | linear |", "wrote " + filepath.Join(out, "results.md"), "study done in"} {
		if !strings.Contains(got, want) {
			t.Errorf("compare output lacks %q:\n%s", want, got)
		}
	}
	for _, f := range []string{"loss.png", "results.csv", "results.json", "study.json", "small-seed1.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}

	adir := filepath.Join(dir, "attn")
	got = mustRun(t, attnCmd, "-ckpt", filepath.Join(out, "small-seed1.safetensors"), "-out", adir, "-data", txt)
	if !strings.Contains(got, "shown: attention probabilities softmax(the learned R)") || !strings.Contains(got, "wrote "+filepath.Join(adir, "small-layer1.png")) {
		t.Errorf("attn output:\n%s", got)
	}
	e, buf = testEnv()
	if err := attnCmd(e, []string{"-ckpt", filepath.Join(out, "small-seed1.safetensors"), "-out", txt}); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("attn -out a file: %v\n%s", err, buf)
	}
}

// TestCompareBadInput: each bad input of the issue is an error before any
// training, leaving the output folder's files as they were.
func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("too short"), 0o644)
	mine := filepath.Join(dir, "mine.json")
	os.WriteFile(mine, []byte(`{"name": "mine", "n": 32, "d": 32, "heads": 2, "layers": 1, "variant": "random"}`), 0o644)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, []byte("keep"), 0o644)
	for _, c := range []struct {
		name string
		args func(out string) []string
		want string
	}{
		{"unknown spec", func(o string) []string { return tinyCompare(txt, o, "-specs", "small,nosuch") }, `spec "nosuch" is not linked`},
		{"spec without a linked package", func(o string) []string { return tinyCompare(txt, o, "-specs", mine) }, `spec "mine" is not linked`},
		{"empty data file", func(o string) []string { return tinyCompare(empty, o) }, "is empty"},
		{"data shorter than a window", func(o string) []string { return tinyCompare(short, o) }, "too short"},
		{"output folder is a file", func(string) []string { return tinyCompare(txt, file) }, "is a file"},
		{"resume without a study", func(o string) []string { return []string{"-resume", "-out", o} }, "no study"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			os.MkdirAll(out, 0o755)
			keep := filepath.Join(out, "results.csv") // a file the study would write
			os.WriteFile(keep, []byte("mine"), 0o644)
			e, buf := testEnv()
			err := compareCmd(e, c.args(out))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q\n%s", err, c.want, buf)
			}
			if strings.Contains(buf.String(), "step") {
				t.Errorf("training started:\n%s", buf)
			}
			entries, _ := os.ReadDir(out)
			if b, _ := os.ReadFile(keep); string(b) != "mine" || len(entries) != 1 {
				t.Errorf("output folder changed: %v", entries)
			}
			if b, _ := os.ReadFile(file); string(b) != "keep" {
				t.Error("the file given as -out changed")
			}
		})
	}
	// A folder with a file the study would write is refused too.
	out := filepath.Join(dir, "taken")
	os.MkdirAll(out, 0o755)
	os.WriteFile(filepath.Join(out, "results.csv"), []byte("mine"), 0o644)
	e, _ := testEnv()
	if err := compareCmd(e, tinyCompare(txt, out)); err == nil || !strings.Contains(err.Error(), "already holds a file") {
		t.Errorf("folder holding results.csv: %v", err)
	}
}

// TestDefaultFamily: the default study is the 14 shipped n128 variants.
func TestDefaultFamily(t *testing.T) {
	fam, err := study.DefaultFamily()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range fam {
		names = append(names, s.Name)
	}
	want := "vanilla random fixed_random factorized_random dense factorized_dense dense_vanilla random_dense random_vanilla aft_full aft_local aft_simple aft_conv linear"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("default family %s, want %s", got, want)
	}
}

// TestDefaultClassifyFamily: a classification study's default specs are
// the 12 bidirectional classifiers of every shipped variant, one size.
func TestDefaultClassifyFamily(t *testing.T) {
	fam, err := study.DefaultClassifyFamily()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range fam {
		if s.Causal() || !s.IsClassifier() || s.N != fam[0].N || s.D != fam[0].D {
			t.Errorf("spec %s: causal %v classifier %v n %d d %d", s.Name, s.Causal(), s.IsClassifier(), s.N, s.D)
		}
		names = append(names, s.Name)
	}
	want := "enc_vanilla enc_random enc_fixed_random enc_factorized_random enc_dense enc_factorized_dense enc_random_vanilla enc_aft_full enc_aft_local enc_aft_simple enc_aft_conv enc_linear"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("default classifier family %s, want %s", got, want)
	}
}
