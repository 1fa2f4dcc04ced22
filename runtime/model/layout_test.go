package model_test

import (
	"fmt"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// TestLayout: Layout lists exactly New's parameters (names, shapes, Decay,
// Frozen, order) for every linked spec up to n 256 (the longer ones repeat
// the variants), without weights.
func TestLayout(t *testing.T) {
	for _, name := range kernels.Names() {
		if s, err := kernels.Spec(name); err != nil || s.N > 256 || s.D > 256 {
			continue
		}
		m := newModel(t, name, 1)
		ps, err := model.Layout(m.Spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(ps) != len(m.Params) {
			t.Fatalf("%s: %d parameters, New has %d", name, len(ps), len(m.Params))
		}
		for i, p := range ps {
			q := m.Params[i]
			if p.Name != q.Name || fmt.Sprint(p.Shape) != fmt.Sprint(q.Shape) || p.Decay != q.Decay || p.Frozen != q.Frozen || p.Data != nil || p.Grad != nil {
				t.Errorf("%s: parameter %d: %+v, New's %s %v", name, i, p, q.Name, q.Shape)
			}
		}
	}
}
