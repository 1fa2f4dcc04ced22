package model_test

import (
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// TestCausalTriMarks: exactly the trained R of a causal spec is marked
// CausalTri (random and the mixtures with random; not fixed_random's
// frozen R, not an encoder's), and after Backward (whole windows and
// shorter ones) its gradient is exactly 0 on every matrix's strict upper
// triangle, which is what lets the optimizer skip it.
func TestCausalTriMarks(t *testing.T) {
	marked, unmarkedEnc := 0, 0
	for _, name := range kernels.Names() {
		k, err := kernels.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		s := k.Spec
		if s.N > 256 {
			continue // the long specs' R alone is hundreds of MB
		}
		m, err := model.New(s, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		var rs []*model.Param
		for _, p := range m.Params {
			isR := strings.HasSuffix(p.Name, ".attn.R")
			want := isR && !p.Frozen && s.Causal()
			if p.CausalTri != want {
				t.Errorf("%s: %s CausalTri %v, want %v", name, p.Name, p.CausalTri, want)
			}
			if isR && !p.Frozen && !s.Causal() {
				unmarkedEnc++
			}
			if p.CausalTri {
				if n := len(p.Shape); n != 3 || p.Shape[1] != s.N || p.Shape[2] != s.N {
					t.Errorf("%s: %s marked CausalTri with shape %v", name, p.Name, p.Shape)
				}
				rs = append(rs, p)
			}
		}
		if len(rs) == 0 || s.N > 128 {
			continue
		}
		marked++
		m.SetWorkers(2)
		perturb(m, 2)
		const batch = 2
		ws := m.NewWorkspace(batch)
		for _, tl := range []int{s.N, s.N/2 + 1} {
			in, tg := tokens(4, batch, tl)
			for i := range in { // within odd vocabularies
				in[i] %= int32(s.Vocab)
				tg[i] %= int32(s.Vocab)
			}
			for _, p := range rs {
				for i := range p.Grad {
					p.Grad[i] = float32(math.NaN()) // Backward must overwrite it
				}
			}
			forward(m, ws, in, trainTargets(m, tg, batch), batch)
			m.Backward(ws)
			n := s.N
			for _, p := range rs {
				live := 0
				for i, g := range p.Grad {
					if i%n > i/n%n {
						if math.Float32bits(g) != 0 {
							t.Fatalf("%s (t %d): %s gradient [%d] (row %d, column %d) = %g, want +0", name, tl, p.Name, i, i/n%n, i%n, g)
						}
					} else if g != 0 {
						live++
					}
				}
				if live == 0 {
					t.Errorf("%s (t %d): %s has no gradient on its causal triangle", name, tl, p.Name)
				}
			}
		}
	}
	t.Logf("%d causal specs with a trained R checked after Backward; %d encoder R tensors left unmarked", marked, unmarkedEnc)
	if marked < 3 || unmarkedEnc == 0 {
		t.Errorf("%d causal specs with R checked, %d encoder R seen: the linked specs do not cover the cases", marked, unmarkedEnc)
	}
}
