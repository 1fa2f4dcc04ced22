package data

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/synthgen/synthgen/internal/jsonkeys"
)

// Labelled text files: one example a line (a CSV record may span lines),
// a label and a text, for classification.
//
//	TSV   label<TAB>text             the text is the rest of the line, raw bytes
//	CSV   label,text                 RFC 4180 quoting (encoding/csv); exactly two fields
//	JSONL {"label": …, "text": …}    label a string or an integer; other keys ignored
//
// Blank lines are skipped, as is a first record that reads exactly
// "label<TAB>text" (TSV) or "label,text" (CSV): a header. A UTF-8 byte order
// mark at the start of the file is dropped; a line's final "\r" (TSV,
// JSONL) too. Labels are mapped to classes in order of first appearance.

// Format is the format of a labelled file.
type Format int

// The formats of labelled files.
const (
	FormatAuto  Format = iota // by the file name's extension
	FormatTSV                 // .tsv: label<TAB>text
	FormatCSV                 // .csv: label,text
	FormatJSONL               // .jsonl: {"label": …, "text": …}
)

var formatNames = [...]string{"auto", "tsv", "csv", "jsonl"}

func (f Format) String() string {
	if f < 0 || int(f) >= len(formatNames) {
		return fmt.Sprintf("Format(%d)", int(f))
	}
	return formatNames[f]
}

// ParseFormat parses a format name: auto (or ""), tsv, csv or jsonl.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return FormatAuto, nil
	}
	for i, n := range formatNames {
		if strings.EqualFold(s, n) {
			return Format(i), nil
		}
	}
	return 0, fmt.Errorf("format %q: must be one of %s", s, strings.Join(formatNames[:], ", "))
}

// FormatOf returns the format f names, or for FormatAuto the one path's
// extension names (.tsv, .csv, .jsonl, any case).
func FormatOf(path string, f Format) (Format, error) {
	if f != FormatAuto {
		if f < 0 || int(f) >= len(formatNames) {
			return 0, fmt.Errorf("labelled file %s: unknown %v", path, f)
		}
		return f, nil
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".tsv":
		return FormatTSV, nil
	case ".csv":
		return FormatCSV, nil
	case ".jsonl":
		return FormatJSONL, nil
	}
	return 0, fmt.Errorf("labelled file %s: cannot tell the format from the extension %q: name it .tsv, .csv or .jsonl, or give the format", path, filepath.Ext(path))
}

// Limits of labelled files.
const (
	MaxClasses  = 4096 // most distinct labels (the model card's bound)
	MaxLabelLen = 256  // longest label in bytes
)

// Labels are the class names: label strings mapped to class indices
// 0, 1, … in order of first appearance in the training file.
type Labels struct {
	names []string
	index map[string]int
}

// NewLabels returns the labels names in class order (as a checkpoint's
// "labels" metadata holds them), checking each as a file's label is
// checked and that none is given twice.
func NewLabels(names []string) (*Labels, error) {
	l := &Labels{index: map[string]int{}}
	for i, n := range names {
		if err := checkLabel(n); err != nil {
			return nil, fmt.Errorf("labels: class %d: %w", i, err)
		}
		if _, dup := l.index[n]; dup {
			return nil, fmt.Errorf("labels: label %q is given twice", n)
		}
		if _, err := l.add(n); err != nil {
			return nil, fmt.Errorf("labels: %w", err)
		}
	}
	return l, nil
}

// Len is the number of classes.
func (l *Labels) Len() int { return len(l.names) }

// Names returns the labels in class order (a copy).
func (l *Labels) Names() []string { return slices.Clone(l.names) }

// Name is the label of class i ("" when i is not a class).
func (l *Labels) Name(i int) string {
	if i < 0 || i >= len(l.names) {
		return ""
	}
	return l.names[i]
}

// Index returns the class of label and whether it is one.
func (l *Labels) Index(label string) (int, bool) {
	i, ok := l.index[label]
	return i, ok
}

// add returns label's class, adding it as a new class if it is new.
func (l *Labels) add(label string) (int, error) {
	if i, ok := l.index[label]; ok {
		return i, nil
	}
	if len(l.names) >= MaxClasses {
		return 0, fmt.Errorf("label %q would be class %d: at most %d classes", label, len(l.names)+1, MaxClasses)
	}
	if l.index == nil {
		l.index = map[string]int{}
	}
	l.index[label] = len(l.names)
	l.names = append(l.names, label)
	return len(l.names) - 1, nil
}

