package synth

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
)

// SampleOptions tune Sample and Generate. Len must be set (a zero Len is
// an error, not an empty sample); the other fields' zero values are
// greedy decoding (Temp 0: always the most likely byte) over every byte
// with seed 0.
type SampleOptions struct {
	Len  int     // bytes to generate, ≥ 1
	Temp float64 // sampling temperature (0: greedy)
	TopK int     // sample among the TopK most likely bytes only (0: all)
	Seed uint64  // seed of the draws: the same seed, prompt and model give the same text
}

func (o SampleOptions) validate() error {
	switch {
	case o.Len < 0:
		return fmt.Errorf("sample: length %d must be ≥ 1", o.Len)
	case o.Len == 0:
		return fmt.Errorf("sample: length 0: set SampleOptions.Len, the number of bytes to generate")
	case !(o.Temp >= 0) || math.IsInf(o.Temp, 0):
		return fmt.Errorf("sample: temperature %g must be a number ≥ 0", o.Temp)
	case o.TopK < 0:
		return fmt.Errorf("sample: top-k %d must be ≥ 0", o.TopK)
	}
	return nil
}

// Sample continues prompt with opts.Len bytes drawn from the model and
// returns the continuation (without the prompt). The model sees the last
// n bytes of the text so far until the text is n bytes long, then the last
// n/2 … n (it decodes incrementally and re-encodes the last n/2 bytes when
// its window of n fills: see decode.go).
func (m *Model) Sample(ctx context.Context, prompt []byte, opts SampleOptions) ([]byte, error) {
	var buf bytes.Buffer
	err := m.Generate(ctx, &buf, prompt, opts)
	return buf.Bytes(), err
}

// Generate is Sample writing each byte of the continuation to w as it is
// drawn (flushing at each newline when w is buffered by Generate itself).
// It stops with ctx's error when ctx is cancelled.
func (m *Model) Generate(ctx context.Context, w io.Writer, prompt []byte, opts SampleOptions) error {
	if err := opts.validate(); err != nil {
		return err
	}
	if m.IsClassifier() {
		return fmt.Errorf("sample: spec %q is a classifier, not a language model: classify texts with Predict (synth predict)", m.net.Spec.Name)
	}
	if len(prompt) == 0 {
		return fmt.Errorf("sample: the prompt must not be empty: the model needs at least one byte to continue")
	}
	if err := data.CheckVocab("prompt", prompt, m.net.Spec.Vocab); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	bw := bufio.NewWriter(w)
	s := newDecodeSampler(m.net, opts.Temp, opts.TopK, opts.Seed) // decode.go; newSampler is the oracle
	text := append([]byte(nil), prompt...)
	for i := 0; i < opts.Len; i++ {
		if err := ctx.Err(); err != nil {
			bw.Flush()
			return fmt.Errorf("sampling stopped after %d bytes: %w", i, context.Cause(ctx))
		}
		c, err := s.next(text)
		if err != nil {
			bw.Flush()
			return fmt.Errorf("sample: after %d bytes: %w", i, err)
		}
		text = append(text, c)
		bw.WriteByte(c)
		if c == '\n' {
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("sample: %w", err)
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	return nil
}

// sampler draws the next byte of a text from a model.
type sampler struct {
	m     *model.Model
	ws    *model.Workspace
	temp  float64
	topk  int
	rng   *rand.Rand
	in    []int32
	probs []float64
	order []int
}

func newSampler(m *model.Model, temp float64, topk int, seed uint64) *sampler {
	v := m.Spec.Vocab
	if topk == 0 || topk > v {
		topk = v
	}
	return &sampler{
		m: m, ws: m.NewWorkspace(1), temp: temp, topk: topk,
		rng: rand.New(rand.NewPCG(seed, 0x5eed)),
		in:  make([]int32, m.Spec.N), probs: make([]float64, v), order: make([]int, v),
	}
}

// next runs the model on the last ≤ n bytes of text and draws a byte. A
// NaN among the logits (broken weights) is an error, never a byte.
func (s *sampler) next(text []byte) (byte, error) {
	ctx := text[max(0, len(text)-s.m.Spec.N):]
	in := s.in[:len(ctx)]
	for i, c := range ctx {
		in[i] = int32(c)
	}
	s.m.Forward(s.ws, in, nil, 1)
	logits := s.ws.Logits(0, len(ctx)-1)
	if err := checkLogits(logits); err != nil {
		return 0, err
	}
	return byte(pick(logits, s.temp, s.topk, s.rng, s.probs, s.order)), nil
}

// checkLogits refuses NaN logits: no byte is drawn from them.
func checkLogits(logits []float32) error {
	for i, x := range logits {
		if math.IsNaN(float64(x)) {
			return fmt.Errorf("the model's logit of byte %d is NaN: its weights are not usable (a diverged run?)", i)
		}
	}
	return nil
}

// rank sets order to the indices of logits from the largest down, ties by
// index (as a stable sort by logit would). Where int has 64 bits and no
// logit is NaN it sorts keys packing a logit's order above its index
// (distinct, so any sort gives that order; −0 counts as +0, as the
// comparison does); otherwise a stable sort by the comparison. With the
// keys, pick at 256 logits took 5 µs where it took 16–21 µs with the
// stable sort (a throwaway benchmark on the shared Xeon), a per cent or
// two of a decoder's byte at n 1024. TestPickOrder checks the order
// against sort.SliceStable's.
func rank(logits []float32, order []int) {
	packed := math.MaxInt == math.MaxInt64
	for i, x := range logits {
		if x != x {
			packed = false
		}
		if !packed {
			break
		}
		if x == 0 {
			x = 0 // −0 ranks as +0
		}
		// b orders the floats ascending as unsigned integers; ^b descending.
		b := math.Float32bits(x)
		if b>>31 != 0 {
			b = ^b
		} else {
			b |= 1 << 31
		}
		key := uint64(^b)<<32 | uint64(i)
		order[i] = int(int64(key ^ 1<<63)) // signed order = key's unsigned order
	}
	if packed {
		slices.Sort(order)
		for r, k := range order {
			order[r] = int(uint32(uint64(int64(k))))
		}
		return
	}
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch la, lb := logits[a], logits[b]; {
		case la > lb:
			return -1
		case la < lb:
			return 1
		}
		return 0
	})
}

// pick draws an index from logits at temperature temp among the topk
// largest (ties broken by index); temp 0 is the argmax. probs and order
// are scratch of len(logits).
func pick(logits []float32, temp float64, topk int, rng *rand.Rand, probs []float64, order []int) int {
	v := len(logits)
	rank(logits, order[:v])
	if topk < 1 || topk > v {
		topk = v
	}
	best := order[0]
	if temp == 0 || math.IsNaN(float64(logits[best])) {
		return best
	}
	top := float64(logits[best])
	var sum float64
	for r, i := range order[:topk] {
		p := math.Exp((float64(logits[i]) - top) / temp)
		if math.IsNaN(p) {
			p = 0
		}
		probs[r] = p
		sum += p
	}
	if !(sum > 0) || math.IsInf(sum, 0) {
		return best
	}
	u := rng.Float64() * sum
	for r, i := range order[:topk] {
		u -= probs[r]
		if u < 0 {
			return i
		}
	}
	return order[topk-1]
}
