package model_test

import (
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
)

// TestAttentionMap: every map is causal with rows summing to 1; random's
// is softmax(R) and AFT's the softmax of its position bias, computed here
// independently; input-dependent maps depend on the input and are those
// of the same sequence run alone, whatever its place in the batch.
func TestAttentionMap(t *testing.T) {
	cases := []struct {
		name string
		kind model.AttentionKind
	}{
		{"small", model.AttentionProbs}, {"odd", model.AttentionProbs}, {"odd_linear", model.AttentionLinear},
		{"odd_aft_full", model.AttentionPositionBias}, {"odd_aft_local", model.AttentionPositionBias},
		{"odd_aft_conv", model.AttentionPositionBias}, {"odd_aft_simple", model.AttentionNone},
		// Bidirectional: every row over all the keys j < t.
		{"odd_enc_linear", model.AttentionLinear}, {"odd_enc_aft_full", model.AttentionPositionBias},
		{"odd_enc_aft_local", model.AttentionPositionBias}, {"odd_enc_aft_conv", model.AttentionPositionBias},
		{"odd_enc_aft_simple", model.AttentionNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := newModel(t, c.name, 3)
			perturb(m, 5)
			s := m.Spec
			if k := m.AttentionKind(); k != c.kind {
				t.Fatalf("AttentionKind %d, want %d", k, c.kind)
			}
			const tl = 23
			keys := func(i int) int { // row i sees the keys j < keys(i)
				if s.Bidirectional {
					return tl
				}
				return i + 1
			}
			in, _ := tokens(7, 2, tl)
			ws := m.NewWorkspace(2)
			forward(m, ws, in, nil, 2)
			maps := map[[3]int][]float32{}
			for sq := 0; sq < 2; sq++ {
				for l := 0; l < s.Layers; l++ {
					for h := 0; h < s.Heads; h++ {
						dst := make([]float32, tl*tl)
						got := m.AttentionMap(ws, sq, l, h, dst)
						if c.kind == model.AttentionNone {
							if got != 0 {
								t.Fatalf("AttentionMap of %s returned %d", s.Variant, got)
							}
							return
						}
						if got != tl {
							t.Fatalf("AttentionMap returned t = %d, want %d", got, tl)
						}
						for i := 0; i < tl; i++ {
							sum := 0.0
							for j := 0; j < tl; j++ {
								v := dst[i*tl+j]
								if j >= keys(i) && v != 0 || v < 0 || math.IsNaN(float64(v)) {
									t.Fatalf("layer %d head %d: a[%d,%d] = %g", l, h, i, j, v)
								}
								sum += float64(v)
							}
							if math.Abs(sum-1) > 1e-4 {
								t.Fatalf("layer %d head %d: row %d sums to %g", l, h, i, sum)
							}
						}
						maps[[3]int{sq, l, h}] = dst
					}
				}
			}
			// Independent computations of the input-independent maps.
			softmaxRows := func(bias func(i, j int) float64, l, h int) {
				for sq := 0; sq < 2; sq++ {
					a := maps[[3]int{sq, l, h}]
					for i := 0; i < tl; i++ {
						mx := math.Inf(-1)
						for j := 0; j < keys(i); j++ {
							mx = math.Max(mx, bias(i, j))
						}
						z := 0.0
						for j := 0; j < keys(i); j++ {
							z += math.Exp(bias(i, j) - mx)
						}
						for j := 0; j < keys(i); j++ {
							if want := math.Exp(bias(i, j)-mx) / z; math.Abs(float64(a[i*tl+j])-want) > 1e-5 {
								t.Fatalf("layer %d head %d: a[%d,%d] = %g, want %g", l, h, i, j, a[i*tl+j], want)
							}
						}
					}
				}
			}
			n := s.N
			dist := func(i, j int) int { // causal rows never reach j > i
				if i < j {
					return j - i
				}
				return i - j
			}
			uw, u0 := s.Window, 0 // u[h, i − j + u0]
			if s.Bidirectional {
				uw, u0 = 2*s.Window-1, s.Window-1
			}
			for l := 0; l < s.Layers; l++ {
				for h := 0; h < s.Heads; h++ {
					switch s.Variant {
					case "random":
						r := m.Param("layers." + itoa(l) + ".attn.R").Data
						softmaxRows(func(i, j int) float64 { return float64(r[h*n*n+i*n+j]) }, l, h)
					case "aft_full":
						w := m.Param("layers." + itoa(l) + ".attn.w").Data
						softmaxRows(func(i, j int) float64 { return float64(w[i*n+j]) }, l, h)
					case "aft_local":
						w := m.Param("layers." + itoa(l) + ".attn.w").Data
						softmaxRows(func(i, j int) float64 {
							if dist(i, j) < s.Window {
								return float64(w[i*n+j])
							}
							return 0
						}, l, h)
					case "aft_conv":
						u := m.Param("layers." + itoa(l) + ".attn.u").Data
						softmaxRows(func(i, j int) float64 {
							if dist(i, j) < s.Window {
								return float64(u[h*uw+i-j+u0])
							}
							return 0
						}, l, h)
					}
				}
			}
			if c.name != "odd" && c.name != "odd_linear" && c.name != "odd_enc_linear" {
				return
			}
			// Input-dependent: the two sequences differ; sequence 1 alone
			// gives sequence 1's maps.
			if equal(maps[[3]int{0, 0, 0}], maps[[3]int{1, 0, 0}]) {
				t.Error("the maps of two different sequences are equal")
			}
			ws1 := m.NewWorkspace(1)
			forward(m, ws1, in[tl:], nil, 1)
			for l := 0; l < s.Layers; l++ {
				for h := 0; h < s.Heads; h++ {
					dst := make([]float32, tl*tl)
					m.AttentionMap(ws1, 0, l, h, dst)
					b := maps[[3]int{1, l, h}]
					for i := range dst {
						if math.Abs(float64(dst[i]-b[i])) > 1e-5 {
							t.Fatalf("layer %d head %d: sequence 1 alone differs at %d: %g vs %g", l, h, i, dst[i], b[i])
						}
					}
				}
			}
		})
	}
}

func equal(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestAttentionMapAfterBackward: a Backward turns the kept probabilities
// into gradients, so AttentionMap refuses.
func TestAttentionMapAfterBackward(t *testing.T) {
	m := newModel(t, "small", 1)
	in, tg := tokens(1, 1, 10)
	ws := m.NewWorkspace(1)
	m.Forward(ws, in, tg, 1)
	m.Backward(ws)
	defer func() {
		if recover() == nil {
			t.Error("AttentionMap after Backward did not panic")
		}
	}()
	m.AttentionMap(ws, 0, 0, 0, make([]float32, 100))
}
