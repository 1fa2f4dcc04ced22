package model_test

import (
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// decodeTol is the decoder's tolerance against Forward: at every position,
// max_v |decoder_v − forward_v| ≤ decodeTol · max(1, max_v |forward_v|)
// over the vocab logits (float32 rounding of the same formulas summed in
// other orders).
const decodeTol = 1e-5

// logitsErr is the relative error of got against want in decodeTol's
// metric.
func logitsErr(got, want []float32) float64 {
	var worst, scale float64 = 0, 1
	for v, w := range want {
		worst = math.Max(worst, math.Abs(float64(got[v])-float64(w)))
		scale = math.Max(scale, math.Abs(float64(w)))
	}
	return worst / scale
}

// perturbDecode is perturb with its changes scaled by √(128/d) at widths
// d above 128, and then vanilla's q and k weights halved. Both keep the
// network's amplification of float32 rounding near that of the d 128
// specs: with perturb's std (0.2 on the attention's weights, 0.05 on the
// others) regardless of width, the attention logits Q·K/√dh reach ~10 at
// d 256 and the blocks' gains grow with d, so that Forward itself is
// 1e-5 (relative) from the float64 reference of reference_test.go
// (measured: 5.5e-5 on logits up to 5.6 at spec big, where the decoder is
// 4.7e-5 from it), and the two float32 computations differ by that much.
// Scaled, the weights are still far from the initialisation (attention
// neither uniform nor one-hot), and the decoder and Forward agree to a
// few 1e-6.
func perturbDecode(m *model.Model) {
	init := make([][]float32, len(m.Params))
	for i, p := range m.Params {
		init[i] = append([]float32(nil), p.Data...)
	}
	perturb(m, 2)
	scale := float32(math.Sqrt(128 / math.Max(128, float64(m.Spec.D))))
	for i, p := range m.Params {
		f := scale
		if m.Spec.Has("vanilla") && (strings.HasSuffix(p.Name, ".attn.q.weight") || strings.HasSuffix(p.Name, ".attn.k.weight")) {
			f *= 0.5
		}
		for c, v := range p.Data {
			p.Data[c] = init[i][c] + (v-init[i][c])*f
		}
	}
}

// decodeSpecs are the specs the decoder is checked on: every linked
// causal one (a bidirectional spec's positions see later ones, so it has
// no incremental decoding to check), but n ≥ 512 only without -short, and
// n > 512 only with SYNTHGEN_LONG_TESTS=1 (.ci/run sets it: at n 1024 and
// 2048 the check takes minutes of CPU).
func decodeSpecs(t *testing.T) []string {
	var out []string
	for _, name := range kernels.Names() {
		s, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		if s.Bidirectional || testing.Short() && s.N >= 512 || s.N > 512 && os.Getenv("SYNTHGEN_LONG_TESTS") != "1" {
			continue
		}
		if !s.Causal() {
			continue // a bidirectional encoder sees the future: nothing to decode step by step
		}
		out = append(out, name)
	}
	return out
}

// TestDecoderMatchesForward checks, for every linked spec (every variant
// and mixture), on perturbed weights, that the decoder's logits at every
// position 0 … n−1 equal Forward's on the same tokens: stepping from an
// empty decoder, and after a Prefill of a third of them; then the policy
// beyond n: the token after a full window is predicted exactly as Forward
// on the last max(1, n/2) tokens predicts it, and so are the next ones.
func TestDecoderMatchesForward(t *testing.T) {
	names := decodeSpecs(t)
	// The Go level too (no GEMM micro-kernel: the decoder's plain loops and
	// the one-row kernels' Go versions).
	for _, name := range []string{"odd", "vanilla", "odd_aft_conv", "odd_aft_full"} {
		names = append(names, name+"@go")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var m *model.Model
			if spec, ok := strings.CutSuffix(name, "@go"); ok {
				k, err := kernels.LookupAt(spec, kernels.Go)
				if err != nil {
					t.Fatal(err)
				}
				if m, err = model.New(k.Spec, k, 1); err != nil {
					t.Fatal(err)
				}
			} else {
				m = newModel(t, name, 1)
			}
			m.SetWorkers(1)
			perturbDecode(m)
			n := m.Spec.N
			in, _ := tokens(5, 1, n+3)
			in = in[:n+3]
			for i := range in {
				in[i] %= int32(m.Spec.Vocab)
			}
			ws := m.NewWorkspace(1)
			m.Forward(ws, in[:n], nil, 1)
			check := func(what string, i int, got []float32) {
				t.Helper()
				if e := logitsErr(got, ws.Logits(0, i)); e > decodeTol || math.IsNaN(e) {
					t.Fatalf("%s: position %d: decoder's logits differ from Forward's by %.3g (relative), tolerance %g", what, i, e, decodeTol)
				}
			}
			dc := m.NewDecoder()
			worst := 0.0
			for i := 0; i < n; i++ {
				got := dc.Next(in[i])
				worst = math.Max(worst, logitsErr(got, ws.Logits(0, i)))
				check("steps", i, got)
			}
			p := max(1, n/3)
			check("prefill", p-1, dc.Prefill(in[:p]))
			if dc.Len() != p {
				t.Fatalf("Len after Prefill of %d tokens: %d", p, dc.Len())
			}
			for i := p; i < n; i++ {
				check("prefill+steps", i, dc.Next(in[i]))
			}
			// Beyond n: the window of n tokens is full.
			keep := max(1, n/2)
			ctx := append([]int32(nil), in[n-keep+1:n]...)
			for s := 0; s < 3; s++ {
				got := dc.Next(in[n+s])
				ctx = append(ctx, in[n+s])
				if len(ctx) > n {
					break // n ≤ 2: another re-encode; covered by the first step
				}
				m.Forward(ws, ctx, nil, 1)
				if e := logitsErr(got, ws.Logits(0, len(ctx)-1)); e > decodeTol {
					t.Fatalf("beyond n, token %d: decoder's logits differ from Forward on the last %d tokens by %.3g", n+s, len(ctx), e)
				}
				if dc.Len() != len(ctx) {
					t.Fatalf("beyond n, token %d: Len %d, want %d", n+s, dc.Len(), len(ctx))
				}
			}
			t.Logf("%s (n %d): worst relative difference of the steps %.2g", name, n, worst)
		})
	}
}

