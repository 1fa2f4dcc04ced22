package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/internal/atomicfile"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// failingWriter fails with ENOSPC once it has accepted left bytes, as a
// file system that fills up does.
type failingWriter struct {
	w    io.Writer
	left int
}

func (f *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= f.left {
		f.left -= len(p)
		return f.w.Write(p)
	}
	n, _ := f.w.Write(p[:f.left])
	f.left = 0
	return n, &os.PathError{Op: "write", Path: "tmp", Err: syscall.ENOSPC}
}

// failAt makes the atomic writes of the file named base fail after limit
// bytes, until the test ends.
func failAt(t *testing.T, base string, limit int) {
	t.Helper()
	t.Cleanup(atomicfile.SetTestHooks(atomicfile.Hooks{Wrap: func(path string, w io.Writer) io.Writer {
		if filepath.Base(path) == base {
			return &failingWriter{w: w, left: limit}
		}
		return w
	}}))
}

// runState is a model and optimizer whose contents depend on step, so that
// the files of different steps differ in every tensor.
func runState(t *testing.T, m *model.Model, o *optim.AdamW, step int) {
	t.Helper()
	for i, p := range m.Params {
		for j := range p.Data {
			p.Data[j] = float32(step) + float32(j%7)*1e-3
		}
		if o.M[i] != nil {
			for j := range o.M[i] {
				o.M[i][j] = float32(step) * 1e-2
				o.V[i][j] = float32(step) * 1e-4
			}
		}
	}
	o.Steps = step
}

