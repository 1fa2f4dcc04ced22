package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSelfRoot checks that the synthgen module is recognised by its go.mod's
// module line, from a subdirectory.
func TestSelfRoot(t *testing.T) {
	root, err := selfRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, _ := filepath.Abs("../../..")
	if root != want {
		t.Errorf("selfRoot = %s, want %s", root, want)
	}
}

// TestFlags checks the refusals of bad flag combinations, which write
// nothing.
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "give one of"},
		{[]string{"-spec", "x.json", "-all"}, "give one of"},
		{[]string{"-all", "-pkg", "p"}, "-pkg goes with"},
		{[]string{"-index", "specs"}, "-index needs -out"},
		{[]string{"-peak", ".", "-out", "x"}, "drop -out"},
		{[]string{"-all", "-out", "x"}, "drop -out"},
	} {
		if err := run(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}