// checkLabel checks a label: non-empty, UTF-8 (it is saved as JSON), at
// most MaxLabelLen bytes.
func checkLabel(s string) error {
	switch {
	case s == "":
		return errors.New("missing label (empty)")
	case !utf8.ValidString(s):
		return fmt.Errorf("label %q is not valid UTF-8", s)
	case len(s) > MaxLabelLen:
		return fmt.Errorf("label of %d bytes is longer than %d", len(s), MaxLabelLen)
	}
	return nil
}

// Example is one labelled text.
type Example struct {
	Line  int    // the line of the file it starts on, from 1
	Label string // its label
	Class int    // its label's class
	Text  []byte // its text, 1 to n bytes
}

// LabelledSet is the examples of a labelled file (or a part of one).
type LabelledSet struct {
	Path     string
	Labels   *Labels // the classes of Examples' Class
	Examples []Example
}

// LabelledOptions say how to read a labelled file.
type LabelledOptions struct {
	Format Format // FormatAuto: by the extension
	N      int    // the longest text in bytes allowed: the model's context n (≥ 1)
	Vocab  int    // the model's vocabulary: every text byte must be < Vocab (256: any byte)
}

// LineError is a bad line of a labelled file.
type LineError struct {
	Path string
	Line int // from 1
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("labelled file %s line %d: %v", e.Path, e.Line, e.Err)
}
func (e *LineError) Unwrap() error { return e.Err }

// ReadLabelled reads a training file: its labels become the classes, in
// order of first appearance.
func ReadLabelled(path string, o LabelledOptions) (*LabelledSet, error) {
	return readLabelled(path, &Labels{}, true, o)
}

// ReadLabelledWith reads an evaluation or validation file, mapping its
// labels through the training labels: a label that is not one of them is
// an error naming the file, the line and the label.
func ReadLabelledWith(path string, labels *Labels, o LabelledOptions) (*LabelledSet, error) {
	if labels == nil || labels.Len() == 0 {
		return nil, fmt.Errorf("labelled file %s: no training labels to map its labels through", path)
	}
	return readLabelled(path, labels, false, o)
}

