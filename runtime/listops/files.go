package listops

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/synthgen/synthgen/internal/atomicfile"
	"github.com/synthgen/synthgen/runtime/data"
)

// File is one split written to a labelled file.
type File struct {
	Split string // "train", "val" or "test"
	Path  string
	Stats Stats
}

// Stats describe a split.
type Stats struct {
	Count          int
	MinLen, MaxLen int     // shortest and longest sequence in bytes
	MeanLen        float64 // mean length
	Labels         [10]int // sequences of each value
}

// Describe returns the statistics of ex.
func Describe(ex []Example) Stats {
	s := Stats{Count: len(ex)}
	total := 0
	for i, e := range ex {
		l := len(e.Text)
		if i == 0 || l < s.MinLen {
			s.MinLen = l
		}
		s.MaxLen = max(s.MaxLen, l)
		total += l
		s.Labels[e.Value]++
	}
	if len(ex) > 0 {
		s.MeanLen = float64(total) / float64(len(ex))
	}
	return s
}

// FileName is the name of split's file in format f: "train.tsv",
// "val.csv", "test.jsonl".
func FileName(split string, f data.Format) string { return split + "." + f.String() }

// CheckFiles checks, before a set is generated, that WriteFiles could
// write splits of counts c to dir in format f: the format is known, the
// files are absent (or, with overwrite, regular files) and dir is a folder
// or absent.
func CheckFiles(dir string, c Counts, f data.Format, overwrite bool) error {
	_, err := checkFiles(dir, c, f, overwrite)
	return err
}

// checkFiles is CheckFiles, returning the format (TSV for FormatAuto).
func checkFiles(dir string, c Counts, f data.Format, overwrite bool) (data.Format, error) {
	if f == data.FormatAuto {
		f = data.FormatTSV
	}
	if _, err := data.FormatOf("", f); err != nil {
		return 0, fmt.Errorf("listops files: %w", err)
	}
	if dir == "" {
		return 0, errors.New("listops files: no output folder given")
	}
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		kind := "a file"
		if !fi.Mode().IsRegular() {
			kind = atomicfile.FileKind(fi.Mode())
		}
		return 0, fmt.Errorf("listops files: output folder %s is %s, not a folder", dir, kind)
	} else if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			return 0, fmt.Errorf("listops files: output folder: %w", err)
		}
		return f, nil // created by WriteFiles
	}
	for _, sp := range []struct {
		name string
		n    int
	}{{"train", c.Train}, {"val", c.Val}, {"test", c.Test}} {
		if sp.n == 0 {
			continue
		}
		p := filepath.Join(dir, FileName(sp.name, f))
		if err := atomicfile.CheckOutput(p); err != nil {
			return 0, err
		}
		if !overwrite {
			if _, err := os.Lstat(p); err == nil {
				return 0, fmt.Errorf("output %s exists: replace it with -force, or choose another folder", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return 0, fmt.Errorf("output %s: %w", p, err)
			}
		}
	}
	return f, nil
}

// WriteFiles writes the non-empty splits of s to dir (created if absent)
// as labelled files in format f (TSV, CSV or JSON Lines): the label is the
// value's digit, the text the sequence. An existing file is replaced only
// with overwrite; without it, any existing target is an error and nothing
// is written. All files are staged before any is renamed into place, so a
// failed write changes nothing.
func WriteFiles(dir string, s *Splits, f data.Format, overwrite bool) ([]File, error) {
	f, err := checkFiles(dir, Counts{len(s.Train), len(s.Val), len(s.Test)}, f, overwrite)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("listops files: output folder: %w", err)
	}
	var files []File
	var examples [][]data.Example
	for _, sp := range []struct {
		name string
		ex   []Example
	}{{"train", s.Train}, {"val", s.Val}, {"test", s.Test}} {
		if len(sp.ex) == 0 {
			continue
		}
		p := filepath.Join(dir, FileName(sp.name, f))
		ex := make([]data.Example, len(sp.ex))
		for i, e := range sp.ex {
			ex[i] = data.Example{Label: strconv.Itoa(e.Value), Class: e.Value, Text: e.Text}
		}
		files = append(files, File{Split: sp.name, Path: p, Stats: Describe(sp.ex)})
		examples = append(examples, ex)
	}
	var staged []*atomicfile.Pending
	defer func() {
		for _, p := range staged {
			p.Discard()
		}
	}()
	for i, file := range files {
		p, err := atomicfile.Stage(file.Path, func(w io.Writer) error { return data.WriteLabelled(w, f, examples[i]) })
		if err != nil {
			return nil, err
		}
		staged = append(staged, p)
	}
	for len(staged) > 0 {
		if err := staged[0].Commit(); err != nil {
			return nil, err
		}
		staged = staged[1:]
	}
	return files, nil
}
