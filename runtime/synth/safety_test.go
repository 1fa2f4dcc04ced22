package synth_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	_, err = synth.NewRun(small.Spec, tiny(data, a, synth.Steps(4))...)
	wantErr(t, "NewRun", err, "Overwrite")
	if !bytes.Equal(read(t, a), before) {
		t.Fatal("a refused run changed the checkpoint")
	}

	// A resume written over another run's checkpoint.
	b := filepath.Join(dir, "b.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(4), synth.StopAt(1))...); err != nil {
		t.Fatal(err)
	}
	_, err = synth.ResumeRun(a, synth.Out(b))
	wantErr(t, "resume to another run's checkpoint", err, b, "Overwrite")

	// The optimizer state or the log alone is protected too.
	c := filepath.Join(dir, "c.safetensors")
	for _, p := range []string{checkpoint.OptPath(c), filepath.Join(dir, "c.csv")} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = synth.NewRun(small.Spec, tiny(data, c, synth.Steps(4))...)
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
