package data

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeTemp writes content to a file name in a new temporary folder.
func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// summary is "label:text|…" of a set's examples, with their classes and lines.
func summary(s *LabelledSet) string {
	var b strings.Builder
	for _, e := range s.Examples {
		fmt.Fprintf(&b, "%d@%d %s=%s|", e.Line, e.Class, e.Label, e.Text)
	}
	return b.String()
}

func TestReadLabelledFormats(t *testing.T) {
	o := LabelledOptions{N: 64, Vocab: 256}
	for _, c := range []struct {
		name, content, want string
		labels              []string
	}{
		{"a.tsv", "pos\tgood film\nneg\tbad\tfilm\r\n\npos\tyes\n", "1@0 pos=good film|2@1 neg=bad\tfilm|4@0 pos=yes|", []string{"pos", "neg"}},
		{"h.tsv", "label\ttext\nb\tx\na\ty", "2@0 b=x|3@1 a=y|", []string{"b", "a"}},
		{"h2.tsv", "\r\nlabel\ttext\nlabel\ttext\n", "3@0 label=text|", []string{"label"}},
		{"bom.tsv", "\uFEFFz\tx\n", "1@0 z=x|", []string{"z"}},
		{"a.csv", "pos,good film\nneg,\"bad, \"\"really\"\"\nfilm\"\n\npos,yes\n", "1@0 pos=good film|2@1 neg=bad, \"really\"\nfilm|5@0 pos=yes|", []string{"pos", "neg"}},
		{"h.CSV", "label,text\r\n3,x\r\n", "2@0 3=x|", []string{"3"}},
		{"a.jsonl", "{\"label\": \"pos\", \"text\": \"good\\tfilm\", \"id\": 7}\n\n  \n{\"text\":\"x\",\"label\":3}\r\n{\"label\":\"3\",\"text\":\"y\"}\n", "1@0 pos=good\tfilm|4@1 3=x|5@1 3=y|", []string{"pos", "3"}},
		{"neg.jsonl", `{"label":-2,"text":"é"}`, "1@0 -2=é|", []string{"-2"}},
	} {
		s, err := ReadLabelled(writeTemp(t, c.name, c.content), o)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := summary(s); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if !reflect.DeepEqual(s.Labels.Names(), c.labels) {
			t.Errorf("%s: labels %q, want %q", c.name, s.Labels.Names(), c.labels)
		}
	}
}

