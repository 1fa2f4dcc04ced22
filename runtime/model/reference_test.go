package model_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
)

// refLoss is the card's network written out naively in float64, straight
// from the formulas of docs/model.md, for one batch: it returns
// the mean cross-entropy and the logits of every position. For a
// classifier (the card's "Encoders and classification") tg holds one label
// per sequence, and it returns the mean cross-entropy over the sequences
// and every sequence's class logits: h = lnf(x), pooled = the mean of h's
// t rows, logits = head(pooled).
func refLoss(m *model.Model, in, tg []int32, batch int) (float64, [][]float64) {
	s := m.Spec
	t := len(in) / batch
	d, n, heads, dh := s.D, s.N, s.Heads, s.DH()
	cache := map[string][]float64{}
	P := func(name string) []float64 {
		if out, ok := cache[name]; ok {
			return out
		}
		p := m.Param(name)
		if p == nil {
			return nil
		}
		out := make([]float64, len(p.Data))
		for i, v := range p.Data {
			out[i] = float64(v)
		}
		cache[name] = out
		return out
	}
	// lin applies a linear layer to each row of x ([rows][in]).
	lin := func(x [][]float64, name string) [][]float64 {
		w, b := P(name+".weight"), P(name+".bias")
		out := len(b)
		in := len(w) / out
		y := make([][]float64, len(x))
		for r, row := range x {
			y[r] = make([]float64, out)
			for o := 0; o < out; o++ {
				acc := b[o]
				for i := 0; i < in; i++ {
					acc += row[i] * w[o*in+i]
				}
				y[r][o] = acc
			}
		}
		return y
	}
	ln := func(x [][]float64, name string) [][]float64 {
		w, b := P(name+".weight"), P(name+".bias")
		y := make([][]float64, len(x))
		for r, row := range x {
			mu, v := 0.0, 0.0
			for _, e := range row {
				mu += e
			}
			mu /= float64(len(row))
			for _, e := range row {
				v += (e - mu) * (e - mu)
			}
			v /= float64(len(row))
			y[r] = make([]float64, len(row))
			for c, e := range row {
				y[r][c] = (e-mu)/math.Sqrt(v+1e-5)*w[c] + b[c]
			}
		}
		return y
	}
	head := func(x [][]float64, h int) [][]float64 { // X_h: rows of head h's columns
		out := make([][]float64, len(x))
		for r := range x {
			out[r] = x[r][h*dh : (h+1)*dh]
		}
		return out
	}
	tok, pos := P("tok_emb"), P("pos_emb")
	var logits [][]float64
	total := 0.0
	for b := 0; b < batch; b++ {
		x := make([][]float64, t)
		for i := 0; i < t; i++ {
			x[i] = make([]float64, d)
			for c := 0; c < d; c++ {
				x[i][c] = tok[int(in[b*t+i])*d+c] + pos[i*d+c]
			}
		}
		for l := 0; l < s.Layers; l++ {
			pre := fmt.Sprintf("layers.%d.", l)
			h := ln(x, pre+"ln1")
			v := lin(h, pre+"attn.v")
			var q, k, g, fa, fb [][]float64
			if s.Has("vanilla") {
				q, k = lin(h, pre+"attn.q"), lin(h, pre+"attn.k")
			}
			if s.Has("dense") || s.Has("factorized_dense") {
				g = lin(h, pre+"attn.w1")
				for _, row := range g {
					for c := range row {
						row[c] = math.Max(row[c], 0)
					}
				}
			}
			comps := s.Components()
			w := []float64{1}
			if len(comps) > 1 {
				mix := P(pre + "attn.mix")
				w = make([]float64, len(mix))
				z := 0.0
				for i, v := range mix {
					w[i] = math.Exp(v)
					z += w[i]
				}
				for i := range w {
					w[i] /= z
				}
			}
			y := make([][]float64, t)
			for i := range y {
				y[i] = make([]float64, d)
			}
			nh := heads
			if refAttnFree(s, P, lin, pre, h, v, y) {
				nh = 0 // the attention-free and linear variants: y is written
			}
			for hh := 0; hh < nh; hh++ {
				B := make([][]float64, t)
				for i := range B {
					B[i] = make([]float64, t)
				}
				if s.Has("factorized_dense") {
					fa, fb = lin(head(g, hh), pre+"attn.fa"), lin(head(g, hh), pre+"attn.fb")
				}
				// keys(i) is the number of keys row i sees: i+1 under
				// the causal mask, t for a bidirectional spec.
				keys := func(i int) int {
					if s.Causal() {
						return i + 1
					}
					return t
				}
				for ci, c := range comps {
					for i := 0; i < t; i++ {
						for j := 0; j < keys(i); j++ {
							var e float64
							switch c {
							case "vanilla":
								for p := 0; p < dh; p++ {
									e += q[i][hh*dh+p] * k[j][hh*dh+p]
								}
								e /= math.Sqrt(float64(dh))
							case "dense":
								w2, b2 := P(pre+"attn.w2.weight"), P(pre+"attn.w2.bias")
								e = b2[j]
								for p := 0; p < dh; p++ {
									e += g[i][hh*dh+p] * w2[j*dh+p]
								}
							case "random", "fixed_random":
								e = P(pre + "attn.R")[(hh*n+i)*n+j]
							case "factorized_random":
								r1, r2 := P(pre+"attn.R1"), P(pre+"attn.R2")
								for p := 0; p < s.K; p++ {
									e += r1[(hh*n+i)*s.K+p] * r2[(hh*n+j)*s.K+p]
								}
							case "factorized_dense":
								e = fa[i][j/s.B] * fb[i][j%s.B]
							}
							B[i][j] += w[ci] * e
						}
					}
				}
				for i := 0; i < t; i++ {
					mx := math.Inf(-1)
					for j := 0; j < keys(i); j++ {
						mx = math.Max(mx, B[i][j])
					}
					z := 0.0
					for j := 0; j < keys(i); j++ {
						z += math.Exp(B[i][j] - mx)
					}
					for j := 0; j < keys(i); j++ {
						a := math.Exp(B[i][j]-mx) / z
						for p := 0; p < dh; p++ {
							y[i][hh*dh+p] += a * v[j][hh*dh+p]
						}
					}
				}
			}
			o := lin(y, pre+"attn.o")
			for i := range x {
				for c := range x[i] {
					x[i][c] += o[i][c]
				}
			}
			u := lin(ln(x, pre+"ln2"), pre+"fc1")
			for _, row := range u {
				for c, e := range row {
					row[c] = 0.5 * e * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(e+0.044715*e*e*e)))
				}
			}
			f := lin(u, pre+"fc2")
			for i := range x {
				for c := range x[i] {
					x[i][c] += f[i][c]
				}
			}
		}
		xf := ln(x, "lnf")
		if k := m.Classes(); k > 0 {
			pooled := make([]float64, d)
			for i := 0; i < t; i++ {
				for c := 0; c < d; c++ {
					pooled[c] += xf[i][c] / float64(t)
				}
			}
			lg := lin([][]float64{pooled}, "head")[0]
			if len(lg) != k {
				panic(fmt.Sprintf("refLoss: head gives %d logits, want %d", len(lg), k))
			}
			mx := math.Inf(-1)
			for _, e := range lg {
				mx = math.Max(mx, e)
			}
			z := 0.0
			for _, e := range lg {
				z += math.Exp(e - mx)
			}
			total += mx + math.Log(z) - lg[tg[b]]
			logits = append(logits, lg)
			continue
		}
		for i := 0; i < t; i++ {
			lg := make([]float64, s.Vocab)
			mx := math.Inf(-1)
			for v := range lg {
				for c := 0; c < d; c++ {
					lg[v] += xf[i][c] * tok[v*d+c]
				}
				mx = math.Max(mx, lg[v])
			}
			z := 0.0
			for _, e := range lg {
				z += math.Exp(e - mx)
			}
			total += mx + math.Log(z) - lg[tg[b*t+i]]
			logits = append(logits, lg)
		}
	}
	if m.Classes() > 0 {
		return total / float64(batch), logits
	}
	return total / float64(batch*t), logits
}

