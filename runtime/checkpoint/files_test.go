package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/optim"
)

// mkfifo makes a FIFO at p, or skips the test where it cannot.
func mkfifo(t *testing.T, p string) {
	t.Helper()
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// within fails t if f does not return within a few seconds (a FIFO opened
// for reading blocks until a writer comes).
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s hangs", what)
	}
}

// TestCheckOutput: an output must be absent or a regular file (or a link
// to one), never a directory, FIFO, socket or device or a link to one, nor
// one of the inputs.
func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg.safetensors")
	must(t, os.WriteFile(reg, []byte("x"), 0o644))
	fifo := filepath.Join(dir, "fifo")
	mkfifo(t, fifo)
	sock := filepath.Join(dir, "sock")
	if l, err := net.Listen("unix", sock); err == nil {
		defer l.Close()
	} else {
		sock = ""
	}
	link := func(name, target string) string {
		p := filepath.Join(dir, name)
		must(t, os.Symlink(target, p))
		return p
	}
	hard := filepath.Join(dir, "hard.txt")
	must(t, os.Link(reg, hard))

	for _, c := range []struct {
		path   string
		inputs []string
		want   string // "" for no error
	}{
		{filepath.Join(dir, "new.safetensors"), nil, ""},
		{reg, nil, ""},
		{link("toreg", reg), nil, ""},
		{link("dangling", filepath.Join(dir, "none")), nil, ""},
		{dir, nil, "a directory"},
		{fifo, nil, "FIFO"},
		{link("tofifo", fifo), nil, "symbolic link to a FIFO"},
		{link("todir", dir), nil, "symbolic link to a directory"},
		{"/dev/null", nil, "character device"},
		{link("mynull", "/dev/null"), nil, "symbolic link to a character device"},
		{sock, nil, "socket"},
		{filepath.Join(dir, "no", "x"), nil, "directory"},
		{reg, []string{hard}, "same file as the input " + hard},
		{link("toreg2", reg), []string{reg}, "same file"},
		{reg, []string{filepath.Join(dir, "none"), ""}, ""},
	} {
		if c.path == "" {
			continue
		}
		err := CheckOutput(c.path, c.inputs...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckOutput(%s): %v", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path)):
			t.Errorf("CheckOutput(%s): %v, want an error naming it and saying %q", c.path, err, c.want)
		}
	}
}

// TestWriteNotRegular: Write refuses a FIFO, a device or a link to one and
// leaves it as it was; Read and ReadMetadata refuse a FIFO at once rather
// than block on it.
func TestWriteNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "x.safetensors")
	mkfifo(t, fifo)
	null := filepath.Join(dir, "mynull")
	must(t, os.Symlink("/dev/null", null))
	ts, meta := sample()
	for _, p := range []string{fifo, null} {
		within(t, "Write to "+p, func() {
			if err := Write(p, ts, meta); err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Write(%s): %v", p, err)
			}
		})
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Lstat(null); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v %v", fi.Mode(), err)
	}
	within(t, "ReadMetadata of a FIFO", func() {
		if _, err := ReadMetadata(fifo); err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("ReadMetadata(FIFO): %v", err)
		}
	})
	within(t, "Read of a FIFO", func() {
		if _, err := Read(fifo); err == nil || !strings.Contains(err.Error(), "FIFO") {
			t.Errorf("Read(FIFO): %v", err)
		}
	})
	within(t, "SaveRun over a FIFO's state", func() {
		// SaveRun reads the step of the files it replaces: a FIFO there is
		// an error, not a hang.
		ck := filepath.Join(dir, "y.safetensors")
		mkfifo(t, OptPath(ck))
		if err := Write(ck, ts, map[string]string{KeyStep: "1"}); err != nil {
			t.Fatal(err)
		}
		m := newModel(t, "small", 1)
		if err := SaveRun(ck, m, optim.NewAdamW(m.Params, optim.DefaultConfig()), 2, nil); err == nil {
			t.Error("SaveRun over a FIFO succeeded")
		}
	})
}

// TestNotExist: a missing file's error wraps fs.ErrNotExist and names the
// file.
func TestNotExist(t *testing.T) {
	p := filepath.Join(t.TempDir(), "none.safetensors")
	for name, f := range map[string]func() error{
		"Read":         func() error { _, err := Read(p); return err },
		"ReadMetadata": func() error { _, err := ReadMetadata(p); return err },
		"ReadHeader":   func() error { _, err := ReadHeader(p); return err },
		"Load":         func() error { _, _, err := Load(p); return err },
	} {
		err := f()
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), p+": no such file") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLoadNonFinite: a NaN or infinite weight (or optimizer moment) is an
// error at load naming the file and the tensor.
func TestLoadNonFinite(t *testing.T) {
	dir := t.TempDir()
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
		m := newModel(t, "small", 1)
		m.Params[3].Data[2] = bad
		p := filepath.Join(dir, "bad.safetensors")
		must(t, Save(p, m, 5))
		_, _, err := Load(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), fmt.Sprintf("%q", m.Params[3].Name)) || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("Load of a %v weight: %v", bad, err)
		}
		o := optim.NewAdamW(m.Params, optim.DefaultConfig())
		m.Params[3].Data[2] = 0
		o.V[0][0] = bad
		must(t, SaveOpt(OptPath(p), m, o, 5, nil))
		if _, err := LoadOpt(OptPath(p), m, o, 5); err == nil || !strings.Contains(err.Error(), PrefixV+m.Params[0].Name) {
			t.Errorf("LoadOpt of a %v moment: %v", bad, err)
		}
	}
}

