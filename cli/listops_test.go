package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/data"
)

// evalListOps evaluates a ListOps sequence in the byte encoding with a
// stack of open lists, independently of the generator; ok is false for a
// malformed sequence.
func evalListOps(text []byte) (v int, ok bool) {
	type open struct {
		op   byte
		args []int
	}
	stack := []open{{}}
	for _, c := range text {
		top := &stack[len(stack)-1]
		switch {
		case c >= '0' && c <= '9':
			top.args = append(top.args, int(c-'0'))
		case c == 'X' || c == 'N' || c == 'D' || c == 'S':
			stack = append(stack, open{op: c})
		case c == ']' && len(stack) > 1 && len(top.args) >= 2:
			a := slices.Clone(top.args)
			slices.Sort(a)
			var r int
			switch top.op {
			case 'X':
				r = a[len(a)-1]
			case 'N':
				r = a[0]
			case 'D':
				r = (a[(len(a)-1)/2] + a[len(a)/2]) / 2 // odd: twice the middle, halved
			case 'S':
				for _, x := range a {
					r += x
				}
				r %= 10
			}
			stack = stack[:len(stack)-1]
			stack[len(stack)-1].args = append(stack[len(stack)-1].args, r)
		default:
			return 0, false
		}
	}
	if len(stack) != 1 || len(stack[0].args) != 1 {
		return 0, false
	}
	return stack[0].args[0], true
}

// TestListOps: synth listops writes the three files, whose every label an
// independent evaluator confirms and whose lengths are in range; the same
// flags write the same bytes; existing files are kept without -force.
func TestListOps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "lo")
	args := []string{"-out", out, "-seed", "3", "-train", "1500", "-val", "200", "-test", "300", "-min-len", "40", "-max-len", "300"}
	got := mustRun(t, listopsCmd, args...)
	for _, want := range []string{"listops: seed 3, depth ≤ 10, ≤ 10 arguments, lengths 40…300, 1500/200/300 sequences",
		"wrote " + filepath.Join(out, "train.tsv") + ": 1500 sequences, lengths ", "wrote " + filepath.Join(out, "val.tsv") + ": 200 sequences",
		"wrote " + filepath.Join(out, "test.tsv") + ": 300 sequences"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	seen := map[string]bool{}
	var labels *data.Labels
	for _, c := range []struct {
		split string
		count int
	}{{"train", 1500}, {"val", 200}, {"test", 300}} {
		p := filepath.Join(out, c.split+".tsv")
		o := data.LabelledOptions{N: 300, Vocab: 128}
		var s *data.LabelledSet
		var err error
		if labels == nil {
			s, err = data.ReadLabelled(p, o)
			labels = s.Labels
		} else {
			s, err = data.ReadLabelledWith(p, labels, o)
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Examples) != c.count {
			t.Fatalf("%s: %d examples, want %d", p, len(s.Examples), c.count)
		}
		for _, e := range s.Examples {
			v, ok := evalListOps(e.Text)
			if !ok || strconv.Itoa(v) != e.Label {
				t.Fatalf("%s line %d: %q is labelled %s; the evaluator says %d (ok %v)", p, e.Line, e.Text, e.Label, v, ok)
			}
			if len(e.Text) < 40 || len(e.Text) > 300 || seen[string(e.Text)] {
				t.Fatalf("%s line %d: length %d, or seen before", p, e.Line, len(e.Text))
			}
			seen[string(e.Text)] = true
		}
	}
	if labels.Len() != 10 {
		t.Errorf("training labels %q, want all ten digits", labels.Names())
	}

	// The same flags write the same bytes; another seed other bytes.
	again := filepath.Join(dir, "again")
	mustRun(t, listopsCmd, append(args, "-out", again)...)
	other := filepath.Join(dir, "other")
	mustRun(t, listopsCmd, append(args, "-out", other, "-seed", "4")...)
	for _, f := range []string{"train.tsv", "val.tsv", "test.tsv"} {
		if !bytes.Equal(fileBytes(t, filepath.Join(out, f)), fileBytes(t, filepath.Join(again, f))) {
			t.Errorf("%s differs between two runs with the same seed", f)
		}
		if bytes.Equal(fileBytes(t, filepath.Join(out, f)), fileBytes(t, filepath.Join(other, f))) {
			t.Errorf("%s is the same for seeds 3 and 4", f)
		}
	}

	// Existing files are kept without -force: nothing is written.
	keep := filepath.Join(dir, "keep")
	os.Mkdir(keep, 0o755)
	os.WriteFile(filepath.Join(keep, "test.tsv"), []byte("precious"), 0o644)
	e, buf := testEnv()
	err := listopsCmd(e, append(args, "-out", keep))
	if err == nil || !strings.Contains(err.Error(), "test.tsv exists") || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("existing file: %v\n%s", err, buf)
	}
	if strings.Contains(buf.String(), "listops: seed") {
		t.Errorf("the existing file was found after generating the set:\n%s", buf)
	}
	if b := fileBytes(t, filepath.Join(keep, "test.tsv")); string(b) != "precious" {
		t.Fatal("the existing file was changed")
	}
	if _, err := os.Stat(filepath.Join(keep, "train.tsv")); err == nil {
		t.Fatal("train.tsv written although the command failed")
	}
	mustRun(t, listopsCmd, append(args, "-out", keep, "-force")...)
	if !bytes.Equal(fileBytes(t, filepath.Join(keep, "test.tsv")), fileBytes(t, filepath.Join(out, "test.tsv"))) {
		t.Fatal("-force did not replace the file")
	}

	// CSV and JSON Lines, through the command table.
	for _, f := range []string{"csv", "jsonl"} {
		d := filepath.Join(dir, f)
		var stdout, stderr bytes.Buffer
		if code := runTo([]string{"listops", "-out", d, "-format", f, "-train", "50", "-val", "0", "-test", "5", "-min-len", "10", "-max-len", "100"}, &stdout, &stderr); code != 0 {
			t.Fatalf("-format %s: status %d: %s", f, code, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(d, "val."+f)); err == nil {
			t.Errorf("-val 0 wrote val.%s", f)
		}
		s, err := data.ReadLabelled(filepath.Join(d, "train."+f), data.LabelledOptions{N: 100, Vocab: 256})
		if err != nil || len(s.Examples) != 50 {
			t.Fatalf("-format %s: %v", f, err)
		}
		for _, e := range s.Examples {
			if v, ok := evalListOps(e.Text); !ok || strconv.Itoa(v) != e.Label {
				t.Fatalf("-format %s line %d: %q labelled %s", f, e.Line, e.Text, e.Label)
			}
		}
	}
}

