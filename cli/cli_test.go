package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpVersionUsage: "synth help <command>" prints that command's usage
// to stdout and exits 0; every command's -h is a real usage with a
// synopsis; "synth version" names the synthgen module.
func TestHelpVersionUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runTo([]string{"help", "train"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "usage: synth train [flags]") || !strings.Contains(out.String(), "-resume") {
		t.Errorf("help train: status %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := runTo([]string{"help", "nosuch"}, &out, &errOut); code != 2 {
		t.Errorf("help nosuch: status %d", code)
	}
	for name := range commands {
		out.Reset()
		errOut.Reset()
		if code := runTo([]string{name, "-h"}, &out, &errOut); code != 0 {
			t.Errorf("%s -h: status %d", name, code)
		}
		u := errOut.String()
		if !strings.HasPrefix(u, "usage: synth "+name+" [flags]\n\n") || strings.Contains(u, "Usage of") || len(strings.SplitN(u, "\n", 4)[2]) < 20 {
			t.Errorf("%s -h: usage %q", name, u)
		}
	}
	out.Reset()
	if code := runTo([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "synthgen ") || !strings.Contains(out.String(), "linked specs: ") {
		t.Errorf("version: status %d, %q", code, out.String())
	}
}

// TestInfo: info lists the linked specs with the level names SYNTHGEN_ISA
// takes.
func TestInfo(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runTo([]string{"info", "-spec", "small"}, &out, &errOut); code != 0 {
		t.Fatalf("info: status %d, %s", code, errOut.String())
	}
	if s := out.String(); !strings.Contains(s, "cpu supports: go") || !strings.Contains(s, "small: variant") || !strings.Contains(s, "bf16 (-precision bf16): ") {
		t.Errorf("info:\n%s", s)
	}
}

// TestPrecisionFlag: a -precision other than f32 or bf16 is an error
// naming the flag, in train and in steps, before anything runs.
func TestPrecisionFlag(t *testing.T) {
	for _, args := range [][]string{
		{"train", "-precision", "fp8", "-out", t.TempDir() + "/x.safetensors"},
		{"steps", "-precision", "fp8"},
	} {
		var out, errOut bytes.Buffer
		code := runTo(args, &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), "-precision") || !strings.Contains(errOut.String(), "fp8") {
			t.Errorf("%v: status %d, stderr %q", args, code, errOut.String())
		}
	}
}
