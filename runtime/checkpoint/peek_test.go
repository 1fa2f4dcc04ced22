package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestPeekHeader: the header-only reader agrees with Read on a valid file
// (metadata, names, dtypes, shapes, offsets) and rejects what Read rejects
// in the header and the sizes: a truncated file, trailing bytes, a
// missing file (fs.ErrNotExist).
func TestPeekHeader(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "h.safetensors")
	ts, meta := sample()
	must(t, Write(p, ts, meta))
	full, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := peekTable(p)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got.Metadata) != fmt.Sprint(full.Metadata) || len(got.Tensors) != len(full.Tensors) {
		t.Fatalf("peek %v, read %v", got, full)
	}
	for n, a := range full.Tensors {
		b := got.Tensors[n]
		if b == nil || b.DType != a.DType || fmt.Sprint(b.Shape) != fmt.Sprint(a.Shape) || b.Begin != a.Begin || b.End != a.End {
			t.Errorf("tensor %s: peek %+v, read %+v", n, b, a)
		}
	}
	b, _ := os.ReadFile(p)
	for name, bad := range map[string][]byte{"truncated": b[:len(b)-1], "trailing": append(append([]byte(nil), b...), 0)} {
		q := filepath.Join(dir, name+".safetensors")
		must(t, os.WriteFile(q, bad, 0o644))
		if _, err := peekTable(q); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := Read(q); err == nil {
			t.Errorf("%s: Read accepts it", name)
		}
	}
	if _, err := PeekHeader(filepath.Join(dir, "none.safetensors")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
