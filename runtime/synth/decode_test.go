package synth

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	_ "github.com/synthgen/synthgen/generated/all"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// newPerturbed builds spec name's model with its weights moved well away
// from the initialisation (std 0.05 added, 0.3 on the attention's), so
// that the logits are far from ties and greedy choices are stable under
// float32 rounding.
func newPerturbed(t testing.TB, name string) *Model {
	t.Helper()
	s, err := kernels.Spec(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for _, p := range m.net.Params {
		if p.Frozen {
			continue
		}
		std := 0.05
		if len(p.Shape) >= 2 && p.Name != "tok_emb" && p.Name != "pos_emb" {
			std = 0.1
		}
		for i := range p.Data {
			p.Data[i] += float32(rng.NormFloat64() * std)
		}
	}
	return m
}

// prompt returns size pseudo-random bytes of the model's vocabulary.
func prompt(m *Model, seed uint64, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.IntN(m.net.Spec.Vocab))
	}
	return b
}

// recompute is the old path: Forward over the last n bytes for every byte.
func recompute(m *Model, p []byte, size int, temp float64, topk int, seed uint64) []byte {
	s := newSampler(m.net, temp, topk, seed)
	text := append([]byte(nil), p...)
	for i := 0; i < size; i++ {
		c, err := s.next(text)
		if err != nil {
			panic(err)
		}
		text = append(text, c)
	}
	return text[len(p):]
}

// TestGenerateMatchesRecompute: greedy generation through the decoder
// (Model.Sample) equals the recompute-everything path byte for byte while
// the text fits the window (the first n − len(prompt) + 1 bytes), for
// several variants and a mixture; beyond n it goes on (the decoder's
// re-encode) deterministically.
func TestGenerateMatchesRecompute(t *testing.T) {
	for _, name := range []string{"odd", "odd_ffn", "small", "odd_aft_full", "odd_aft_local", "odd_aft_conv", "odd_aft_simple", "odd_linear", "vanilla", "dense", "aft_full"} {
		t.Run(name, func(t *testing.T) {
			m := newPerturbed(t, name)
			n := m.net.Spec.N
			p := prompt(m, 4, 7)
			size := n - len(p) + 1
			want := recompute(m, p, size, 0, 0, 1)
			got, err := m.Sample(context.Background(), p, SampleOptions{Len: size + n, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			if string(got[:size]) != string(want) {
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("byte %d of %d: decoder %d, recompute %d", i, size, got[i], want[i])
					}
				}
			}
			again, _ := m.Sample(context.Background(), p, SampleOptions{Len: size + n, Seed: 1})
			if string(again) != string(got) {
				t.Fatalf("two runs differ beyond n")
			}
			// A prompt longer than n: both start from the last n bytes.
			long := prompt(m, 5, n+9)
			want = recompute(m, long, 1, 0, 0, 1)
			got, _ = m.Sample(context.Background(), long, SampleOptions{Len: 1, Seed: 1})
			if got[0] != want[0] {
				t.Fatalf("prompt of n+9 bytes: decoder %d, recompute %d", got[0], want[0])
			}
		})
	}
}

// BenchmarkGenerate measures generation with the old path (a Forward over
// the last n bytes for every byte) and the decoder, in one run, from a
// full-window prompt (n bytes) and a short one (16 bytes), at n 128 for
// every variant family, at n 1024 and at n 2048: bytes per second of wall time and
// bytes per CPU-second of the process (on a shared machine the wall time
// holds the others' load; the old path's Forward runs on every worker,
// the decoder's steps on one). The old path draws 8 bytes per iteration
// (from a full window each costs the same Forward); the decoder n bytes,
// the prefill of its prompt and its re-encodes of n/2 bytes included.
//
//	go test ./runtime/synth -run '^$' -bench BenchmarkGenerate -benchtime 1x
func BenchmarkGenerate(b *testing.B) {
	for _, name := range []string{"random", "vanilla", "dense", "factorized_random", "random_vanilla",
		"aft_full", "aft_local", "aft_simple", "linear",
		"long1024_random", "long1024_vanilla", "long1024_aft_full", "long2048_random"} {
		m := newPerturbed(b, name)
		n := m.net.Spec.N
		for _, pl := range []int{n, 16} {
			p := prompt(m, 4, pl)
			for _, path := range []string{"recompute", "decoder"} {
				b.Run(fmt.Sprintf("%s/prompt=%d/%s", name, pl, path), func(b *testing.B) {
					size := n
					if path == "recompute" {
						size = 8
					}
					var bytes int
					cpu0 := cpuSeconds()
					for b.Loop() {
						if path == "recompute" {
							recompute(m, p, size, 0.8, 0, 1)
						} else if _, err := m.Sample(context.Background(), p, SampleOptions{Len: size, Temp: 0.8, Seed: 1}); err != nil {
							b.Fatal(err)
						}
						bytes += size
					}
					b.ReportMetric(float64(bytes)/b.Elapsed().Seconds(), "bytes/s")
					if cpu := cpuSeconds() - cpu0; cpu > 0 {
						b.ReportMetric(float64(bytes)/cpu, "bytes/cpu-s")
					}
				})
			}
		}
	}
}