// readLabelled reads path, adding new labels to labels when grow is set.
func readLabelled(path string, labels *Labels, grow bool, o LabelledOptions) (*LabelledSet, error) {
	if o.N < 1 {
		return nil, fmt.Errorf("labelled file %s: the longest text n = %d must be ≥ 1", path, o.N)
	}
	if o.Vocab < 1 {
		return nil, fmt.Errorf("labelled file %s: vocabulary %d must be ≥ 1", path, o.Vocab)
	}
	f, err := FormatOf(path, o.Format)
	if err != nil {
		return nil, err
	}
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := parseLabelled(path, b, f, labels, grow, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// parseLabelled parses the bytes b of the labelled file path.
func parseLabelled(path string, b []byte, f Format, labels *Labels, grow bool, o LabelledOptions) (*LabelledSet, error) {
	s := &LabelledSet{Path: path, Labels: labels}
	b = bytes.TrimPrefix(b, []byte("\uFEFF"))
	add := func(line int, label string, text []byte) error {
		lineErr := func(err error) error { return &LineError{Path: path, Line: line, Err: err} }
		if err := checkLabel(label); err != nil {
			return lineErr(err)
		}
		if len(text) == 0 {
			return lineErr(errors.New("empty text"))
		}
		if len(text) > o.N {
			return lineErr(fmt.Errorf("text of %d bytes is longer than the model's context n = %d", len(text), o.N))
		}
		if err := CheckVocab("text", text, o.Vocab); err != nil {
			return lineErr(err)
		}
		var c int
		if grow {
			var err error
			if c, err = labels.add(label); err != nil {
				return lineErr(err)
			}
		} else {
			var ok bool
			if c, ok = labels.Index(label); !ok {
				return lineErr(fmt.Errorf("label %q is not a label of the training data (%s)", label, labelList(labels)))
			}
		}
		s.Examples = append(s.Examples, Example{Line: line, Label: label, Class: c, Text: text})
		return nil
	}
	var err error
	switch f {
	case FormatTSV:
		err = parseTSV(path, b, add)
	case FormatCSV:
		err = parseCSV(path, b, add)
	case FormatJSONL:
		err = parseJSONL(path, b, add)
	default:
		err = fmt.Errorf("labelled file %s: unknown %v", path, f)
	}
	if err != nil {
		return nil, err
	}
	if len(s.Examples) == 0 {
		return nil, fmt.Errorf("labelled file %s: no examples", path)
	}
	return s, nil
}

// labelList names the labels for an error message (the first ten).
func labelList(l *Labels) string {
	const show = 10
	q := make([]string, 0, show)
	for i, n := range l.names {
		if i == show {
			break
		}
		q = append(q, strconv.Quote(n))
	}
	s := "labels " + strings.Join(q, ", ")
	if l.Len() > show {
		s += fmt.Sprintf(" and %d more", l.Len()-show)
	}
	return s
}

// lines calls fn with each line of b and its number, without the newline
// and a final "\r"; blank lines are skipped.
func lines(b []byte, fn func(line int, s []byte) error) error {
	for n := 1; len(b) > 0; n++ {
		s, rest, _ := bytes.Cut(b, []byte{'\n'})
		b = rest
		s = bytes.TrimSuffix(s, []byte{'\r'})
		if len(s) == 0 {
			continue
		}
		if err := fn(n, s); err != nil {
			return err
		}
	}
	return nil
}

// isHeader reports whether the first record of a TSV or CSV file is the
// header "label", "text" (WriteLabelled writes one before an example that
// reads so, so that the example is not taken for a header).
func isHeader(label string, text []byte) bool { return label == "label" && string(text) == "text" }

func parseTSV(path string, b []byte, add func(int, string, []byte) error) error {
	first := true
	return lines(b, func(n int, s []byte) error {
		label, text, ok := bytes.Cut(s, []byte{'\t'})
		if !ok {
			return &LineError{Path: path, Line: n, Err: errors.New("missing label: no tab between a label and the text")}
		}
		if first && isHeader(string(label), text) {
			first = false
			return nil
		}
		first = false
		return add(n, string(label), text)
	})
}

func parseCSV(path string, b []byte, add func(int, string, []byte) error) error {
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	for first := true; ; first = false {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				err := pe.Err
				if pe.StartLine != pe.Line {
					err = fmt.Errorf("%w (in the record that starts on line %d)", err, pe.StartLine)
				}
				return &LineError{Path: path, Line: pe.Line, Err: err}
			}
			return fmt.Errorf("labelled file %s: %w", path, err)
		}
		line, _ := r.FieldPos(0)
		switch {
		case len(rec) == 1:
			return &LineError{Path: path, Line: line, Err: errors.New("missing label: one field, want label,text")}
		case len(rec) > 2:
			return &LineError{Path: path, Line: line, Err: fmt.Errorf("%d fields, want 2: label,text (quote a text that holds commas)", len(rec))}
		}
		if first && isHeader(rec[0], []byte(rec[1])) {
			continue
		}
		if err := add(line, rec[0], []byte(rec[1])); err != nil {
			return err
		}
	}
}

func parseJSONL(path string, b []byte, add func(int, string, []byte) error) error {
	return lines(b, func(n int, s []byte) error {
		s = bytes.TrimSpace(s)
		if len(s) == 0 {
			return nil
		}
		bad := func(err error) error { return &LineError{Path: path, Line: n, Err: err} }
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(s, &obj); err != nil {
			return bad(fmt.Errorf("not a JSON object: %w", err))
		}
		if obj == nil {
			return bad(errors.New("not a JSON object: null"))
		}
		if err := jsonkeys.Check(s); err != nil {
			return bad(err)
		}
		rawLabel, ok := obj["label"]
		if !ok {
			return bad(errors.New(`missing label: no "label" key`))
		}
		label, err := jsonLabel(rawLabel)
		if err != nil {
			return bad(err)
		}
		rawText, ok := obj["text"]
		if !ok {
			return bad(errors.New(`missing text: no "text" key`))
		}
		var text string
		if err := json.Unmarshal(rawText, &text); err != nil || bytes.Equal(rawText, []byte("null")) {
			return bad(fmt.Errorf(`"text" must be a string, not %s`, rawText))
		}
		return add(n, label, []byte(text))
	})
}

// jsonLabel reads a JSON label: a string, or an integer kept as its
// decimal string (7 and "7" are the same label).
func jsonLabel(raw json.RawMessage) (string, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf(`"label": %w`, err)
		}
		return s, nil
	}
	i, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return "", fmt.Errorf(`"label" must be a string or an integer, not %s`, raw)
	}
	return strconv.FormatInt(i, 10), nil
}

