package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// TestBidirectionalSeesTheFuture: changing the last byte of a sequence
// changes (beyond rounding) the first position's final hidden state (lnf's output, which the
// classifier pools) of a bidirectional spec, whose every position sees
// every key, and never that of its causal twin (the same variant's masked
// kernels, run as a classifier too). Masked kernels under a bidirectional
// spec fail it.
func TestBidirectionalSeesTheFuture(t *testing.T) {
	for _, c := range []struct{ enc, causal string }{
		{"enc_odd", "odd"}, {"enc_vanilla", "vanilla"}, {"odd_enc_aft_full", "odd_aft_full"},
		{"odd_enc_aft_local", "odd_aft_local"}, {"odd_enc_aft_conv", "odd_aft_conv"},
		{"odd_enc_aft_simple", "odd_aft_simple"}, {"odd_enc_linear", "odd_linear"},
	} {
		for _, name := range []string{c.enc, c.causal} {
			t.Run(name, func(t *testing.T) {
				k, err := kernels.Lookup(name)
				if err != nil {
					t.Fatal(err)
				}
				s := k.Spec
				if s.Causal() != (name == c.causal) {
					t.Fatalf("spec %s: causal %v", name, s.Causal())
				}
				s.Task, s.Classes = specs.TaskClassify, 3 // the causal twin as a classifier
				m, err := New(s, k, 1)
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewPCG(2, 7))
				for _, p := range m.Params {
					for j := range p.Data {
						p.Data[j] += float32(0.2 * rng.NormFloat64())
					}
				}
				const tl = 6 // within the windows of aft_local and aft_conv (7)
				in := make([]int32, tl)
				for i := range in {
					in[i] = int32(rng.IntN(256))
				}
				ws := m.NewWorkspace(1)
				m.ForwardClassify(ws, in, nil, 1)
				first := append([]float32(nil), ws.xf[:m.d]...)
				last := append([]float32(nil), ws.xf[(tl-1)*m.d:tl*m.d]...)
				in[tl-1] = (in[tl-1] + 1) % int32(s.Vocab)
				m.ForwardClassify(ws, in, nil, 1)
				// A change is one beyond rounding: the factorised aft_full
				// stabilises each channel by its maximum over all the keys,
				// so a causal position 0 may move by an ulp or two.
				moved := func(now, before []float32) bool {
					diff := 0.0
					for c := range before {
						diff = max(diff, math.Abs(float64(now[c])-float64(before[c])))
					}
					return diff > 1e-4
				}
				if !moved(ws.xf[(tl-1)*m.d:tl*m.d], last) {
					t.Fatal("the last position's hidden state did not change with its own byte")
				}
				changed := moved(ws.xf[:m.d], first)
				if changed != s.Bidirectional {
					t.Errorf("position 0's hidden state changed with the last byte: %v, want %v", changed, s.Bidirectional)
				}
			})
		}
	}
}
