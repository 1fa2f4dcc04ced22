package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadSpecWritesNothing runs the real command on each kind of bad spec:
// it must exit 1, name the field and the rule, and leave no output behind.
func TestBadSpecWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "synthgen")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	const base = `"name":"x","n":16,"d":32,"heads":4,"layers":1`
	cases := []struct{ name, doc, want string }{
		{"unknown_variant", `{` + base + `,"variant":"foo"}`, `field "variant"`},
		{"d_not_multiple", `{"name":"x","n":16,"d":30,"heads":4,"layers":1,"variant":"random"}`, `field "d" = 30: must be a multiple of heads`},
		{"ab_not_n", `{` + base + `,"variant":"factorized_dense","a":3,"b":4}`, `a·b = n`},
		{"k_missing", `{` + base + `,"variant":"factorized_random"}`, `field "k": required`},
		{"unknown_field", `{` + base + `,"variant":"random","heads2":1}`, `field "heads2"`},
		{"n_range", `{"name":"x","n":100000,"d":32,"heads":4,"layers":1,"variant":"random"}`, `1 ≤ n ≤ 8192`},
		{"malformed", `{` + base, `malformed JSON`},
	}
	for _, c := range cases {
		spec := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(spec, []byte(c.doc), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "out_"+c.name)
		cmd := exec.Command(bin, "-spec", spec, "-out", out)
		cmd.Dir = "." // inside the module
		msg, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("%s: exit %v, want status 1; output %s", c.name, err, msg)
		}
		if !strings.Contains(string(msg), c.want) || !strings.Contains(string(msg), spec) {
			t.Errorf("%s: message %q lacks %q or the file name", c.name, msg, c.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: output %s exists after a bad spec", c.name, out)
		}
	}
}

// TestGenerateIntoTemp generates a good spec into a fresh directory and
// checks the package files are all there and nothing temporary is left.
func TestGenerateIntoTemp(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "tiny.json")
	os.WriteFile(spec, []byte(`{"name":"tiny","n":24,"d":16,"heads":2,"layers":1,"variant":"random+vanilla"}`), 0o644)
	out := filepath.Join(dir, "pkg", "tiny")
	if err := run([]string{"-spec", spec, "-out", out}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"spec.go", "kernels_go.go", "dispatch.go", "checks.go"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("missing %s: %v", f, err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, "pkg", ".*"))
	if len(left) != 0 {
		t.Errorf("temporary directories left behind: %v", left)
	}
	// Regenerating over an existing package replaces it whole.
	if err := run([]string{"-spec", spec, "-out", out}); err != nil {
		t.Fatal(err)
	}
}