// TestDecoderConcurrent steps decoders of one model on several goroutines
// at once (with their prefills; all but one Siblings of it, sharing its
// packed weights) and checks each against a decoder run alone: the steps
// share only read-only state (run with -race).
func TestDecoderConcurrent(t *testing.T) {
	for _, name := range []string{"odd", "odd_aft_conv", "odd_linear"} {
		t.Run(name, func(t *testing.T) {
			m := newModel(t, name, 1)
			perturb(m, 2)
			n := m.Spec.N
			const goroutines = 4
			want := make([][]float32, goroutines)
			seqs := make([][]int32, goroutines)
			for g := range seqs {
				seqs[g], _ = tokens(uint64(10+g), 1, n+5)
				dc := m.NewDecoder()
				dc.Prefill(seqs[g][:3])
				for _, tok := range seqs[g][3:] {
					want[g] = append(want[g], dc.Next(tok)...)
				}
			}
			var wg sync.WaitGroup
			errs := make([]error, goroutines)
			base := m.NewDecoder()
			for g := range seqs {
				wg.Add(1)
				sib := base.Sibling() // shares base's packed weights
				go func() {
					defer wg.Done()
					dc := sib
					if g == 0 {
						dc = base
					}
					dc.Prefill(seqs[g][:3])
					var got []float32
					for _, tok := range seqs[g][3:] {
						got = append(got, dc.Next(tok)...)
					}
					for i := range got {
						if got[i] != want[g][i] {
							errs[g] = fmt.Errorf("goroutine %d: logit %d: %g, alone %g", g, i, got[i], want[g][i])
							return
						}
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestDecoderMisuse: an empty prefill and tokens outside the vocabulary
// panic with a message (the package's convention for misuse).
func TestDecoderMisuse(t *testing.T) {
	m := newModel(t, "odd_ffn", 1) // vocab 75
	dc := m.NewDecoder()
	for _, f := range []func(){
		func() { dc.Prefill(nil) },
		func() { dc.Prefill([]int32{1, 80}) },
		func() { dc.Next(-1) },
		func() { dc.Next(75) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
	var _ *model.Decoder = dc
}

// TestDecoderRefusesClassifiers: NewDecoder panics on a bidirectional
// spec (a classifier whose positions see the later ones) and on a causal
// classifier (no next-byte logits), naming the spec.
func TestDecoderRefusesClassifiers(t *testing.T) {
	for _, m := range []*model.Model{newModel(t, "enc_odd", 1), newModel(t, "odd_enc_aft_full", 1), newClassifier(t, "odd", 3, 1)} {
		func() {
			defer func() {
				r := recover()
				if msg, ok := r.(string); !ok || !strings.Contains(msg, m.Spec.Name) || !strings.Contains(msg, "classifier") {
					t.Errorf("%s: NewDecoder: recovered %v, want a panic naming the spec and \"classifier\"", m.Spec.Name, r)
				}
			}()
			m.NewDecoder()
		}()
	}
}

// BenchmarkDecoderStep measures one decoder step (Next) at position n/2 and
// the prefill of n/2 tokens, per spec.
func BenchmarkDecoderStep(b *testing.B) {
	for _, name := range []string{"vanilla", "random", "aft_full", "linear", "long1024_random", "long1024_vanilla", "long1024_aft_full"} {
		m := newModel(b, name, 1)
		n := m.Spec.N
		in, _ := tokens(5, 1, n)
		b.Run(name+"/step", func(b *testing.B) {
			dc := m.NewDecoder()
			dc.Prefill(in[:n/2])
			for b.Loop() {
				if dc.Len() == n {
					dc.Prefill(in[:n/2])
				}
				dc.Next(in[dc.Len()])
			}
		})
		b.Run(name+"/prefill", func(b *testing.B) {
			dc := m.NewDecoder()
			for b.Loop() {
				dc.Prefill(in[:n/2])
			}
		})
	}
}

// TestDecoderLargeInputs: with huge biases and keys (±1e4, as
// TestAttnFreeLargeInputs), where exponentials underflow unless every sum
// is taken against its own maximum (aft_full's direct fallback, the
// running sums' rescaling), the decoder's logits are finite and match
// Forward's at every position to 1e-3 (relative, decodeTol's metric): at
// 1e4 one float32 ulp of a key or bias is 1e-3, so the attention weights
// themselves are only defined to about 1e-3 (K + b rounds differently
// in the two orders of computation); a wrong or underflowed sum is off by
// far more.
func TestDecoderLargeInputs(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "odd_aft_conv", "odd_aft_local", "odd_aft_simple", "aft_full", "odd_aft_full+keys", "odd_aft_local+keys", "odd_aft_simple+keys"} {
		t.Run(name, func(t *testing.T) {
			name, bigKeys := strings.CutSuffix(name, "+keys")
			m := newModel(t, name, 1)
			perturb(m, 2)
			for _, p := range m.Params {
				if strings.HasSuffix(p.Name, ".attn.w") || strings.HasSuffix(p.Name, ".attn.u") || strings.HasSuffix(p.Name, ".attn.k.bias") {
					for i := range p.Data {
						p.Data[i] = float32(1e4 * float64(1-2*(i%3%2)))
					}
				}
				if strings.HasSuffix(p.Name, ".attn.k.weight") && bigKeys {
					// Keys spread over thousands between positions: the
					// positions with the row's largest bias may all have
					// keys far below the largest key (aft_full's direct
					// fallback).
					for i := range p.Data {
						p.Data[i] *= 1e3
					}
				}
			}
			n := m.Spec.N
			in, _ := tokens(6, 1, n)
			ws := m.NewWorkspace(1)
			m.Forward(ws, in, nil, 1)
			dc := m.NewDecoder()
			dc.Prefill(in[:3])
			for i := 3; i < n; i++ {
				got := dc.Next(in[i])
				if e := logitsErr(got, ws.Logits(0, i)); e > 1e-3 || math.IsNaN(e) {
					t.Fatalf("position %d: decoder's logits differ from Forward's by %.3g", i, e)
				}
			}
		})
	}
}

// TestDecoderNoAllocs: once made (and its model's prefill workspace too),
// a decoder's steps and prefills allocate nothing.
func TestDecoderNoAllocs(t *testing.T) {
	for _, name := range []string{"odd", "odd_aft_full", "odd_aft_local", "odd_aft_simple", "odd_linear", "odd_ffn"} {
		for _, isa := range []kernels.ISA{kernels.Go, kernels.Best()} {
			k, err := kernels.LookupAt(name, isa)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.New(k.Spec, k, 1)
			if err != nil {
				t.Fatal(err)
			}
			m.SetWorkers(1)
			n := m.Spec.N
			in, _ := tokens(5, 1, n)
			for i := range in {
				in[i] %= int32(m.Spec.Vocab)
			}
			dc := m.NewDecoder()
			dc.Prefill(in[:2])
			for i := 2; i < n; i++ { // warm up: every size of product once
				dc.Next(in[i])
			}
			i := 0
			allocs := testing.AllocsPerRun(3*n, func() {
				if i%n == 0 {
					dc.Prefill(in[:3])
				}
				dc.Next(in[i%n])
				i++
			})
			if allocs != 0 {
				t.Errorf("%s at %s: %.2f allocations per step", name, isa, allocs)
			}
		}
	}
}

// TestDecodeBatch: decoders stepped together in a DecodeBatch (at
// different positions, some crossing the window's end, the batch's
// membership changing from step to step) give bit for bit the logits each
// gives stepped alone.
func TestDecodeBatch(t *testing.T) {
	for _, name := range []string{"odd", "odd_aft_full", "odd_aft_local", "odd_aft_simple", "odd_linear", "factorized_dense", "vanilla"} {
		for _, isa := range []kernels.ISA{kernels.Go, kernels.Best()} {
			k, err := kernels.LookupAt(name, isa)
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.New(k.Spec, k, 1)
			if err != nil {
				t.Fatal(err)
			}
			perturbDecode(m)
			n := m.Spec.N
			const count = 5
			alone, batched := make([]*model.Decoder, count), make([]*model.Decoder, count)
			alone[0] = m.NewDecoder()
			batched[0] = alone[0].Sibling()
			seqs := make([][]int32, count)
			for b := range count {
				if b > 0 {
					alone[b], batched[b] = alone[0].Sibling(), alone[0].Sibling()
				}
				seqs[b], _ = tokens(uint64(20+b), 1, 2*n)
				p := 1 + b*n/count // different positions
				alone[b].Prefill(seqs[b][:p])
				batched[b].Prefill(seqs[b][:p])
			}
			bt := batched[0].NewBatch(count)
			pos := make([]int, count)
			for b := range pos {
				pos[b] = 1 + b*n/count
			}
			var decs []*model.Decoder
			var toks []int32
			for s := 0; s < n+3; s++ {
				decs, toks = decs[:0], toks[:0]
				for b := range count {
					if (s+b)%4 == 3 {
						continue // not in this step
					}
					decs = append(decs, batched[b])
					toks = append(toks, seqs[b][pos[b]])
					alone[b].Next(seqs[b][pos[b]])
					pos[b]++
				}
				bt.Next(decs, toks)
				for _, dc := range decs {
					b := 0
					for batched[b] != dc {
						b++
					}
					got, want := dc.Logits(), alone[b].Logits()
					for v := range want {
						if got[v] != want[v] {
							t.Fatalf("%s at %s, step %d, decoder %d (length %d): logit %d batched %g, alone %g", name, isa, s, b, dc.Len(), v, got[v], want[v])
						}
					}
				}
			}
		}
	}
}

// BenchmarkDecodeBatch measures a step of 8 decoders at position n/2, one
// by one and together in a DecodeBatch, in positions per second.
func BenchmarkDecodeBatch(b *testing.B) {
	for _, name := range []string{"random", "long1024_random"} {
		m := newModel(b, name, 1)
		n := m.Spec.N
		in, _ := tokens(5, 1, n)
		const count = 8
		decs := []*model.Decoder{m.NewDecoder()}
		for len(decs) < count {
			decs = append(decs, decs[0].Sibling())
		}
		toks := make([]int32, count)
		bt := decs[0].NewBatch(count)
		for _, batched := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/batched=%v", name, batched), func(b *testing.B) {
				for _, dc := range decs {
					dc.Prefill(in[:n/2])
				}
				steps := 0
				for b.Loop() {
					if decs[0].Len() == n {
						for _, dc := range decs {
							dc.Prefill(in[:n/2])
						}
					}
					for i, dc := range decs {
						toks[i] = in[dc.Len()]
					}
					if batched {
						bt.Next(decs, toks)
					} else {
						for i, dc := range decs {
							dc.Next(toks[i])
						}
					}
					steps += count
				}
				b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "positions/s")
			})
		}
	}
}