func TestReadLabelledBadLines(t *testing.T) {
	o := LabelledOptions{N: 10, Vocab: 128}
	long := strings.Repeat("x", 11)
	for _, c := range []struct {
		name, content string
		line          int
		want          string
	}{
		{"tab.tsv", "a\tok\nno tab here\n", 2, "missing label"},
		{"emptylabel.tsv", "a\tok\n\n\tx\n", 3, "missing label"},
		{"emptytext.tsv", "a\tok\nb\t\n", 2, "empty text"},
		{"emptytextcr.tsv", "a\tok\r\nb\t\r\n", 2, "empty text"},
		{"long.tsv", "a\tok\na\tok\na\t" + long + "\n", 3, "text of 11 bytes is longer than the model's context n = 10"},
		{"vocab.tsv", "a\tok\nb\tok\xc3\xa9\n", 2, "byte 195 at offset 2 is outside the model's vocabulary of 128"},
		{"utf8.tsv", "\xff\tok\n", 1, "not valid UTF-8"},
		{"labellen.tsv", strings.Repeat("L", MaxLabelLen+1) + "\tok\n", 1, "longer than 256"},
		{"one.csv", "a,ok\n\nb\n", 3, "missing label: one field"},
		{"three.csv", "a,ok\nb,x,y\n", 2, "3 fields"},
		{"quote.csv", "a,ok\nb,\"x\n\ny\nc,\"z\"\"\"w\n", 5, "extraneous or missing \" in quoted-field (in the record that starts on line 2)"},
		{"bare.csv", "a,ok\nb,x\"y\n", 2, "bare \""},
		{"emptylabel.csv", "a,ok\n,x\n", 2, "missing label"},
		{"emptytext.csv", "a,ok\n\"b\",\"\"\n", 2, "empty text"},
		{"multiline.csv", "a,\"x\ny\"\nb,\"" + long + "\"\n", 3, "longer than the model's context"},
		{"nolabel.jsonl", "{\"label\":1,\"text\":\"x\"}\n{\"text\":\"x\"}\n", 2, `missing label: no "label" key`},
		{"notext.jsonl", "{\"label\":1,\"text\":\"x\"}\n\n{\"label\":1}\n", 3, `missing text`},
		{"dup.jsonl", "{\"label\":1,\"text\":\"x\"}\n{\"label\":1,\"text\":\"x\",\"label\":2}\n", 2, `key "label" is given twice`},
		{"float.jsonl", "{\"label\":1.5,\"text\":\"x\"}\n", 1, "must be a string or an integer"},
		{"bool.jsonl", "{\"label\":true,\"text\":\"x\"}\n", 1, "must be a string or an integer"},
		{"nulltext.jsonl", "{\"label\":\"a\",\"text\":null}\n", 1, `"text" must be a string`},
		{"numtext.jsonl", "{\"label\":\"a\",\"text\":5}\n", 1, `"text" must be a string`},
		{"emptytext.jsonl", "{\"label\":\"a\",\"text\":\"\"}\n", 1, "empty text"},
		{"emptylabel.jsonl", "{\"label\":\"\",\"text\":\"x\"}\n", 1, "missing label"},
		{"array.jsonl", "{\"label\":\"a\",\"text\":\"x\"}\n[1,2]\n", 2, "not a JSON object"},
		{"null.jsonl", "null\n", 1, "not a JSON object"},
		{"broken.jsonl", "{\"label\":\"a\",\"text\":\"x\"}\n{\"label\":\"a\",\n", 2, "not a JSON object"},
		{"trailing.jsonl", "{\"label\":\"a\",\"text\":\"x\"} {}\n", 1, "not a JSON object"},
	} {
		path := writeTemp(t, c.name, c.content)
		_, err := ReadLabelled(path, o)
		var le *LineError
		if !errors.As(err, &le) || le.Line != c.line || le.Path != path || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want line %d, %q", c.name, err, c.line, c.want)
			continue
		}
		if want := fmt.Sprintf("labelled file %s line %d: ", path, c.line); !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %q does not start with %q", c.name, err, want)
		}
	}
}

func TestTooManyClasses(t *testing.T) {
	var b strings.Builder
	for i := 0; i <= MaxClasses; i++ {
		fmt.Fprintf(&b, "c%d\tx\n", i)
	}
	_, err := ReadLabelled(writeTemp(t, "many.tsv", b.String()), LabelledOptions{N: 4, Vocab: 256})
	var le *LineError
	if !errors.As(err, &le) || le.Line != MaxClasses+1 || !strings.Contains(err.Error(), "at most 4096 classes") {
		t.Fatalf("%d classes: %v", MaxClasses+1, err)
	}
	// Exactly MaxClasses is fine, repeated labels add none.
	b.Reset()
	for i := 0; i < MaxClasses; i++ {
		fmt.Fprintf(&b, "c%d\tx\nc0\ty\n", i)
	}
	s, err := ReadLabelled(writeTemp(t, "max.tsv", b.String()), LabelledOptions{N: 4, Vocab: 256})
	if err != nil || s.Labels.Len() != MaxClasses {
		t.Fatalf("%d classes: %v", MaxClasses, err)
	}
}

