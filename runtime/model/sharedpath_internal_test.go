package model

import (
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestSharedPathTaken: with a bf16 kernel, the attention whose logits do
// not depend on the input (random, fixed random, factorized random, causal
// or not) runs on the shared bf16 path (attention_bf16.go) and the others
// do not; without one, none does. The gradient tests cannot tell: both
// paths give the same maps and gradients within bf16's tolerance.
func TestSharedPathTaken(t *testing.T) {
	kn, err := bf16.New(bf16.Go) // every CPU runs the Go level
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"random": true, "fixed_random": true, "factorized_random": true, "enc_factorized_random": true, "enc_random": true,
		"vanilla": false, "dense": false, "factorized_dense": false, "random_vanilla": false,
	} {
		k, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(k.Spec, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		const tl = 9
		in := make([]int32, tl)
		labels := []int32{0}
		ws := m.NewWorkspace(1)
		for _, bf := range []bool{false, true} {
			m.SetBF16(nil)
			if bf {
				m.SetBF16(kn)
			}
			if m.classes > 0 {
				m.ForwardClassify(ws, in, labels, 1)
			} else {
				m.Forward(ws, in, in, 1)
			}
			if got := ws.sharedP; got != (want && bf) {
				t.Errorf("%s, bf16 %v: shared path %v, want %v", name, bf, got, want && bf)
			}
			m.Backward(ws)
		}
	}
}