// Split returns s cut into a training part and a held-out part of
// round(share·len) examples, chosen by a permutation drawn from seed alone
// (the same seed gives the same parts); each part keeps the file's order
// and s's labels. share must be in (0, 1) and leave both parts non-empty.
func (s *LabelledSet) Split(share float64, seed uint64) (train, held *LabelledSet, err error) {
	if !(share > 0 && share < 1) {
		return nil, nil, fmt.Errorf("labelled file %s: held-out share %g must be in (0, 1)", s.Path, share)
	}
	k := int(share*float64(len(s.Examples)) + 0.5)
	if k < 1 || k >= len(s.Examples) {
		return nil, nil, fmt.Errorf("labelled file %s: a held-out share of %g of %d examples leaves %d held out and %d for training: both must be ≥ 1",
			s.Path, share, len(s.Examples), k, len(s.Examples)-k)
	}
	rng := rand.New(rand.NewPCG(seed, 0x68656c646f7574)) // "heldout"
	out := make([]bool, len(s.Examples))
	for _, i := range rng.Perm(len(s.Examples))[:k] {
		out[i] = true
	}
	train = &LabelledSet{Path: s.Path, Labels: s.Labels}
	held = &LabelledSet{Path: s.Path, Labels: s.Labels}
	for i, e := range s.Examples {
		if out[i] {
			held.Examples = append(held.Examples, e)
		} else {
			train.Examples = append(train.Examples, e)
		}
	}
	return train, held, nil
}

// ClassifyData names the data of a classification run.
type ClassifyData struct {
	Train   string  // the training file
	Val     string  // a validation file, or ""
	HeldOut float64 // without Val: the share of Train held out for validation (0: none)
	Seed    uint64  // the seed of the held-out split
	LabelledOptions
}

// LoadClassify reads the training file and the validation data: the
// validation file mapped through the training labels, or the held-out
// share of the training file, or none (val nil).
func LoadClassify(d ClassifyData) (train, val *LabelledSet, err error) {
	if d.Val != "" && d.HeldOut != 0 {
		return nil, nil, fmt.Errorf("a validation file (%s) and a held-out share (%g): give one", d.Val, d.HeldOut)
	}
	train, err = ReadLabelled(d.Train, d.LabelledOptions)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case d.Val != "":
		val, err = ReadLabelledWith(d.Val, train.Labels, d.LabelledOptions)
	case d.HeldOut != 0:
		train, val, err = train.Split(d.HeldOut, d.Seed)
	}
	if err != nil {
		return nil, nil, err
	}
	return train, val, nil
}

// WriteLabelled writes examples (their Label and Text) in format f (not
// FormatAuto). A label or text the format cannot hold is an error: in TSV
// a tab in a label or a newline anywhere; in JSON Lines a text that is not
// UTF-8.
func WriteLabelled(w io.Writer, f Format, ex []Example) error {
	switch f {
	case FormatTSV:
		var buf []byte
		if len(ex) > 0 && isHeader(ex[0].Label, ex[0].Text) {
			if _, err := io.WriteString(w, "label\ttext\n"); err != nil {
				return err
			}
		}
		for i, e := range ex {
			if err := checkLabel(e.Label); err != nil {
				return fmt.Errorf("example %d: %w", i+1, err)
			}
			if strings.ContainsAny(e.Label, "\t\n\r") || bytes.ContainsAny(e.Text, "\n\r") {
				return fmt.Errorf("example %d: TSV cannot hold a tab in a label or a line break", i+1)
			}
			buf = append(append(append(append(buf[:0], e.Label...), '\t'), e.Text...), '\n')
			if _, err := w.Write(buf); err != nil {
				return err
			}
		}
		return nil
	case FormatCSV:
		cw := csv.NewWriter(w)
		if len(ex) > 0 && isHeader(ex[0].Label, ex[0].Text) {
			cw.Write([]string{"label", "text"})
		}
		for i, e := range ex {
			if err := checkLabel(e.Label); err != nil {
				return fmt.Errorf("example %d: %w", i+1, err)
			}
			if err := cw.Write([]string{e.Label, string(e.Text)}); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	case FormatJSONL:
		for i, e := range ex {
			if err := checkLabel(e.Label); err != nil {
				return fmt.Errorf("example %d: %w", i+1, err)
			}
			if !utf8.Valid(e.Text) {
				return fmt.Errorf("example %d: JSON Lines holds UTF-8 texts only", i+1)
			}
			line, err := json.Marshal(struct {
				Label string `json:"label"`
				Text  string `json:"text"`
			}{e.Label, string(e.Text)})
			if err != nil {
				return err
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("write labelled: unknown %v", f)
}
