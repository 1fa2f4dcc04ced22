package synth_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// TestCancelMidStep: a cancel in the middle of a step (here, at a check
// between two layers of the step's forward or backward pass, which a test
// hook reaches) abandons the step at that check: Train returns at once,
// the checkpoint on disk is the last completed step's, byte for byte the
// one an uninterrupted run saves at that step (saved now, or kept when it
// was saved already), the CSV log ends at that step, and a new run
// cancelled during its first step writes nothing.
func TestCancelMidStep(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	opts := func(out string, more ...synth.Option) []synth.Option {
		return append([]synth.Option{synth.Data(data), synth.Out(out), synth.Batch(2), synth.EvalEvery(0), synth.Steps(8), synth.SaveEvery(2), synth.Workers(1)}, more...)
	}
	for _, c := range []struct {
		name        string
		step, check int // cancel at the check-th check of step (1-based) ...
		want        int // ... and find the checkpoint of step want (-1: none)
	}{
		{"saved", 4, 2, 3},    // step 3 was not saved: saved now
		{"kept", 3, 5, 2},     // step 2 was saved by SaveEvery: kept
		{"first", 1, 3, -1},   // a new run's first step: nothing written
		{"backward", 6, 6, 5}, // the last check of the backward
		{"forward", 7, 1, 6},  // the first check of the forward
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+".safetensors")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := 0 // completed steps
			r, err := synth.NewRun(ctx, small.Spec, opts(out, synth.OnEvent(func(e synth.Event) { done = e.Step }))...)
			if err != nil {
				t.Fatal(err)
			}
			checks, after := 0, 0
			var cancelled time.Time
			synth.SetLayerHook(r, func() {
				if !cancelled.IsZero() {
					after++
					return
				}
				if done == c.step-1 {
					if checks++; checks == c.check {
						cancel()
						cancelled = time.Now()
					}
				}
			})
			sum, err := r.Train(ctx)
			if !errors.Is(err, context.Canceled) || sum == nil || sum.Step != c.step-1 {
				t.Fatalf("Train: %v, summary %+v; want a cancel after step %d", err, sum, c.step-1)
			}
			if !strings.Contains(err.Error(), "abandoned") {
				t.Errorf("error %q does not say the step was abandoned", err)
			}
			if after != 0 {
				t.Errorf("the step went on through %d more checks after the cancel", after)
			}
			if d := time.Since(cancelled); d > 5*time.Second {
				t.Errorf("Train returned %v after the cancel", d)
			}
			if c.want < 0 {
				for _, p := range []string{out, strings.TrimSuffix(out, ".safetensors") + ".opt.safetensors", strings.TrimSuffix(out, ".safetensors") + ".csv"} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("the run cancelled in its first step wrote %s", p)
					}
				}
				return
			}
			ref := filepath.Join(dir, c.name+"-ref.safetensors")
			if _, err := synth.Train(context.Background(), small.Spec, opts(ref, synth.StopAt(c.want))...); err != nil {
				t.Fatal(err)
			}
			opt := func(p string) string { return strings.TrimSuffix(p, ".safetensors") + ".opt.safetensors" }
			if !bytes.Equal(read(t, out), read(t, ref)) || !bytes.Equal(read(t, opt(out)), read(t, opt(ref))) {
				t.Errorf("the checkpoint after the cancel is not an uninterrupted run's of step %d", c.want)
			}
			csv := string(read(t, strings.TrimSuffix(out, ".safetensors")+".csv"))
			if rows := strings.Count(csv, "\n") - 1; rows != c.want {
				t.Errorf("the CSV log holds %d rows, want %d:\n%s", rows, c.want, csv)
			}
		})
	}
}
