package synth_test

import (
	"errors"
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
	if _, err := synth.Load(p); !errors.Is(err, synth.ErrNotLinked) {
		t.Errorf("Load of an unlinked spec's checkpoint: %v", err)
	}
}
