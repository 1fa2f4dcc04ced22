package model_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// refAttnFree writes into y ([t][d], zero) the output before o of the
// attention-free and linear variants for one sequence, straight from the
// card's table in float64, and reports whether the spec is one of them.
// For a bidirectional spec every row sees every key j < t, aft_local's and
// aft_conv's window is |i − j| < window and u[h, i − j + window − 1].
func refAttnFree(s specs.Spec, P func(string) []float64, lin func([][]float64, string) [][]float64,
	pre string, h, v, y [][]float64) bool {
	switch s.Variant {
	case "aft_full", "aft_local", "aft_simple", "aft_conv", "linear":
	default:
		return false
	}
	t, d, n, dh := len(h), s.D, s.N, s.DH()
	q, k := lin(h, pre+"attn.q"), lin(h, pre+"attn.k")
	keys := func(i int) int { // row i sees the keys j < keys(i)
		if s.Bidirectional {
			return t
		}
		return i + 1
	}
	if s.Variant == "linear" {
		phi := func(x float64) float64 {
			if x > 0 {
				return x + 1
			}
			return math.Exp(x)
		}
		for hh := 0; hh < s.Heads; hh++ {
			for i := 0; i < t; i++ {
				den := 1e-6
				num := make([]float64, dh)
				for j := 0; j < keys(i); j++ {
					dot := 0.0 // φ(Q_i)·φ(K_j)
					for p := 0; p < dh; p++ {
						dot += phi(q[i][hh*dh+p]) * phi(k[j][hh*dh+p])
					}
					den += dot
					for c := range num {
						num[c] += dot * v[j][hh*dh+c]
					}
				}
				for c := range num {
					y[i][hh*dh+c] = num[c] / den
				}
			}
		}
		return true
	}
	w, u := P(pre+"attn.w"), P(pre+"attn.u")
	for i := 0; i < t; i++ {
		for c := 0; c < d; c++ {
			bias := func(j int) float64 {
				dist, uw, ui := i-j, s.Window, i-j
				if s.Bidirectional {
					dist, uw, ui = max(i-j, j-i), 2*s.Window-1, i-j+s.Window-1
				}
				switch s.Variant {
				case "aft_full":
					return w[i*n+j]
				case "aft_local":
					if dist < s.Window {
						return w[i*n+j]
					}
				case "aft_conv":
					if dist < s.Window {
						return u[(c/dh)*uw+ui]
					}
				}
				return 0
			}
			mx := math.Inf(-1)
			for j := 0; j < keys(i); j++ {
				mx = math.Max(mx, k[j][c]+bias(j))
			}
			num, den := 0.0, 0.0
			for j := 0; j < keys(i); j++ {
				e := math.Exp(k[j][c] + bias(j) - mx)
				num += e * v[j][c]
				den += e
			}
			y[i][c] = num / den / (1 + math.Exp(-q[i][c]))
		}
	}
	return true
}

// attnFreeSpecs are the attention-free and linear specs the tests cover,
// with the t the gradient check uses (beyond the window where there is one).
var attnFreeSpecs = []struct {
	name string
	t    int
}{
	{"aft_full", 7}, {"aft_local", 17}, {"aft_simple", 7}, {"aft_conv", 7}, {"linear", 7},
	{"odd_aft_full", 12}, {"odd_aft_local", 12}, {"odd_aft_simple", 12}, {"odd_aft_conv", 12},
	{"odd_linear", 12}, {"odd_aft_local_w1", 9}, {"odd_aft_local_wn", 9},
	// Bidirectional (unmasked) encoders: t beyond the window, t < n.
	{"enc_aft_full", 21}, {"enc_aft_local", 37}, {"enc_aft_simple", 13}, {"enc_aft_conv", 37}, {"enc_linear", 13},
	{"odd_enc_aft_full", 12}, {"odd_enc_aft_local", 17}, {"odd_enc_aft_simple", 12}, {"odd_enc_aft_conv", 17},
	{"odd_enc_linear", 12},
}

