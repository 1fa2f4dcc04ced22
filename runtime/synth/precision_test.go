package synth_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/synth"
)

// TestPrecisionBF16 trains the same few steps in float32 and in bf16: the
// bf16 run's plan names its level, its losses follow float32's closely but
// not bit for bit (its products are rounded), and its checkpoint has the
// float32 checkpoint's format (same tensors, dtypes and shapes). Where no
// bf16 level runs (or SYNTHGEN_BF16=none), the run stays float32 with a
// note saying why.
func TestPrecisionBF16(t *testing.T) {
	t.Setenv(kernels.EnvISA, "")
	t.Setenv(bf16.EnvBF16, "")
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	runs := map[synth.PrecisionKind]*synth.Summary{}
	plans := map[synth.PrecisionKind]synth.Plan{}
	for _, p := range []synth.PrecisionKind{synth.F32, synth.BF16} {
		out := filepath.Join(dir, p.String()+".safetensors")
		r, err := synth.NewRun(ctx, small.Spec, tiny(data, out, synth.Steps(8), synth.Precision(p))...)
		if err != nil {
			t.Fatal(err)
		}
		plans[p] = r.Plan()
		if runs[p], err = r.Train(ctx); err != nil {
			t.Fatal(err)
		}
	}
	isa, _ := kernels.Level()
	level, lerr := synth.BF16Level(isa)
	if lerr != nil {
		if plans[synth.BF16].Precision != "f32" || !strings.Contains(strings.Join(plans[synth.BF16].Notes, " "), "training in float32") {
			t.Errorf("no bf16 level (%v), but the plan says %q, notes %q", lerr, plans[synth.BF16].Precision, plans[synth.BF16].Notes)
		}
		t.Skipf("no bf16 level here: %v", lerr)
	}
	if want := "bf16 (" + level.String() + ")"; plans[synth.BF16].Precision != want || plans[synth.F32].Precision != "f32" {
		t.Errorf("plans: %q and %q, want f32 and %q", plans[synth.F32].Precision, plans[synth.BF16].Precision, want)
	}
	f, b := runs[synth.F32], runs[synth.BF16]
	if f.Loss == b.Loss || math.Abs(f.Loss-b.Loss) > 0.02*f.Loss || math.Abs(f.ValLoss-b.ValLoss) > 0.02*f.ValLoss {
		t.Errorf("losses: f32 %v (val %v), bf16 %v (val %v): want close but not equal", f.Loss, f.ValLoss, b.Loss, b.ValLoss)
	}
	hf, err := checkpoint.ReadHeader(f.Out)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := checkpoint.ReadHeader(b.Out)
	if err != nil {
		t.Fatal(err)
	}
	if hf.Spec.JSON() != hb.Spec.JSON() || hf.Step != hb.Step {
		t.Errorf("headers differ: %+v and %+v", hf, hb)
	}
	sf, _ := os.Stat(f.Out)
	sb, _ := os.Stat(b.Out)
	if sf.Size() != sb.Size() {
		t.Errorf("checkpoint sizes differ: f32 %d, bf16 %d bytes", sf.Size(), sb.Size())
	}
	// A bf16 run resumes in bf16 (its optimizer state says so), and in
	// float32 when asked, with a note; a float32 run resumes in float32.
	if r, err := synth.ResumeRun(ctx, b.Out, synth.Steps(9)); err != nil {
		t.Errorf("resume of the bf16 run's checkpoint: %v", err)
	} else if p := r.Plan(); p.Precision != plans[synth.BF16].Precision {
		t.Errorf("resumed bf16 run: precision %q, want the saved run's %q", p.Precision, plans[synth.BF16].Precision)
	}
	if r, err := synth.ResumeRun(ctx, b.Out, synth.Steps(9), synth.Precision(synth.F32)); err != nil {
		t.Errorf("resume of the bf16 run's checkpoint in f32: %v", err)
	} else if p := r.Plan(); p.Precision != "f32" || !strings.Contains(strings.Join(p.Notes, " "), "overrides the saved run's bf16") {
		t.Errorf("bf16 run resumed with Precision(F32): precision %q, notes %q", p.Precision, p.Notes)
	}
	if r, err := synth.ResumeRun(ctx, f.Out, synth.Steps(9)); err != nil {
		t.Errorf("resume of the f32 run's checkpoint: %v", err)
	} else if p := r.Plan(); p.Precision != "f32" {
		t.Errorf("resumed f32 run: precision %q, want f32", p.Precision)
	}

	t.Setenv(bf16.EnvBF16, "none")
	r, err := synth.NewRun(ctx, small.Spec, tiny(data, filepath.Join(dir, "none.safetensors"), synth.Steps(1), synth.Precision(synth.BF16))...)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Plan(); p.Precision != "f32" || !strings.Contains(strings.Join(p.Notes, " "), "training in float32") {
		t.Errorf("SYNTHGEN_BF16=none: plan precision %q, notes %q", p.Precision, p.Notes)
	}
	if _, err := synth.NewRun(ctx, small.Spec, tiny(data, filepath.Join(dir, "bad.safetensors"), synth.Precision(7))...); !errors.As(err, new(*synth.OptionError)) {
		t.Errorf("Precision(7): %v, want an OptionError", err)
	}
}
