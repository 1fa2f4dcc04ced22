package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWrite: a write replaces the file; a failed fill or rename leaves the
// old bytes and no temporary file; a stale temporary file goes; a
// discarded Pending leaves nothing.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.txt")
	put := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	files := func() string {
		es, _ := os.ReadDir(dir)
		var n []string
		for _, e := range es {
			n = append(n, e.Name())
		}
		return strings.Join(n, " ")
	}
	if err := os.WriteFile(filepath.Join(dir, ".f.txt.tmp123"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, put("one")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" || files() != "f.txt" {
		t.Fatalf("after a write: %q, files %s", b, files())
	}
	if err := Write(p, func(io.Writer) error { return errors.New("boom") }); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("failed fill: %v", err)
	}
	restore := SetTestHooks(Hooks{Rename: func(from, to string) error {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: errors.New("no rename")}
	}})
	err := Write(p, put("two"))
	restore()
	if err == nil || !strings.Contains(err.Error(), p) || strings.Contains(err.Error(), ".tmp") || !errors.As(err, new(*os.LinkError)) {
		t.Errorf("failed rename: %v", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" || files() != "f.txt" {
		t.Fatalf("after failures: %q, files %s", b, files())
	}
	pd, err := Stage(p, put("three"))
	if err != nil {
		t.Fatal(err)
	}
	pd.Discard()
	if b, _ := os.ReadFile(p); string(b) != "one" || files() != "f.txt" {
		t.Fatalf("after a discard: %q, files %s", b, files())
	}
	if err := Write(dir, put("x")); err == nil {
		t.Error("writing over a directory: no error")
	}
}
