package data

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadFileStream: a pipe is read to its end (it has no size), and a
// device that never ends is cut off with an error instead of exhausting
// memory (checked on a FIFO only: /dev/zero would take a GiB).
func TestReadFileStream(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	go func() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		f.WriteString("streamed text")
		f.Close()
	}()
	b, err := ReadFile(p)
	if err != nil || string(b) != "streamed text" {
		t.Fatalf("%q, %v", b, err)
	}
	if _, err := ReadFile(filepath.Dir(p)); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("directory: %v", err)
	}
}