// dirFiles lists the names in dir, sorted.
func dirFiles(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// checkPair checks that the checkpoint at path is at step want and that
// ResolveOpt finds an optimizer state of that step which loads.
func checkPair(t *testing.T, path string, m *model.Model, want int) {
	t.Helper()
	got, err := FileStep(path)
	if err != nil || got != want {
		t.Fatalf("checkpoint step %d (%v), want %d", got, err, want)
	}
	// The state must load beside the checkpoint's weights (it is bound to
	// them), not m's, which may already be of a later step.
	lm, _, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := ResolveOptFor(path, want, WeightsSum(lm))
	if err != nil || op == "" {
		t.Fatalf("ResolveOpt: %q, %v", op, err)
	}
	o := optim.NewAdamW(lm.Params, optim.DefaultConfig())
	if _, err := LoadOpt(op, lm, o, want); err != nil {
		t.Fatal(err)
	}
	if o.Steps != want {
		t.Fatalf("optimizer state of %s has %d steps, want %d", op, o.Steps, want)
	}
}

// TestSaveRunBytes: SaveRun writes exactly the bytes of SaveOpt and Save
// and leaves only those two files.
func TestSaveRunBytes(t *testing.T) {
	m := newModel(t, "small", 1)
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	runState(t, m, o, 3)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	extra := map[string]string{"k": "v"}
	if err := Save(a, m, 3); err != nil {
		t.Fatal(err)
	}
	if err := SaveOpt(OptPath(a), m, o, 3, extra); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // a second save over the first
		if err := SaveRun(b, m, o, 3, extra); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range [][2]string{{a, b}, {OptPath(a), OptPath(b)}} {
		x, _ := os.ReadFile(p[0])
		y, _ := os.ReadFile(p[1])
		if !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ", p[0], p[1])
		}
	}
	want := []string{"a.opt.safetensors", "a.safetensors", "b.opt.safetensors", "b.safetensors"}
	if got := dirFiles(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// TestSaveRunInterrupted stops a save of step 6 over a pair of step 5 at
// each of its instants (by building the files each instant leaves) and
// checks that a consistent pair is found, then that the next save
// completes and removes the backup.
func TestSaveRunInterrupted(t *testing.T) {
	m := newModel(t, "small", 1)
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	for instant := 0; instant < 4; instant++ {
		t.Run(fmt.Sprint(instant), func(t *testing.T) {
			dir := t.TempDir()
			p := filepath.Join(dir, "r.safetensors")
			runState(t, m, o, 5)
			if err := SaveRun(p, m, o, 5, nil); err != nil {
				t.Fatal(err)
			}
			runState(t, m, o, 6)
			want := 5
			switch instant {
			case 0: // the state moved aside, nothing else
				must(t, os.Rename(OptPath(p), OptPrevPath(p)))
			case 1: // the new state written
				must(t, os.Rename(OptPath(p), OptPrevPath(p)))
				must(t, SaveOpt(OptPath(p), m, o, 6, nil))
			case 2: // the new checkpoint written, the backup not yet removed
				must(t, os.Rename(OptPath(p), OptPrevPath(p)))
				must(t, SaveOpt(OptPath(p), m, o, 6, nil))
				must(t, Save(p, m, 6))
				want = 6
			case 3: // a temporary file of each left by a kill
				for _, name := range []string{".r.safetensors.tmp123", ".r.opt.safetensors.tmp9"} {
					must(t, os.WriteFile(filepath.Join(dir, name), []byte("partial"), 0o644))
				}
			}
			checkPair(t, p, m, want)
			// A resumed run saves the next step (the interrupted one again).
			runState(t, m, o, 6)
			must(t, SaveRun(p, m, o, 6, nil))
			checkPair(t, p, m, 6)
			if got := dirFiles(t, dir); fmt.Sprint(got) != "[r.opt.safetensors r.safetensors]" {
				t.Errorf("files after the next save: %v", got)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveOptMismatch: a state of another step with no backup is an
// error naming both files and steps and saying how to resume without it; a
// missing state is "", no error.
func TestResolveOptMismatch(t *testing.T) {
	m := newModel(t, "small", 1)
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	dir := t.TempDir()
	p := filepath.Join(dir, "m.safetensors")
	must(t, Save(p, m, 4))
	if op, note, err := ResolveOpt(p, 4); op != "" || note != "" || err != nil {
		t.Errorf("no state: %q %q %v", op, note, err)
	}
	must(t, SaveOpt(OptPath(p), m, o, 5, nil))
	_, _, err := ResolveOpt(p, 4)
	if err == nil {
		t.Fatal("a state of step 5 beside a checkpoint of step 4 resolved")
	}
	for _, want := range []string{OptPath(p), "step 5", "step 4", "move " + OptPath(p) + " aside", "weights alone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	must(t, os.WriteFile(OptPath(p), []byte("garbage"), 0o644))
	if _, _, err := ResolveOpt(p, 4); err == nil || !strings.Contains(err.Error(), OptPath(p)) {
		t.Errorf("unreadable state: %v", err)
	}
}

// TestDiskFull: a write that fails part-way (ENOSPC) in either file, at
// several offsets, returns a clear error, leaves the previous pair intact
// and loadable, and leaves no temporary or backup file.
func TestDiskFull(t *testing.T) {
	m := newModel(t, "small", 1)
	o := optim.NewAdamW(m.Params, optim.DefaultConfig())
	dir := t.TempDir()
	p := filepath.Join(dir, "d.safetensors")
	runState(t, m, o, 1)
	must(t, SaveRun(p, m, o, 1, nil))
	before, _ := os.ReadFile(p)
	beforeOpt, _ := os.ReadFile(OptPath(p))
	for _, base := range []string{"d.opt.safetensors", "d.safetensors"} {
		for _, limit := range []int{0, 7, 8, 100, 4096, 65536, 65537, 300000} {
			failAt(t, base, limit)
			runState(t, m, o, 2)
			err := SaveRun(p, m, o, 2, nil)
			atomicfile.SetTestHooks(atomicfile.Hooks{})
			if err == nil {
				t.Fatalf("%s failing after %d bytes: no error", base, limit)
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), base) || !strings.Contains(err.Error(), "disk full") {
				t.Errorf("%s failing after %d bytes: error %q", base, limit, err)
			}
			if b, _ := os.ReadFile(p); !bytes.Equal(b, before) {
				t.Fatalf("%s failing after %d bytes: the checkpoint changed", base, limit)
			}
			if b, _ := os.ReadFile(OptPath(p)); !bytes.Equal(b, beforeOpt) {
				t.Fatalf("%s failing after %d bytes: the optimizer state changed", base, limit)
			}
			if got := dirFiles(t, dir); fmt.Sprint(got) != "[d.opt.safetensors d.safetensors]" {
				t.Fatalf("%s failing after %d bytes: files %v", base, limit, got)
			}
			checkPair(t, p, m, 1)
		}
	}
	// The disk has room again: the save goes through.
	runState(t, m, o, 2)
	must(t, SaveRun(p, m, o, 2, nil))
	checkPair(t, p, m, 2)
}

// TestWriteAtomicStaleTemps: the next write of a file removes the
// temporary files of that file a killed writer left, and nothing else.
func TestWriteAtomicStaleTemps(t *testing.T) {
	dir := t.TempDir()
	keep := []string{".x.safetensors.tmp", ".x.safetensors.tmp12a", ".y.safetensors.tmp123", "x.safetensors.tmp123", ".x.safetensors.tmp1.bak"}
	stale := []string{".x.safetensors.tmp1", ".x.safetensors.tmp4242424242"}
	for _, n := range append(keep, stale...) {
		must(t, os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644))
	}
	ts, meta := sample()
	must(t, Write(filepath.Join(dir, "x.safetensors"), ts, meta))
	want := append(append([]string(nil), keep...), "x.safetensors")
	sort.Strings(want)
	if got := dirFiles(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// TestReadMetadata: the header-only reader agrees with Read on a valid
// file and rejects forged lengths before allocating.
func TestReadMetadata(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "h.safetensors")
	ts, meta := sample()
	must(t, Write(p, ts, meta))
	got, err := ReadMetadata(p)
	if err != nil || fmt.Sprint(got) != fmt.Sprint(meta) {
		t.Errorf("ReadMetadata: %v, %v; want %v", got, err, meta)
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte{1, 2}, "shorter than"},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'}, "exceeds"},
		{[]byte{0, 0, 0, 0x10, 0, 0, 0, 0, '{', '}'}, "exceeds"},
		{[]byte{200, 0, 0, 0, 0, 0, 0, 0, '{', '}'}, "runs past the end"},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0, '[', ']'}, "not a JSON object"},
		{[]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '{'}, "header JSON"},
	} {
		must(t, os.WriteFile(p, c.b, 0o644))
		_, err := ReadMetadata(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: %v, want %q", c.b, err, c.want)
		}
	}
	if _, err := FileStep(filepath.Join(dir, "none.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// TestReadNotRegular: a device or pipe is refused before anything is read
// (/dev/zero would never end).
func TestReadNotRegular(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	if _, err := Read("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: not a regular file") {
		t.Errorf("Read(/dev/zero): %v", err)
	}
	if _, err := ReadMetadata("/dev/zero"); err == nil || !strings.Contains(err.Error(), "/dev/zero: not a regular file") {
		t.Errorf("ReadMetadata(/dev/zero): %v", err)
	}
}
