package synth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/synth"
)

// wantErr fails t unless err is an error whose text holds every one of want.
func wantErr(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one saying %q", what, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

// TestNoOverwrite: a new run over an existing checkpoint (or its optimizer
// state, or its log), and a resume written over another run's checkpoint,
// are errors that say how to resume or replace it, and change nothing;
// Overwrite allows it, and resuming in place needs nothing.
func TestNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	a := filepath.Join(dir, "a.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(4), synth.StopAt(2))...); err != nil {
		t.Fatal(err)
	}
	before := read(t, a)
	_, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(4))...)
	wantErr(t, "second Train", err, a, "step 2", "-resume", "Resume", "-force", "Overwrite")
	_, err = synth.NewRun(context.Background(), small.Spec, tiny(data, a, synth.Steps(4))...)
	wantErr(t, "NewRun", err, "Overwrite")
	if !bytes.Equal(read(t, a), before) {
		t.Fatal("a refused run changed the checkpoint")
	}

	// A resume written over another run's checkpoint.
	b := filepath.Join(dir, "b.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(4), synth.StopAt(1))...); err != nil {
		t.Fatal(err)
	}
	_, err = synth.ResumeRun(context.Background(), a, synth.Out(b))
	wantErr(t, "resume to another run's checkpoint", err, b, "Overwrite")

	// The optimizer state or the log alone is protected too.
	c := filepath.Join(dir, "c.safetensors")
	for _, p := range []string{checkpoint.OptPath(c), filepath.Join(dir, "c.csv")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = synth.NewRun(context.Background(), small.Spec, tiny(data, c, synth.Steps(4))...)
		wantErr(t, "new run over "+p, err, p)
		os.Remove(p)
	}

	// Resuming in place is fine; so is a new run with Overwrite.
	if _, err := synth.Resume(ctx, a); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(2), synth.Overwrite())...); err != nil {
		t.Fatal(err)
	}
	if _, step, err := synth.CheckpointSpec(b); err != nil || step != 2 {
		t.Fatalf("overwritten run: step %d, %v", step, err)
	}
}

// within fails t if f does not return within a few seconds.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s hangs", what)
	}
}

// TestOutputNotRegular: the reproducers. A run's checkpoint,
// optimizer state or log that is a device, a FIFO, a directory or a link to
// one, or the run's own data file, is an error before anything is written
// (with Overwrite too), and the file is left as it was.
func TestOutputNotRegular(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	fifo := filepath.Join(dir, "fifo.safetensors")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	null := filepath.Join(dir, "mynull")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	logFifo := filepath.Join(dir, "l.csv")
	if err := syscall.Mkfifo(logFifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ out, want string }{
		{fifo, "FIFO"},
		{null, "symbolic link to a character device"},
		{"/dev/null", "character device"},
		{data, "same file as the input " + data},
		{filepath.Join(dir, "l.safetensors"), "l.csv is a FIFO"},
	} {
		within(t, "a run writing to "+c.out, func() {
			_, err := synth.Train(ctx, small.Spec, tiny(data, c.out, synth.Steps(2), synth.Overwrite())...)
			wantErr(t, "Out "+c.out, err, c.want)
		})
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v", err)
	}
	if fi, err := os.Lstat(null); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link was replaced: %v", err)
	}
	if b := read(t, data); len(b) != 20000 {
		t.Errorf("the data file changed: %d bytes", len(b))
	}

	// On resume: a FIFO in the optimizer state's place is an error, not a hang.
	a := filepath.Join(dir, "a.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(4), synth.StopAt(2))...); err != nil {
		t.Fatal(err)
	}
	os.Remove(checkpoint.OptPath(a))
	if err := syscall.Mkfifo(checkpoint.OptPath(a), 0o644); err != nil {
		t.Fatal(err)
	}
	within(t, "a resume beside a FIFO", func() {
		_, err := synth.Resume(ctx, a)
		wantErr(t, "resume beside a FIFO", err, checkpoint.OptPath(a), "FIFO")
	})
}

// TestNotExist: errors.Is(err, fs.ErrNotExist) holds for a missing data
// file, checkpoint or resumed checkpoint.
func TestNotExist(t *testing.T) {
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	_, err := synth.Train(context.Background(), small.Spec, tiny(none, filepath.Join(dir, "x.safetensors"))...)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Data: %v", err)
	}
	if _, err := synth.Load(context.Background(), none); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load: %v", err)
	}
	if _, err := synth.Resume(context.Background(), none); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Resume: %v", err)
	}
}