// TestAttnFreeReference compares the forward pass with the naive float64
// network of the card (a bidirectional spec's: the classifier's, loss and
// class logits).
func TestAttnFreeReference(t *testing.T) {
	for _, gs := range attnFreeSpecs {
		for _, tt := range []int{1, gs.t + 3} {
			t.Run(fmt.Sprintf("%s/t=%d", gs.name, tt), func(t *testing.T) {
				m := newModel(t, gs.name, 1)
				perturb(m, 2)
				const batch = 2
				ws := m.NewWorkspace(batch)
				in, tg := tokens(9, batch, tt)
				tg = trainTargets(m, tg, batch)
				loss := forward(m, ws, in, tg, batch)
				want, wantLogits := refLoss(m, in, tg, batch)
				if math.Abs(loss-want) > 2e-6*want {
					t.Errorf("loss %.8f, reference %.8f", loss, want)
				}
				if worst := refWorst(m, ws, wantLogits, batch, tt); worst > 1e-4 {
					t.Errorf("logits differ from the reference by up to %.3g", worst)
				}
			})
		}
	}
}

// TestAttnFreeGradients checks every parameter's gradient against finite
// differences through the whole network (a bidirectional spec's: the
// classifier's, its head included).
func TestAttnFreeGradients(t *testing.T) {
	for _, gs := range attnFreeSpecs {
		if testing.Short() && !strings.HasPrefix(gs.name, "odd_") {
			continue // the shipped sizes take seconds each
		}
		t.Run(gs.name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, gs.name, 1)
			m.SetWorkers(1)
			perturb(m, 2)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(3, batch, gs.t)
			tg = trainTargets(m, tg, batch)
			loss := forward(m, ws, in, tg, batch)
			m.Backward(ws)
			if math.IsNaN(loss) || loss <= 0 {
				t.Fatalf("loss %v", loss)
			}
			problems, n, _ := verifyGrads(m, ws, in, tg, batch, loss, m.Params)
			for _, p := range problems {
				t.Error(p)
			}
			t.Logf("%s: %d tensors, %d entries checked, %d problems (loss %.4f)",
				gs.name, len(m.Params), n, len(problems), loss)
		})
	}
}

// TestAttnFreeGradCheckCatches makes sure the check fails on broken
// gradients of the new parameters and of the gated / feature-mapped paths.
func TestAttnFreeGradCheckCatches(t *testing.T) {
	for name, params := range map[string][]string{
		"odd_aft_full":  {"layers.0.attn.w", "layers.1.attn.q.weight", "layers.0.attn.k.weight"},
		"odd_aft_local": {"layers.1.attn.w"},
		"odd_aft_conv":  {"layers.0.attn.u", "layers.1.attn.v.weight"},
		"odd_linear":    {"layers.0.attn.q.weight", "layers.1.attn.k.bias"},
	} {
		m := newModel(t, name, 1)
		m.SetWorkers(1)
		perturb(m, 2)
		const batch = 2
		ws := m.NewWorkspace(batch)
		in, tg := tokens(3, batch, 12)
		loss := m.Forward(ws, in, tg, batch)
		m.Backward(ws)
		for _, pn := range params {
			p := m.Param(pn)
			if p == nil {
				t.Fatalf("%s: no parameter %s", name, pn)
			}
			saved := append([]float32(nil), p.Grad...)
			for _, broken := range []string{"doubled", "negated", "zeroed"} {
				for i := range p.Grad {
					switch broken {
					case "doubled":
						p.Grad[i] = saved[i] * 2
					case "negated":
						p.Grad[i] = -saved[i]
					default:
						p.Grad[i] = 0
					}
				}
				if bad, _, _ := verifyGrads(m, ws, in, tg, batch, loss, []*model.Param{p}); len(bad) == 0 {
					t.Errorf("%s %s: a %s gradient passed the check", name, pn, broken)
				}
			}
			copy(p.Grad, saved)
		}
	}
}

