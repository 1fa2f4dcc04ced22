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

// TestLoadISA: Load's ISA option picks the kernels' level whatever
// SYNTHGEN_ISA says, on the same weights (the evaluations agree to float32
// rounding); a level this CPU lacks and a training run's option are
// errors naming them.
func TestLoadISA(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "l.safetensors")
	if _, err := synth.Train(context.Background(), small.Spec, tiny(data, out, synth.Steps(2))...); err != nil {
		t.Fatal(err)
	}
	val, err := synth.HeldOut(data, small.Spec)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	best := kernels.Go
	for _, l := range kernels.Levels() {
		if kernels.Supported(l) {
			best = l
		}
	}
	var losses []float64
	for _, c := range []struct {
		env  string
		opts []synth.Option
		want kernels.ISA
	}{
		{"", nil, best},
		{"", []synth.Option{synth.ISA(kernels.Go)}, kernels.Go},
		{"go", nil, kernels.Go},
		{"go", []synth.Option{synth.ISA(best)}, best}, // the option, not the variable
	} {
		t.Setenv(kernels.EnvISA, c.env)
		m, err := synth.Load(ctx, out, c.opts...)
		if err != nil {
			t.Fatalf("SYNTHGEN_ISA=%q, %d options: %v", c.env, len(c.opts), err)
		}
		if m.ISA() != c.want || m.Step() != 2 {
			t.Errorf("SYNTHGEN_ISA=%q, %d options: ISA %s step %d, want %s step 2", c.env, len(c.opts), m.ISA(), m.Step(), c.want)
		}
		ev, err := m.Evaluate(ctx, val, synth.EvalOptions{Windows: 2})
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, ev.Loss)
	}
	for i, l := range losses {
		if math.Abs(l-losses[0]) > 1e-4*losses[0] {
			t.Errorf("losses %v: load %d differs", losses, i)
		}
	}
	t.Setenv(kernels.EnvISA, "")
	for _, l := range kernels.Levels() {
		if !kernels.Supported(l) {
			if _, err := synth.Load(ctx, out, synth.ISA(l)); err == nil || !strings.Contains(err.Error(), l.String()) {
				t.Errorf("Load at %s, which this CPU lacks: %v", l, err)
			}
		}
	}
	if _, err := synth.Load(ctx, out, synth.Steps(5)); err == nil || !strings.Contains(err.Error(), "Steps") || !strings.Contains(err.Error(), "only ISA") {
		t.Errorf("Load with Steps: %v", err)
	}
}