func TestReadLabelledFileErrors(t *testing.T) {
	o := LabelledOptions{N: 8, Vocab: 256}
	dir := t.TempDir()
	_, err := ReadLabelled(filepath.Join(dir, "missing.tsv"), o)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.tsv") {
		t.Errorf("missing file: %v", err)
	}
	sub := filepath.Join(dir, "d.tsv")
	os.Mkdir(sub, 0o755)
	if _, err := ReadLabelled(sub, o); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
	if _, err := ReadLabelled(writeTemp(t, "x.txt", "a\tb\n"), o); err == nil || !strings.Contains(err.Error(), ".tsv, .csv or .jsonl") {
		t.Errorf("unknown extension: %v", err)
	}
	if s, err := ReadLabelled(writeTemp(t, "x.txt", "a,b\n"), LabelledOptions{Format: FormatCSV, N: 8, Vocab: 256}); err != nil || summary(s) != "1@0 a=b|" {
		t.Errorf("explicit format: %v", err)
	}
	for _, content := range []string{"", "\n\n", "label\ttext\n"} {
		if _, err := ReadLabelled(writeTemp(t, "e.tsv", content), o); err == nil || !strings.Contains(err.Error(), "no examples") {
			t.Errorf("%q: %v", content, err)
		}
	}
	p := writeTemp(t, "ok.tsv", "a\tb\n")
	if _, err := ReadLabelled(p, LabelledOptions{N: 0, Vocab: 256}); err == nil || !strings.Contains(err.Error(), "n = 0") {
		t.Errorf("n 0: %v", err)
	}
	if _, err := ReadLabelledWith(p, nil, o); err == nil {
		t.Error("no training labels: no error")
	}
	for _, c := range []struct {
		s    string
		f    Format
		fail bool
	}{{"", FormatAuto, false}, {"TSV", FormatTSV, false}, {"jsonl", FormatJSONL, false}, {"json", 0, true}} {
		f, err := ParseFormat(c.s)
		if (err != nil) != c.fail || f != c.f {
			t.Errorf("ParseFormat(%q) = %v, %v", c.s, f, err)
		}
	}
}

func TestEvalLabels(t *testing.T) {
	o := LabelledOptions{N: 16, Vocab: 256}
	train, err := ReadLabelled(writeTemp(t, "train.tsv", "b\tx\na\ty\nb\tz\n"), o)
	if err != nil {
		t.Fatal(err)
	}
	// Classes come from the training file, whatever order the eval file has.
	ev, err := ReadLabelledWith(writeTemp(t, "eval.jsonl", `{"label":"a","text":"p"}`+"\n"+`{"label":"b","text":"q"}`), train.Labels, o)
	if err != nil || summary(ev) != "1@1 a=p|2@0 b=q|" {
		t.Fatalf("eval: %v %s", err, summary(ev))
	}
	path := writeTemp(t, "eval.csv", "a,p\nb,q\n\nc,r\n")
	_, err = ReadLabelledWith(path, train.Labels, o)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 4 || !strings.Contains(err.Error(), `label "c" is not a label of the training data (labels "b", "a")`) || !strings.Contains(err.Error(), path) {
		t.Fatalf("unseen label: %v", err)
	}
	if train.Labels.Len() != 2 {
		t.Fatalf("reading the eval file changed the training labels: %q", train.Labels.Names())
	}
	l, err := NewLabels(train.Labels.Names())
	if err != nil || !reflect.DeepEqual(l.Names(), []string{"b", "a"}) || l.Name(1) != "a" {
		t.Fatalf("NewLabels: %v", err)
	}
	if i, ok := l.Index("a"); !ok || i != 1 {
		t.Fatalf("Index(a) = %d, %v", i, ok)
	}
	if _, ok := l.Index("c"); ok {
		t.Fatal("Index(c) found")
	}
	for _, bad := range [][]string{{"a", "a"}, {"a", ""}, {"\xff"}, make([]string, MaxClasses+1)} {
		if bad[0] == "" {
			for i := range bad {
				bad[i] = fmt.Sprint(i)
			}
		}
		if _, err := NewLabels(bad); err == nil {
			t.Errorf("NewLabels(%d labels %.20q) accepted", len(bad), bad)
		}
	}
}