// TestAttnFreeParams checks the extra parameters' names, shapes, flags and
// zero initialisation, and that no synthesizer parameter is created.
func TestAttnFreeParams(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "odd_aft_local", "odd_aft_simple", "odd_aft_conv", "odd_linear", "enc_aft_conv", "enc_aft_full"} {
		m := newModel(t, name, 7)
		s := m.Spec
		want := map[string][]int{}
		for l := 0; l < s.Layers; l++ {
			pre := fmt.Sprintf("layers.%d.attn.", l)
			for _, n := range []string{"q", "k", "v", "o"} {
				want[pre+n+".weight"] = []int{s.D, s.D}
				want[pre+n+".bias"] = []int{s.D}
			}
			switch s.Variant {
			case "aft_full", "aft_local":
				want[pre+"w"] = []int{s.N, s.N}
			case "aft_conv":
				want[pre+"u"] = []int{s.Heads, s.Window}
				if s.Bidirectional {
					want[pre+"u"] = []int{s.Heads, 2*s.Window - 1} // centred on the query
				}
			}
		}
		got := 0
		for _, p := range m.Params {
			if !strings.Contains(p.Name, ".attn.") {
				continue
			}
			got++
			w, ok := want[p.Name]
			if !ok {
				t.Errorf("%s: unexpected parameter %s", name, p.Name)
				continue
			}
			if fmt.Sprint(w) != fmt.Sprint(p.Shape) {
				t.Errorf("%s: %s shape %v, want %v", name, p.Name, p.Shape, w)
			}
			isBias := strings.HasSuffix(p.Name, ".w") || strings.HasSuffix(p.Name, ".u")
			if wantDecay := len(w) >= 2 && !strings.HasSuffix(p.Name, ".u"); p.Decay != wantDecay || p.Frozen || p.Grad == nil {
				t.Errorf("%s: %s Decay %v (want %v) Frozen %v", name, p.Name, p.Decay, wantDecay, p.Frozen)
			}
			if isBias {
				for _, v := range p.Data {
					if v != 0 {
						t.Errorf("%s: %s not initialised to 0", name, p.Name)
						break
					}
				}
			}
		}
		if got != len(want) {
			t.Errorf("%s: %d attention tensors, want %d", name, got, len(want))
		}
	}
}

// TestAttnFreeDeterminism: bit-identical losses, logits and gradients with
// 1, 2 and 3 workers.
func TestAttnFreeDeterminism(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "aft_local", "odd_aft_simple", "odd_aft_conv", "odd_linear"} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t, name, 1)
			perturb(m, 2)
			const batch = 3
			ws := m.NewWorkspace(batch)
			in, tg := tokens(4, batch, 37)
			var loss0 float64
			var logits0 []float32
			var grads0 [][]float32
			for _, w := range []int{1, 2, 3} {
				m.SetWorkers(w)
				loss := m.Forward(ws, in, tg, batch)
				logits := append([]float32(nil), ws.Logits(2, 36)...)
				m.Backward(ws)
				grads := gradsOf(m)
				if w == 1 {
					loss0, logits0, grads0 = loss, logits, grads
					continue
				}
				if math.Float64bits(loss) != math.Float64bits(loss0) {
					t.Fatalf("%d workers: loss %v, 1 worker: %v", w, loss, loss0)
				}
				for i := range logits {
					if math.Float32bits(logits[i]) != math.Float32bits(logits0[i]) {
						t.Fatalf("%d workers: logit %d = %v, 1 worker: %v", w, i, logits[i], logits0[i])
					}
				}
				for pi, g := range grads {
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(grads0[pi][i]) {
							t.Fatalf("%d workers: %s grad[%d] = %v, 1 worker: %v", w, m.Params[pi].Name, i, g[i], grads0[pi][i])
						}
					}
				}
			}
		})
	}
}

