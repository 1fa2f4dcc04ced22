package synth

import (
	"math/rand/v2"

	"github.com/synthgen/synthgen/runtime/model"
)

// decodeSampler draws the next byte of a text with an incremental decoder
// (model.Decoder): the first call encodes the last ≤ n bytes of the text
// in one batched Forward (prefill); each later call, when the text has
// grown by the one byte drawn, runs one position. What the model sees
// beyond n bytes is the decoder's policy: on a full window it re-encodes
// the last n/2 bytes and goes on from there, so each byte is drawn from
// the last n/2 … n bytes of the text, rather than always the last n as
// sampler (the recompute-everything path, kept as the tests' oracle) does.
// For texts up to n bytes both draw from the same logits, to float32
// rounding.
type decodeSampler struct {
	dc    *model.Decoder
	temp  float64
	topk  int
	rng   *rand.Rand
	fed   int // bytes of the text the decoder holds (0: none yet)
	in    []int32
	probs []float64
	order []int
}

func newDecodeSampler(m *model.Model, temp float64, topk int, seed uint64) *decodeSampler {
	s := samplerOn(m.NewDecoder())
	s.reset(temp, topk, seed)
	return s
}

// samplerOn is a sampler drawing with dc (reset sets its options).
func samplerOn(dc *model.Decoder) *decodeSampler {
	m := dc.Model()
	v := m.Spec.Vocab
	return &decodeSampler{
		dc: dc, rng: rand.New(rand.NewPCG(0, 0x5eed)),
		in: make([]int32, m.Spec.N), probs: make([]float64, v), order: make([]int, v),
	}
}

// reset makes the sampler draw afresh (no text yet) with these options.
func (s *decodeSampler) reset(temp float64, topk int, seed uint64) {
	v := len(s.probs)
	if topk == 0 || topk > v {
		topk = v
	}
	s.temp, s.topk = temp, topk
	s.rng = rand.New(rand.NewPCG(seed, 0x5eed))
	s.fed = 0
	s.dc.Reset()
}

// sibling is a new sampler drawing with a Sibling of s's decoder (the
// same packed weights, which are all it reads of s: s may be in use).
func (s *decodeSampler) sibling() *decodeSampler { return samplerOn(s.dc.Sibling()) }

// next draws the byte after text. text must not be empty; a text that is
// not the previous one plus one byte is encoded afresh.
func (s *decodeSampler) next(text []byte) (byte, error) { return s.draw(s.logits(text)) }

// draw draws a byte from logits; NaN logits are an error, never a byte.
func (s *decodeSampler) draw(logits []float32) (byte, error) {
	if err := checkLogits(logits); err != nil {
		return 0, err
	}
	return byte(pick(logits, s.temp, s.topk, s.rng, s.probs, s.order)), nil
}

// logits returns the logits after text, as next draws from them.
func (s *decodeSampler) logits(text []byte) []float32 {
	var lg []float32
	if s.fed > 0 && len(text) == s.fed+1 {
		lg = s.dc.Next(int32(text[len(text)-1]))
	} else {
		ctx := text[max(0, len(text)-len(s.in)):]
		in := s.in[:len(ctx)]
		for i, c := range ctx {
			in[i] = int32(c)
		}
		lg = s.dc.Prefill(in)
	}
	s.fed = len(text)
	return lg
}