// TestReference compares the forward pass with the naive float64 network
// of the card for every synthesizer variant and the mixtures.
func TestReference(t *testing.T) {
	cases := []struct {
		name       string
		t, wsBatch int
	}{{"odd", 60, 2}, {"odd", 1, 3}, {"random_vanilla", 128, 2}}
	for _, gs := range gradSpecs {
		cases = append(cases, struct {
			name       string
			t, wsBatch int
		}{gs.name, gs.t + 3, 2})
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/t=%d", c.name, c.t), func(t *testing.T) {
			m := newModel(t, c.name, 1)
			perturb(m, 2)
			const batch = 2
			tt := c.t
			ws := m.NewWorkspace(c.wsBatch)
			in, tg := tokens(9, batch, tt)
			loss := m.Forward(ws, in, tg, batch)
			want, wantLogits := refLoss(m, in, tg, batch)
			if math.Abs(loss-want) > 2e-6*want {
				t.Errorf("loss %.8f, reference %.8f", loss, want)
			}
			worst := 0.0
			for b := 0; b < batch; b++ {
				for i := 0; i < tt; i++ {
					got := ws.Logits(b, i)
					for v, e := range wantLogits[b*tt+i] {
						worst = math.Max(worst, math.Abs(float64(got[v])-e))
					}
				}
			}
			if worst > 1e-4 {
				t.Errorf("logits differ from the reference by up to %.3g", worst)
			}
			t.Logf("loss %.7f, reference %.7f, worst logit difference %.2g", loss, want, worst)
		})
	}
}