// TestAttnFreeNoAllocs: Forward+Backward allocate nothing once the
// workspace exists.
func TestAttnFreeNoAllocs(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "odd_aft_local", "odd_aft_simple", "odd_aft_conv", "odd_linear"} {
		for _, workers := range []int{1, 2} {
			m := newModel(t, name, 1)
			m.SetWorkers(workers)
			const batch = 2
			ws := m.NewWorkspace(batch)
			in, tg := tokens(5, batch, 20)
			allocs := testing.AllocsPerRun(10, func() {
				m.Forward(ws, in, tg, batch)
				m.Backward(ws)
			})
			if allocs != 0 {
				t.Errorf("%s, %d workers: Forward+Backward allocate %v times per step", name, workers, allocs)
			}
		}
	}
}

// TestAttnFreeLargeInputs: huge biases and keys (±1e4 logits) give a
// finite loss and finite gradients.
func TestAttnFreeLargeInputs(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "odd_aft_conv", "odd_aft_local"} {
		m := newModel(t, name, 1)
		perturb(m, 2)
		for _, p := range m.Params {
			if strings.HasSuffix(p.Name, ".attn.w") || strings.HasSuffix(p.Name, ".attn.u") || strings.HasSuffix(p.Name, ".attn.k.bias") {
				for i := range p.Data {
					p.Data[i] = float32(1e4 * float64(1-2*(i%2)))
				}
			}
		}
		ws := m.NewWorkspace(2)
		in, tg := tokens(5, 2, 30)
		loss := m.Forward(ws, in, tg, 2)
		m.Backward(ws)
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			t.Errorf("%s: loss %v", name, loss)
		}
		for _, p := range m.Params {
			for _, g := range p.Grad {
				if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
					t.Errorf("%s: %s has a non-finite gradient", name, p.Name)
					break
				}
			}
		}
	}
}

// TestAttnFreeLearns trains each variant (odd sizes) with Adam on a
// repeating sentence, whose next byte often depends on more than the
// current one (the best bigram model scores 0.635 nats), and expects the
// loss to fall from ln 256 ≈ 5.55 to well below that: the attention must
// carry context.
func TestAttnFreeLearns(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "odd_aft_local", "odd_aft_simple", "odd_aft_conv", "odd_linear"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newModel(t, name, 1)
			m.SetWorkers(1)
			first, last := trainAdam(m, strings.Repeat("the quick brown fox jumps over the lazy dog. ", 40), 4, 150, 3e-3)
			t.Logf("loss %.4f → %.4f", first, last)
			if !(first > 4.5) || !(last < 0.4) {
				t.Fatalf("loss %.4f → %.4f: did not learn the repeating text", first, last)
			}
		})
	}
}

// trainAdam runs steps of Adam on random windows of text and returns the
// first and the last loss.
func trainAdam(m *model.Model, text string, batch, steps int, lr float64) (first, loss float64) {
	n := m.Spec.N
	ws := m.NewWorkspace(batch)
	in := make([]int32, batch*n)
	tg := make([]int32, batch*n)
	rng := rand.New(rand.NewPCG(1, 2))
	mom := make([][]float32, len(m.Params))
	vel := make([][]float32, len(m.Params))
	for i, p := range m.Params {
		mom[i] = make([]float32, len(p.Data))
		vel[i] = make([]float32, len(p.Data))
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	for step := 1; step <= steps; step++ {
		for b := 0; b < batch; b++ {
			o := rng.IntN(len(text) - n - 1)
			for i := 0; i < n; i++ {
				in[b*n+i] = int32(text[o+i])
				tg[b*n+i] = int32(text[o+i+1])
			}
		}
		loss = m.Forward(ws, in, tg, batch)
		if step == 1 {
			first = loss
		}
		m.Backward(ws)
		c1 := 1 - math.Pow(b1, float64(step))
		c2 := 1 - math.Pow(b2, float64(step))
		for pi, p := range m.Params {
			if p.Frozen {
				continue
			}
			for i, g := range p.Grad {
				mom[pi][i] = b1*mom[pi][i] + (1-b1)*g
				vel[pi][i] = b2*vel[pi][i] + (1-b2)*g*g
				mh := float64(mom[pi][i]) / c1
				vh := float64(vel[pi][i]) / c2
				p.Data[i] -= float32(lr * mh / (math.Sqrt(vh) + eps))
			}
		}
	}
	return first, loss
}
