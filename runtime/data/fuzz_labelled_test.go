package data

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLabelled feeds arbitrary files, formats, lengths and vocabularies to
// the labelled-file reader. A rejection must be an error naming the file
// (a *LineError with a line of the file for a bad line), never a panic;
// an accepted file's examples must obey every rule (label, text length,
// vocabulary, classes in order of first appearance, lines increasing);
// written back in the same format and read again, they must be the same.
//
//	go test ./runtime/data -run '^$' -fuzz '^FuzzLabelled$' -fuzztime 10s
func FuzzLabelled(f *testing.F) {
	for _, c := range []struct {
		content string
		format  uint8
		n       uint16
		vocab   uint16
	}{
		{"pos\tgood film\nneg\tbad film\n", 1, 64, 256},
		{"label\ttext\na\tx\r\n\n\tb\n", 1, 8, 128},
		{"pos,\"a, b\"\nneg,\"multi\nline\"\n", 2, 64, 256},
		{"a,\"x\"y\"\n", 2, 64, 256},
		{"{\"label\":1,\"text\":\"x\"}\n{\"label\":\"b\",\"text\":\"yy\",\"label\":2}\n", 3, 4, 256},
		{"{\"label\":1.5,\"text\":\"x\"}\n", 3, 4, 256},
		{"\uFEFFa\tb\n", 1, 1, 10},
		{"", 0, 0, 0},
	} {
		f.Add([]byte(c.content), c.format, c.n, c.vocab)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte, format uint8, n16, vocab16 uint16) {
		fm := Format(1 + int(format)%3)
		path := filepath.Join(dir, "data."+fm.String())
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		nLines := bytes.Count(content, []byte{'\n'}) + 1
		o := LabelledOptions{N: int(n16) % 300, Vocab: int(vocab16) % 300}
		s, err := ReadLabelled(path, o)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			var le *LineError
			if errors.As(err, &le) && (le.Line < 1 || le.Line > nLines) {
				t.Fatalf("error at line %d of a %d-line file: %v", le.Line, nLines, err)
			}
			return
		}
		last := 0
		for i, e := range s.Examples {
			switch {
			case e.Line <= last || e.Line > nLines:
				t.Fatalf("example %d on line %d after line %d (%d lines)", i, e.Line, last, nLines)
			case checkLabel(e.Label) != nil:
				t.Fatalf("example %d: bad label %q accepted", i, e.Label)
			case len(e.Text) < 1 || len(e.Text) > o.N:
				t.Fatalf("example %d: text of %d bytes accepted with n %d", i, len(e.Text), o.N)
			case CheckVocab("", e.Text, o.Vocab) != nil:
				t.Fatalf("example %d: text outside the vocabulary %d accepted", i, o.Vocab)
			case e.Class > s.Labels.Len() || s.Labels.Name(e.Class) != e.Label:
				t.Fatalf("example %d: class %d is not label %q", i, e.Class, e.Label)
			}
			if e.Class == s.Labels.Len() {
				t.Fatalf("example %d: class %d out of range", i, e.Class)
			}
			last = e.Line
		}
		// Classes in order of first appearance.
		next := 0
		for _, e := range s.Examples {
			if e.Class > next {
				t.Fatalf("class %d appears before class %d", e.Class, next)
			}
			if e.Class == next {
				next++
			}
		}
		// Written back and read again: the same examples (when the format
		// can hold them: TSV has no line breaks, JSON Lines no invalid UTF-8).
		var buf bytes.Buffer
		if err := WriteLabelled(&buf, fm, s.Examples); err != nil {
			return
		}
		again := filepath.Join(dir, "again."+fm.String())
		if err := os.WriteFile(again, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		s2, err := ReadLabelled(again, o)
		if err != nil {
			t.Fatalf("written back, not read: %v\n%q", err, buf.Bytes())
		}
		if len(s2.Examples) != len(s.Examples) {
			t.Fatalf("written back: %d examples, want %d", len(s2.Examples), len(s.Examples))
		}
		for i := range s.Examples {
			a, b := s.Examples[i], s2.Examples[i]
			if a.Label != b.Label || a.Class != b.Class || !bytes.Equal(a.Text, b.Text) {
				t.Fatalf("example %d written back as %q %q, was %q %q", i, b.Label, b.Text, a.Label, a.Text)
			}
		}
	})
}
