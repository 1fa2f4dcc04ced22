package model_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/model"
)

// TestZeroGradsSkips: on the shared bf16 path Backward does not clear
// what it overwrites (R's rows i < t up to the diagonal, or up to t), so
// after a Backward at the full length has left values everywhere, a
// Backward at a shorter length (in the same or the other precision) must
// give bit for bit the gradients of a fresh model's, and R's gradient must
// be 0 above the diagonal (causal) and in the rows and columns ≥ t.
func TestZeroGradsSkips(t *testing.T) {
	precisions := append([]*bf16.Kernel{nil}, bf16Levels(t, bf16.Go, bf16.AMX)...)
	names := []string{"random", "enc_random", "random_vanilla", "odd"}
	if testing.Short() { // the race detector's pass: the shared path, causal and not, on one bf16 level
		precisions = []*bf16.Kernel{nil, fastestBF16(t)}
		names = names[:2]
	}
	for _, name := range names {
		for _, first := range precisions {
			for _, second := range precisions {
				t.Run(fmt.Sprintf("%s/%s-then-%s", name, levelName(first), levelName(second)), func(t *testing.T) {
					const batch = 2
					m := newModel(t, name, 1)
					perturb(m, 2)
					n := m.Spec.N
					short := n/2 + 3
					run := func(m *model.Model, k *bf16.Kernel, tl int, seed uint64) {
						m.SetBF16(k)
						ws := m.NewWorkspace(batch)
						in, tg := tokens(seed, batch, tl)
						if m.Spec.Classes > 0 {
							m.ForwardClassify(ws, in, []int32{1, 0}, batch)
						} else {
							m.Forward(ws, in, tg, batch)
						}
						m.Backward(ws)
					}
					run(m, first, n, 5) // leaves values in every row
					for _, p := range m.Params {
						for i := range p.Grad {
							if i%3 == 0 {
								p.Grad[i] = float32(math.NaN()) // Backward overwrites every element
							}
						}
					}
					run(m, second, short, 6)
					fresh := newModel(t, name, 1)
					perturb(fresh, 2)
					run(fresh, second, short, 6)
					want := gradsOf(fresh)
					for i, p := range m.Params {
						for j, g := range p.Grad {
							if math.Float32bits(g) != math.Float32bits(want[i][j]) {
								t.Fatalf("%s[%d] = %g after a Backward at t %d, %g on a fresh model", p.Name, j, g, n, want[i][j])
							}
						}
						if !isRParam(p) || p.Grad == nil {
							continue
						}
						nn := n * n
						for e, g := range p.Grad {
							r, c := e%nn/n, e%n
							dead := r >= short || c >= short || (p.CausalTri && c > r)
							if dead && g != 0 {
								t.Fatalf("%s: row %d column %d = %g, want 0 (t %d)", p.Name, r, c, g, short)
							}
						}
					}
				})
			}
		}
	}
}

func levelName(k *bf16.Kernel) string {
	if k == nil {
		return "f32"
	}
	return k.Level.String()
}

// isRParam reports whether p is a layer's R (layers.L.attn.R).
func isRParam(p *model.Param) bool { return strings.HasSuffix(p.Name, ".attn.R") }
