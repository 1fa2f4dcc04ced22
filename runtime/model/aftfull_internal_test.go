package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestAFTFullProducts checks the factorised aft_full (aftfull.go) against
// its per-row-stabilised kernels, forward and every gradient, on ordinary
// weights and on keys and biases spread so wide that some (i, c) fall back
// to the direct computation; unmasked (enc_aft_full, a classifier, whose
// loss and gradients come through the pooled head) too.
func TestAFTFullProducts(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "aft_full", "enc_aft_full", "odd_enc_aft_full"} {
		for _, scale := range []float64{1, 120} {
			t.Run(fmt.Sprintf("%s/scale=%g", name, scale), func(t *testing.T) {
				k, err := kernels.Lookup(name)
				if err != nil {
					t.Skip(err)
				}
				var models [2]*Model
				for i := range models {
					m, err := New(k.Spec, k, 1)
					if err != nil {
						t.Fatal(err)
					}
					m.aftKernels = i == 1
					rng := rand.New(rand.NewPCG(3, 5))
					for _, p := range m.Params {
						s := 0.05
						switch {
						case strings.HasSuffix(p.Name, ".attn.k.weight"):
							s *= scale
						case strings.HasSuffix(p.Name, ".attn.w"):
							s = 0.5 * scale
						}
						for j := range p.Data {
							p.Data[j] += float32(s * rng.NormFloat64())
						}
					}
					models[i] = m
				}
				const batch = 3
				tt := min(k.Spec.N, 40)
				if k.Spec.Bidirectional {
					tt = min(k.Spec.N, 101) // two row blocks of full rows
				}
				rng := rand.New(rand.NewPCG(9, 9))
				in, tg := make([]int32, batch*tt), make([]int32, batch*tt)
				for i := range in {
					in[i], tg[i] = int32(rng.IntN(256)), int32(rng.IntN(256))
				}
				labels := make([]int32, batch)
				for b := range labels {
					labels[b] = int32(rng.IntN(max(k.Spec.Classes, 1)))
				}
				var loss [2]float64
				var ws [2]*Workspace
				for i, m := range models {
					ws[i] = m.NewWorkspace(batch)
					if m.classes > 0 { // a bidirectional spec: the classifier, labelled by tg
						loss[i] = m.ForwardClassify(ws[i], in, labels, batch)
					} else {
						loss[i] = m.Forward(ws[i], in, tg, batch)
					}
					m.Backward(ws[i])
				}
				if math.Abs(loss[0]-loss[1]) > 1e-5*math.Abs(loss[1]) {
					t.Errorf("loss %.8f, kernels %.8f", loss[0], loss[1])
				}
				direct := 0
				for l := range models[0].layers {
					lw := &ws[0].lay[l]
					nx := batch * 2 * models[0].d
					for i := 0; i < tt; i++ {
						for s := 0; s < batch; s++ {
							for _, den := range lw.nd[i*nx+s*nx/batch+nx/batch/2 : i*nx+(s+1)*nx/batch] {
								if den < aftTiny {
									direct++
								}
							}
						}
					}
				}
				if scale > 1 && direct == 0 {
					t.Fatalf("no (i, c) took the direct path: the test does not reach it")
				}
				t.Logf("%d (i, c) computed directly", direct)
				for pi, p := range models[0].Params {
					q := models[1].Params[pi]
					mag := 0.0
					for _, g := range q.Grad {
						mag = math.Max(mag, math.Abs(float64(g)))
					}
					for j, g := range p.Grad {
						if d := math.Abs(float64(g) - float64(q.Grad[j])); d > 2e-3*mag+1e-7 {
							t.Errorf("%s[%d]: gradient %g, kernels %g (largest %g)", p.Name, j, g, q.Grad[j], mag)
							break
						}
					}
				}
			})
		}
	}
}