// TestListOpsEvaluatorCatches: the test's evaluator can fail.
func TestListOpsEvaluatorCatches(t *testing.T) {
	for text, want := range map[string]int{"X29N47]0]": 9, "D1234]": 2, "D819]": 8, "S999]": 7, "N5D19]]": 5, "7": 7} {
		if v, ok := evalListOps([]byte(text)); !ok || v != want {
			t.Errorf("%s: %d %v, want %d", text, v, ok, want)
		}
	}
	for _, bad := range []string{"X2]", "X29", "X29]]", "X2a]", "12", ""} {
		if _, ok := evalListOps([]byte(bad)); ok {
			t.Errorf("%q evaluated", bad)
		}
	}
}

// TestListOpsBadFlags: each bad flag is an error naming it, and nothing is
// written.
func TestListOpsBadFlags(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	os.WriteFile(file, []byte("x"), 0o644)
	out := filepath.Join(dir, "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-depth", "0"}, "-depth 0 must be ≥ 1"},
		{[]string{"-args", "1"}, "-args 1 must be ≥ 2"},
		{[]string{"-train", "-1"}, "-train -1 must be ≥ 0"},
		{[]string{"-min-len", "0"}, "-min-len 0 must be ≥ 1"},
		{[]string{"-min-len", "50", "-max-len", "40"}, "-max-len 40: must be in -min-len"},
		{[]string{"-depth", "2", "-args", "3", "-min-len", "6", "-max-len", "60"}, "-min-len 6: exceeds the longest sequence of depth 2 and 3 arguments, 5"},
		{[]string{"-depth", "101"}, "-depth 101: must be in 1…100"},
		{[]string{"-train", "0", "-val", "0", "-test", "0"}, "nothing to write"},
		{[]string{"-format", "xml"}, `-format "xml"`},
		{[]string{"-format", "auto"}, `-format "auto"`},
		{[]string{"-min-len", "1", "-max-len", "1", "-train", "11", "-val", "0", "-test", "0"}, "no new sequence in the length range"},
		{[]string{"-out", file, "-train", "5", "-min-len", "5", "-max-len", "50"}, "output folder " + file + " is a file, not a folder"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-train", "9223372036854775807"}, "at most 10000000 sequences"},
		{[]string{"-train", "3000000"}, "at most 10000000 sequences and 4294967296 bytes"},
	} {
		e, buf := testEnv()
		args := append([]string{"-out", out}, c.args...)
		if err := listopsCmd(e, args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q\n%s", c.args, err, c.want, buf)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failing command created the output folder")
	}
}
