package synth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/synth"
)

// TestInspectNeedsNoKernels: a checkpoint of a spec the program does not
// link inspects (tensors, counts, spec, step) while Load says it is not
// linked.
func TestInspectNeedsNoKernels(t *testing.T) {
	k, err := kernels.Lookup(small.Spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	net, err := model.New(small.Spec, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	net.Spec.Name = "not_linked_anywhere"
	p := filepath.Join(t.TempDir(), "u.safetensors")
	if err := checkpoint.Save(p, net, 7); err != nil {
		t.Fatal(err)
	}
	in, err := synth.Inspect(p)
	if err != nil {
		t.Fatal(err)
	}
	if in.Spec.Name != "not_linked_anywhere" || in.Step != 7 || in.NumParams != net.NumParams() || len(in.Tensors) != len(net.Params) {
		t.Errorf("inspection %+v", in)
	}
	for i, ti := range in.Tensors {
		if p := net.Params[i]; ti.Name != p.Name || ti.Elems != len(p.Data) || ti.Frozen != p.Frozen || ti.Decay != p.Decay {
			t.Errorf("tensor %d: %+v, want %s", i, ti, p.Name)
		}
	}
	if _, err := synth.Load(context.Background(), p); !errors.Is(err, synth.ErrNotLinked) {
		t.Errorf("Load of an unlinked spec's checkpoint: %v", err)
	}
}

// TestCancelledBeforeStart: a cancelled context stops NewRun and Load with
// its error, and a Run's Train before its first step, writing nothing.
func TestCancelledBeforeStart(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "x.safetensors")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := synth.NewRun(ctx, small.Spec, tiny(data, out)...); !errors.Is(err, context.Canceled) {
		t.Errorf("NewRun: %v", err)
	}
	if _, err := synth.Load(ctx, out); !errors.Is(err, context.Canceled) {
		t.Errorf("Load: %v", err)
	}
	r, err := synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Steps(5))...)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Train(ctx)
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Step != 0 || sum.Start != 0 || !sum.Stopped || r.Step() != 0 {
		t.Errorf("Train: %v, %+v", err, sum)
	}
	if es, _ := os.ReadDir(dir); len(es) != 1 {
		t.Errorf("files after a cancelled start: %v", es)
	}
}

// TestISAOption: the ISA option picks the kernels' level whatever
// SYNTHGEN_ISA says, for a new run and a resumed one.
func TestISAOption(t *testing.T) {
	t.Setenv(kernels.EnvISA, "")
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "g.safetensors")
	r, err := synth.NewRun(context.Background(), small.Spec, tiny(data, out, synth.Steps(2), synth.ISA(kernels.Go))...)
	if err != nil {
		t.Fatal(err)
	}
	if r.Plan().ISA != "go" || r.Model().ISA() != kernels.Go {
		t.Errorf("new run: plan ISA %s, model %s", r.Plan().ISA, r.Model().ISA())
	}
	if _, err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	rr, err := synth.ResumeRun(context.Background(), out, synth.Steps(3), synth.ISA(kernels.Go))
	if err != nil {
		t.Fatal(err)
	}
	if rr.Model().ISA() != kernels.Go {
		t.Errorf("resumed run: model %s", rr.Model().ISA())
	}
}