// TestDuplicateKeys: a key given twice in a safetensors header (a tensor,
// or an entry of the metadata) is an error, in Read and in ReadMetadata.
func TestDuplicateKeys(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ h, key string }{
		{`{"__metadata__":{"step":"1","step":"2"},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, `"step" is given twice in "__metadata__"`},
		{`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, `"a" is given twice`},
		{`{"a":{"dtype":"F32","shape":[1],"shape":[2],"data_offsets":[0,4]}}`, `"shape" is given twice in "a"`},
	} {
		p := filepath.Join(dir, "dup.safetensors")
		must(t, os.WriteFile(p, header(t, c.h, 4), 0o644))
		if _, err := Read(p); err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), p) {
			t.Errorf("Read %s: %v, want %s", c.h, err, c.key)
		}
		if _, err := ReadMetadata(p); err == nil || !strings.Contains(err.Error(), c.key) {
			t.Errorf("ReadMetadata %s: %v, want %s", c.h, err, c.key)
		}
	}
}

// TestOptBinding: an optimizer state records the checksum of its weights;
// a state of other weights at the same step, or with more AdamW steps than
// the step, is refused by LoadOpt and ResolveOptFor (which then falls back
// to a backup that matches), with the way to resume from the weights
// alone; a state written before the checksum existed still loads.
func TestOptBinding(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "b.safetensors")
	m1, m2 := newModel(t, "small", 1), newModel(t, "small", 2)
	o1 := optim.NewAdamW(m1.Params, optim.DefaultConfig())
	o2 := optim.NewAdamW(m2.Params, optim.DefaultConfig())
	o1.Steps, o2.Steps = 4, 4
	must(t, Save(p, m1, 4))
	must(t, SaveOpt(OptPath(p), m2, o2, 4, nil)) // seed 2's state beside seed 1's weights
	if _, err := LoadOpt(OptPath(p), m1, o1, 4); err == nil || !strings.Contains(err.Error(), "other weights") || !strings.Contains(err.Error(), "weights alone") {
		t.Errorf("LoadOpt of another run's state: %v", err)
	}
	sum := WeightsSum(m1)
	if _, _, err := ResolveOptFor(p, 4, sum); err == nil || !strings.Contains(err.Error(), "other weights") || !strings.Contains(err.Error(), "aside") {
		t.Errorf("ResolveOptFor of another run's state: %v", err)
	}
	// The right state in the backup (an interrupted save of a new run over
	// this checkpoint): it is the one resolved.
	must(t, SaveOpt(OptPrevPath(p), m1, o1, 4, nil))
	if op, note, err := ResolveOptFor(p, 4, sum); err != nil || op != OptPrevPath(p) || note == "" {
		t.Errorf("ResolveOptFor with the right backup: %q %q %v", op, note, err)
	}
	os.Remove(OptPrevPath(p))

	// adam.steps past the step.
	o1.Steps = 7
	must(t, SaveOpt(OptPath(p), m1, o1, 4, nil))
	if _, err := LoadOpt(OptPath(p), m1, o1, 4); err == nil || !strings.Contains(err.Error(), KeyAdamSteps) {
		t.Errorf("adam.steps 7 at step 4: %v", err)
	}

	// A state of an earlier version, without the checksum, still loads.
	o1.Steps = 3 // fewer than the step: a resume from the weights alone at step 1
	must(t, SaveOpt(OptPath(p), m1, o1, 4, nil))
	b, err := os.ReadFile(OptPath(p))
	must(t, err)
	old := patchHeader(t, b, func(h map[string]any) { delete(h[MetadataKey].(map[string]any), KeyWeights) })
	must(t, os.WriteFile(OptPath(p), old, 0o644))
	if meta, err := LoadOpt(OptPath(p), m1, o1, 4); err != nil || meta[KeyWeights] != "" || o1.Steps != 3 {
		t.Errorf("a state without %s: %v", KeyWeights, err)
	}
	if op, _, err := ResolveOptFor(p, 4, sum); err != nil || op != OptPath(p) {
		t.Errorf("ResolveOptFor of a state without %s: %q %v", KeyWeights, op, err)
	}
}