// TestResumeOtherRunsState: the case, a seed-2 optimizer state
// beside a seed-1 checkpoint of the same step, is refused with the way to
// resume from the weights alone, which then works.
func TestResumeOtherRunsState(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(6), synth.StopAt(3), synth.Seed(1))...); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(6), synth.StopAt(3), synth.Seed(2))...); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(checkpoint.OptPath(b), checkpoint.OptPath(a)); err != nil {
		t.Fatal(err)
	}
	_, err := synth.ResumeRun(context.Background(), a)
	wantErr(t, "resume beside another run's state", err, checkpoint.OptPath(a), "other weights", "weights alone", "aside")
	if err := os.Rename(checkpoint.OptPath(a), filepath.Join(dir, "aside.safetensors")); err != nil {
		t.Fatal(err)
	}
	r, err := synth.ResumeRun(context.Background(), a, synth.Data(data), synth.Steps(6))
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan().WithOptimizer {
		t.Error("resumed with an optimizer state that was moved aside")
	}
}

// csvSteps parses a run's CSV log into its steps, failing t on a line that
// is not a row of five fields.
func csvSteps(t *testing.T, path string) []int {
	t.Helper()
	lines := strings.Split(string(read(t, path)), "\n")
	if lines[0] != "step,loss,val_loss,lr,tokens_per_s" || lines[len(lines)-1] != "" {
		t.Fatalf("%s: header %q, last line %q", path, lines[0], lines[len(lines)-1])
	}
	var steps []int
	for _, l := range lines[1 : len(lines)-1] {
		f := strings.Split(l, ",")
		s, err := strconv.Atoi(f[0])
		if len(f) != 5 || err != nil {
			t.Fatalf("%s: line %q", path, l)
		}
		steps = append(steps, s)
	}
	return steps
}

// TestCSVFollowsCheckpoint: a resume drops the rows a crash left past the
// checkpoint's step (and a torn last line), so each step appears once;
// a run whose first save fails leaves no log.
func TestCSVFollowsCheckpoint(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	a := filepath.Join(dir, "a.safetensors")
	log := filepath.Join(dir, "a.csv")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(10), synth.StopAt(6), synth.EvalEvery(0))...); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(csvSteps(t, log)); got != "[1 2 3 4 5 6]" {
		t.Fatalf("log after StopAt(6): steps %s", got)
	}
	// As if killed after writing rows 7 and 8 and part of 9, before the
	// checkpoint of step 8 was saved.
	f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("7,99,,0.001,1\n8,99,,0.001,1\n9,2.")
	f.Close()
	if _, err := synth.Resume(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(csvSteps(t, log)); got != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("log after the resume: steps %s", got)
	}
	if strings.Contains(string(read(t, log)), ",99,") {
		t.Error("the crashed run's rows past the checkpoint were kept")
	}

	// The first save fails (the checkpoint's name is taken by a folder
	// after the run was planned): no log is left.
	b := filepath.Join(dir, "b.safetensors")
	r, err := synth.NewRun(context.Background(), small.Spec, tiny(data, b, synth.Steps(2))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(b, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Train(ctx); err == nil {
		t.Fatal("a save over a folder succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "b.csv")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a run whose first save failed left its log: %v", err)
	}
}

// TestLimits: workers past MaxWorkers (unless allowed) and a negative clip
// are errors naming the setting and the rule.
func TestLimits(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "l.safetensors")
	_, err := synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Workers(100000))...)
	wantErr(t, "Workers(100000)", err, "Workers(100000)", fmt.Sprint(synth.MaxWorkers()), "-force")
	_, err = synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Clip(-1))...)
	wantErr(t, "Clip(-1)", err, "Clip(-1)", "≥ 0")
	r, err := synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Workers(synth.MaxWorkers()+1), synth.AllowManyWorkers())...)
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan().Workers != synth.MaxWorkers()+1 {
		t.Errorf("AllowManyWorkers: %d workers", r.Plan().Workers)
	}
	if _, err := synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Clip(0))...); err != nil {
		t.Errorf("Clip(0): %v", err)
	}
}

// TestLeftoverFirstSave: a run killed in its first save leaves its
// optimizer state or log without the checkpoint; a new run replaces them
// (there is nothing to resume), while a file of the same name that is not
// a run's (a user's own x.csv) is still refused.
func TestLeftoverFirstSave(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	a := filepath.Join(dir, "a.safetensors")
	r, err := synth.NewRun(context.Background(), small.Spec, tiny(data, a, synth.Steps(2))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(a); err != nil { // as if killed between the state and the checkpoint
		t.Fatal(err)
	}
	if _, err := synth.NewRun(context.Background(), small.Spec, tiny(data, a, synth.Steps(2))...); err != nil {
		t.Errorf("a new run over a first save's leftovers: %v", err)
	}
	b := filepath.Join(dir, "b.safetensors")
	if err := os.WriteFile(filepath.Join(dir, "b.csv"), []byte("name,score\nx,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = synth.NewRun(context.Background(), small.Spec, tiny(data, b, synth.Steps(2))...)
	wantErr(t, "a user's b.csv", err, "b.csv", "-force")
}