func TestLabelledSplit(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "%d\ttext %d\n", i%3, i)
	}
	p := writeTemp(t, "all.tsv", b.String())
	d := ClassifyData{Train: p, HeldOut: 0.2, Seed: 5, LabelledOptions: LabelledOptions{N: 16, Vocab: 256}}
	tr, va, err := LoadClassify(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Examples) != 80 || len(va.Examples) != 20 || tr.Labels != va.Labels || tr.Labels.Len() != 3 {
		t.Fatalf("split %d/%d", len(tr.Examples), len(va.Examples))
	}
	seen := map[int]bool{}
	for _, s := range []*LabelledSet{tr, va} {
		last := 0
		for _, e := range s.Examples {
			if e.Line <= last || seen[e.Line] {
				t.Fatalf("line %d out of order or in both parts", e.Line)
			}
			last, seen[e.Line] = e.Line, true
		}
	}
	tr2, va2, _ := LoadClassify(d)
	if summary(tr2) != summary(tr) || summary(va2) != summary(va) {
		t.Fatal("the same seed gave another split")
	}
	d.Seed = 6
	_, va3, _ := LoadClassify(d)
	if summary(va3) == summary(va) {
		t.Fatal("seeds 5 and 6 gave the same split")
	}
	for _, share := range []float64{0, -0.1, 1, 0.001, 0.999} {
		all, _ := ReadLabelled(p, d.LabelledOptions)
		if _, _, err := all.Split(share, 1); err == nil {
			t.Errorf("share %g accepted", share)
		}
	}
	d.Val = writeTemp(t, "v.tsv", "2\tv\n")
	if _, _, err := LoadClassify(d); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("file and share: %v", err)
	}
	d.HeldOut = 0
	tr, va, err = LoadClassify(d)
	if err != nil || len(tr.Examples) != 100 || summary(va) != "1@2 2=v|" {
		t.Errorf("validation file: %v", err)
	}
	d.Val = ""
	if _, va, err = LoadClassify(d); err != nil || va != nil {
		t.Errorf("no validation: %v %v", va, err)
	}
}

func TestWriteLabelledRoundTrip(t *testing.T) {
	ex := []Example{
		{Label: "pos", Text: []byte("a, \"quoted\" text")},
		{Label: "7", Text: []byte("é\ttab")},
		{Label: "neg label", Text: []byte("x")},
	}
	header := []Example{{Label: "label", Text: []byte("text")}, {Label: "b", Text: []byte("y")}}
	for _, f := range []Format{FormatTSV, FormatCSV, FormatJSONL, -FormatTSV, -FormatCSV, -FormatJSONL} {
		ex := ex
		if f < 0 { // an example that reads as a header comes first
			f, ex = -f, header
		}
		var buf bytes.Buffer
		if err := WriteLabelled(&buf, f, ex); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		p := writeTemp(t, "rt."+f.String(), buf.String())
		s, err := ReadLabelled(p, LabelledOptions{N: 64, Vocab: 256})
		if err != nil {
			t.Fatalf("%v: %v\n%s", f, err, buf.String())
		}
		if len(s.Examples) != len(ex) {
			t.Fatalf("%v: %d examples read back, want %d", f, len(s.Examples), len(ex))
		}
		for i, e := range s.Examples {
			if e.Label != ex[i].Label || !bytes.Equal(e.Text, ex[i].Text) || e.Class != i {
				t.Errorf("%v: example %d read back as %q %q", f, i, e.Label, e.Text)
			}
		}
	}
	for _, c := range []struct {
		f  Format
		ex Example
	}{
		{FormatTSV, Example{Label: "a\tb", Text: []byte("x")}},
		{FormatTSV, Example{Label: "a", Text: []byte("x\ny")}},
		{FormatTSV, Example{Label: "", Text: []byte("x")}},
		{FormatCSV, Example{Label: "", Text: []byte("x")}},
		{FormatJSONL, Example{Label: "a", Text: []byte("\xff")}},
		{FormatAuto, Example{Label: "a", Text: []byte("x")}},
	} {
		if err := WriteLabelled(&bytes.Buffer{}, c.f, []Example{c.ex}); err == nil {
			t.Errorf("%v %q %q written", c.f, c.ex.Label, c.ex.Text)
		}
	}
}
