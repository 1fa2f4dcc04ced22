package synth

import (
	"context"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/synthgen/synthgen/generated/odd_ffn"
)

// drawer draws indices from logits with pick and a fixed seed.
type drawer struct {
	rng   *rand.Rand
	probs []float64
	order []int
}

func newDrawer(seed uint64, v int) *drawer {
	return &drawer{rng: rand.New(rand.NewPCG(seed, 0x5eed)), probs: make([]float64, v), order: make([]int, v)}
}

func (d *drawer) pick(logits []float32, temp float64, topk int) int {
	return pick(logits, temp, topk, d.rng, d.probs, d.order)
}

// randomLogits are v distinct logits spread over [−scale, scale].
func randomLogits(rng *rand.Rand, v int, scale float64) []float32 {
	l := make([]float32, v)
	for i := range l {
		l[i] = float32(scale * (2*rng.Float64() - 1))
	}
	return l
}

// byLikelihood returns the indices of logits from the largest down (ties by index).
func byLikelihood(logits []float32) []int {
	order := make([]int, len(logits))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
	return order
}

// TestSampleTopKOneIsGreedy: at any temperature, top-k 1 takes the most
// likely byte, as temperature 0 does; for pick, and for Model.Sample.
func TestSampleTopKOneIsGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	d := newDrawer(1, 256)
	for i := range 200 {
		logits := randomLogits(rng, 256, 3)
		if i%10 == 0 { // a tie for the first place: the lower index wins
			j := rng.IntN(256)
			logits[j] = 10
			logits[(j+1+rng.IntN(255))%256] = 10
		}
		greedy := d.pick(logits, 0, 0)
		for _, temp := range []float64{0.5, 1, 4} {
			if got := d.pick(logits, temp, 1); got != greedy {
				t.Fatalf("temperature %g, top-k 1 drew %d (logit %g); the most likely is %d (logit %g)", temp, got, logits[got], greedy, logits[greedy])
			}
		}
	}

	m, err := New(odd_ffn.Spec, 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt := []byte("1+2=") // below the vocabulary of 75
	want, err := m.Sample(ctx, prompt, SampleOptions{Len: 40, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, temp := range []float64{0.7, 2} {
		got, err := m.Sample(ctx, prompt, SampleOptions{Len: 40, Temp: temp, TopK: 1, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("Sample at temperature %g, top-k 1 = %q, greedy = %q", temp, got, want)
		}
	}
	// And the draws at a temperature are not greedy: the check above can fail.
	hot, err := m.Sample(ctx, prompt, SampleOptions{Len: 40, Temp: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if string(hot) == string(want) {
		t.Errorf("Sample at temperature 2 without top-k gave the greedy text %q", hot)
	}
}

// TestSampleTopKStaysInTop: with top-k k, every draw is one of the k most
// likely bytes, at temperatures that make the others likely.
func TestSampleTopKStaysInTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	d := newDrawer(2, 256)
	for _, k := range []int{2, 5, 40, 255} {
		for range 20 {
			logits := randomLogits(rng, 256, 2)
			order := byLikelihood(logits)
			rank := make([]int, 256)
			for r, i := range order {
				rank[i] = r
			}
			for _, temp := range []float64{1, 5} {
				for range 100 {
					if i := d.pick(logits, temp, k); rank[i] >= k {
						t.Fatalf("top-k %d at temperature %g drew byte %d, the %d-th most likely", k, temp, i, rank[i]+1)
					}
				}
			}
		}
	}
}

// chiSquare draws n indices from logits (temperature temp, top-k topk)
// and returns Pearson's statistic against want, the distribution of the
// card's sampling (softmax of logits/temp over the top k), and its degrees
// of freedom. Draws where want is 0 make it +Inf.
func chiSquare(d *drawer, logits []float32, temp float64, topk, n int, want []float64) (stat float64, df int) {
	counts := make([]int, len(logits))
	for range n {
		counts[d.pick(logits, temp, topk)]++
	}
	for i, p := range want {
		e := p * float64(n)
		if e == 0 {
			if counts[i] > 0 {
				stat = math.Inf(1)
			}
			continue
		}
		stat += (float64(counts[i]) - e) * (float64(counts[i]) - e) / e
		df++
	}
	return stat, df - 1
}

// softmax is the distribution of sampling logits at temperature temp
// among the topk largest (topk 0: all), in float64.
func softmax(logits []float32, temp float64, topk int) []float64 {
	order := byLikelihood(logits)
	if topk == 0 {
		topk = len(logits)
	}
	p := make([]float64, len(logits))
	var z float64
	for _, i := range order[:topk] {
		p[i] = math.Exp(float64(logits[i]) / temp)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// TestSampleDistribution: over many draws with a fixed seed, the bytes
// drawn follow the softmax of the logits at temperature 1, at another
// temperature, and restricted to the top k: Pearson's chi-square stays
// below a bound a correct sampler exceeds with probability under 1e-6
// (mean df, standard deviation √(2·df); df ≤ 23 here), while a sampler
// with the wrong temperature or the wrong support scores in the
// hundreds or more (checked below with the mutants).
func TestSampleDistribution(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	logits := randomLogits(rng, 24, 1.5) // every byte likely enough (expected counts ≥ ~1000)
	const n = 100_000
	bound := func(df int) float64 { return float64(df) + 10*math.Sqrt(2*float64(df)) + 20 }
	for _, c := range []struct {
		name string
		temp float64
		topk int
	}{{"temperature 1", 1, 0}, {"temperature 0.7", 0.7, 0}, {"temperature 1.3, top-k 7", 1.3, 7}} {
		stat, df := chiSquare(newDrawer(9, len(logits)), logits, c.temp, c.topk, n, softmax(logits, c.temp, c.topk))
		t.Logf("%s: chi-square %.1f with %d degrees of freedom (bound %.0f)", c.name, stat, df, bound(df))
		if stat > bound(df) {
			t.Errorf("%s: the draws do not follow the softmax: chi-square %.1f with %d degrees of freedom, bound %.0f", c.name, stat, df, bound(df))
		}
	}
	// Mutants of the sampler: each one's draws, tested against the correct
	// distribution, must exceed the bound by far.
	for _, mu := range []struct {
		name  string
		temp  float64
		topk  int
		drawT float64 // what the mutant draws with
		drawK int
	}{
		{"temperature ignored", 0.7, 0, 1, 0},
		{"top-k ignored", 1.3, 7, 1.3, 0},
		{"top-k one short", 1.3, 7, 1.3, 6},
	} {
		stat, df := chiSquare(newDrawer(9, len(logits)), logits, mu.drawT, mu.drawK, n, softmax(logits, mu.temp, mu.topk))
		t.Logf("mutant %q: chi-square %.1f with %d degrees of freedom", mu.name, stat, df)
		if !(stat > 10*bound(df)) {
			t.Errorf("mutant %q: chi-square %.1f, not far above the bound %.0f", mu.name, stat, bound(df))
		}
	}
}

// TestPickOrder checks the order pick ranks the logits in (largest first,
// ties by index), which decides which byte a seed draws, against
// sort.SliceStable's, on logits with many ties, −0 beside +0, infinities
// and negatives.
func TestPickOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		v := 1 + rng.IntN(300)
		logits := make([]float32, v)
		for i := range logits {
			switch rng.IntN(12) {
			case 0:
				logits[i] = float32(math.Copysign(0, -1)) // ranks as +0
			case 1:
				logits[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
			case 2:
				logits[i] = float32(rng.NormFloat64() * 30)
			default:
				logits[i] = float32(rng.IntN(1+trial%20) - trial%20/2) // few distinct values: ties
			}
		}
		want := make([]int, v)
		for i := range want {
			want[i] = i
		}
		sort.SliceStable(want, func(a, b int) bool { return logits[want[a]] > logits[want[b]] })
		d := newDrawer(1, v)
		d.pick(logits, 0.8, 0)
		for i := range want {
			if d.order[i] != want[i] {
				t.Fatalf("trial %d (v %d): order[%d] = %d, want %d", trial, v, i, d.order[i], want[i])
			}
		}
	}
}
