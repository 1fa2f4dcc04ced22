package listops

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/internal/atomicfile"
	"github.com/synthgen/synthgen/runtime/data"
)

// failAfter fails writes to the files whose name holds match.
type failAfter struct {
	w     io.Writer
	match bool
}

func (f *failAfter) Write(p []byte) (int, error) {
	if f.match {
		return 0, errors.New("disk full")
	}
	return f.w.Write(p)
}

func TestWriteFiles(t *testing.T) {
	s, err := Generate(9, Options{MinLen: 10, MaxLen: 80}, Counts{Train: 300, Val: 0, Test: 40})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "new", "folder")
	files, err := WriteFiles(dir, s, data.FormatAuto, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != filepath.Join(dir, "train.tsv") || files[1].Path != filepath.Join(dir, "test.tsv") {
		t.Fatalf("files %+v", files)
	}
	if _, err := os.Stat(filepath.Join(dir, "val.tsv")); err == nil {
		t.Error("an empty split was written")
	}
	st := files[0].Stats
	sum := 0
	for _, n := range st.Labels {
		sum += n
	}
	if st.Count != 300 || sum != 300 || st.MinLen < 10 || st.MaxLen > 80 || st.MeanLen < float64(st.MinLen) || st.MeanLen > float64(st.MaxLen) {
		t.Errorf("stats %+v", st)
	}
	// The file is the examples, label<TAB>text a line, in order.
	var want bytes.Buffer
	for _, e := range s.Train {
		want.WriteString(strconv.Itoa(e.Value) + "\t" + string(e.Text) + "\n")
	}
	got, _ := os.ReadFile(files[0].Path)
	if !bytes.Equal(got, want.Bytes()) {
		t.Error("train.tsv is not the training split")
	}

	// Without overwrite an existing file is an error; with it, replaced.
	if _, err := WriteFiles(dir, s, data.FormatTSV, false); err == nil || !strings.Contains(err.Error(), "train.tsv exists") {
		t.Errorf("existing file: %v", err)
	}
	if _, err := WriteFiles(dir, s, data.FormatTSV, true); err != nil {
		t.Errorf("overwrite: %v", err)
	}

	// A failed write of the second file commits neither.
	dir2 := t.TempDir()
	restore := atomicfile.SetTestHooks(atomicfile.Hooks{Wrap: func(path string, w io.Writer) io.Writer {
		return &failAfter{w: w, match: strings.HasSuffix(path, "test.csv")}
	}})
	_, err = WriteFiles(dir2, s, data.FormatCSV, false)
	restore()
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failed write: %v", err)
	}
	if ents, _ := os.ReadDir(dir2); len(ents) != 0 {
		t.Errorf("a failed write left %d files, first %s", len(ents), ents[0].Name())
	}

	// A directory in a file's place is refused.
	dir3 := t.TempDir()
	os.Mkdir(filepath.Join(dir3, "train.jsonl"), 0o755)
	if _, err := WriteFiles(dir3, s, data.FormatJSONL, true); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as output: %v", err)
	}
	if _, err := WriteFiles("", s, data.FormatTSV, true); err == nil {
		t.Error("no folder: no error")
	}
	if _, err := WriteFiles(dir3, s, data.Format(9), true); err == nil {
		t.Error("unknown format: no error")
	}
}
