package model

import (
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestSharedPathTaken: with a bf16 kernel, the attention whose logits do
// not depend on the input (random, fixed random, factorized random, causal
// or not) runs on the shared bf16 path (attention_bf16.go), vanilla's and
// dense's, alone or mixed with random, on the strip path (strips_bf16.go),
// and the other mixtures and factorized dense on neither; without one, none does. The gradient tests
// cannot tell: every path gives the same maps and gradients within bf16's
// tolerance.
func TestSharedPathTaken(t *testing.T) {
	kn, err := bf16.New(bf16.Go) // every CPU runs the Go level
	if err != nil {
		t.Fatal(err)
	}
	const none, shared, strips = 0, 1, 2
	for name, want := range map[string]int{
		"random": shared, "fixed_random": shared, "factorized_random": shared, "enc_factorized_random": shared, "enc_random": shared,
		"vanilla": strips, "dense": strips, "enc_vanilla": strips, "enc_dense": strips,
		"random_vanilla": strips, "enc_random_vanilla": strips, "mid": strips,
		"factorized_dense": none, "dense_vanilla": none, "odd": none,
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
			if got := ws.sharedP; got != (want == shared && bf) {
				t.Errorf("%s, bf16 %v: shared path %v, want %v", name, bf, got, want == shared && bf)
			}
			if got := ws.stripsP; got != (want == strips && bf) {
				t.Errorf("%s, bf16 %v: strip path %v, want %v", name, bf, got, want == strips && bf)
			}
			m.Backward(ws)
		}
	}
}
