package model_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
)

// The unmasked ("causal": false) synthesizer attention through the whole
// network: the forward against the card's float64 network with every key
// j < t (refLoss), the gradients against finite differences, and the
// attention maps over the full square. A bidirectional spec is a
// classifier (the spec rules), so they run the classifier's path
// (ForwardClassify with labels: pooled lnf output, head, cross-entropy),
// whose loss and class logits depend on every position's attention.

// bidiSpecs are the bidirectional specs checked, with a length below n
// that is no multiple of 8 or 16.
var bidiSpecs = []struct {
	name string
	t    int
}{
	{"enc_odd", 13}, {"enc_vanilla", 11}, {"enc_random_vanilla", 9}, {"enc_factorized_dense", 21},
}

// bidiModel is newModel for a bidirectional spec, a classifier.
func bidiModel(t *testing.T, name string) *model.Model {
	t.Helper()
	m := newModel(t, name, 1)
	if m.Spec.Causal() {
		t.Fatalf("spec %s is causal", name)
	}
	if m.Classes() == 0 {
		t.Fatalf("spec %s is bidirectional but no classifier", name)
	}
	return m
}

func TestBidirectionalReference(t *testing.T) {
	for _, c := range append(bidiSpecs, struct {
		name string
		t    int
	}{"enc_odd", 60}, struct {
		name string
		t    int
	}{"enc_odd", 1}) {
		t.Run(fmt.Sprintf("%s/t=%d", c.name, c.t), func(t *testing.T) {
			m := bidiModel(t, c.name)
			perturb(m, 2)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(9, batch, c.t)
			tg = trainTargets(m, tg, batch)
			loss := m.ForwardClassify(ws, in, tg, batch)
			want, wantLogits := refLoss(m, in, tg, batch)
			if math.Abs(loss-want) > 2e-6*want {
				t.Errorf("loss %.8f, reference %.8f", loss, want)
			}
			worst := refWorst(m, ws, wantLogits, batch, c.t)
			if worst > 1e-4 {
				t.Errorf("logits differ from the reference by up to %.3g", worst)
			}
			t.Logf("loss %.7f, reference %.7f, worst logit difference %.2g", loss, want, worst)
		})
	}
}

func TestBidirectionalGradients(t *testing.T) {
	for _, gs := range bidiSpecs {
		t.Run(gs.name, func(t *testing.T) {
			m := bidiModel(t, gs.name)
			m.SetWorkers(1)
			perturb(m, 2)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(3, batch, gs.t)
			tg = trainTargets(m, tg, batch)
			loss := m.ForwardClassify(ws, in, tg, batch)
			m.Backward(ws)
			if math.IsNaN(loss) || loss <= 0 {
				t.Fatalf("loss %v", loss)
			}
			problems, n, kinks := verifyGrads(m, ws, in, tg, batch, loss, m.Params)
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("%s: %d tensors, %d entries checked (%d replaced at ReLU kinks), %d problems (loss %.4f)",
				gs.name, len(m.Params), n, kinks, len(problems), loss)
		})
	}
}

// TestBidirectionalAttentionMap: the maps of a bidirectional spec fill the
// square (entries above the diagonal included), rows summing to 1.
func TestBidirectionalAttentionMap(t *testing.T) {
	m := newModel(t, "enc_odd", 3)
	perturb(m, 5)
	const tl = 13
	in, _ := tokens(7, 1, tl)
	ws := m.NewWorkspace(1)
	m.ForwardClassify(ws, in, nil, 1)
	above := false
	for l := 0; l < m.Spec.Layers; l++ {
		for h := 0; h < m.Spec.Heads; h++ {
			dst := make([]float32, tl*tl)
			if got := m.AttentionMap(ws, 0, l, h, dst); got != tl {
				t.Fatalf("AttentionMap returned %d, want %d", got, tl)
			}
			for i := 0; i < tl; i++ {
				sum := 0.0
				for j := 0; j < tl; j++ {
					v := dst[i*tl+j]
					if v < 0 || math.IsNaN(float64(v)) {
						t.Fatalf("layer %d head %d: a[%d,%d] = %g", l, h, i, j, v)
					}
					above = above || j > i && v > 0
					sum += float64(v)
				}
				if math.Abs(sum-1) > 1e-4 {
					t.Fatalf("layer %d head %d: row %d sums to %g", l, h, i, sum)
				}
			}
		}
	}
	if !above {
		t.Error("no weight above the diagonal: the map is causal")
	}
}
