package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
)

func runSample(args []string) error { return sampleCmd(stdEnv(), args) }

func sampleCmd(e *env, args []string) error {
	fs := newFlagSet(e, "sample", "Continues a prompt with bytes sampled from a checkpoint and prints the prompt and the continuation.")
	var ckpt, prompt string
	var length, topk int
	var temp float64
	var seed uint64
	ckptUsage(fs, &ckpt)
	fs.StringVar(&prompt, "prompt", "The ", "text to continue (bytes; the model sees the last n of them)")
	fs.IntVar(&length, "len", 300, "bytes to generate")
	fs.Float64Var(&temp, "temp", 0.8, "sampling temperature (0: always the most likely byte)")
	fs.IntVar(&topk, "topk", 0, "sample among the k most likely bytes only (0: all)")
	fs.Uint64Var(&seed, "seed", 1, "random seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case length < 0:
		return fmt.Errorf("-len %d must be ≥ 0", length)
	case !(temp >= 0) || math.IsInf(temp, 0):
		return fmt.Errorf("-temp %g must be a number ≥ 0", temp)
	case topk < 0:
		return fmt.Errorf("-topk %d must be ≥ 0", topk)
	case prompt == "":
		return fmt.Errorf("-prompt must not be empty: the model needs at least one byte to continue")
	}
	m, _, err := checkpoint.Load(ckpt)
	if err != nil {
		return err
	}
	if err := data.CheckVocab("-prompt", []byte(prompt), m.Spec.Vocab); err != nil {
		return err
	}
	w := bufio.NewWriter(e.out)
	defer w.Flush()
	w.WriteString(prompt)
	s := newSampler(m, temp, topk, seed)
	text := []byte(prompt)
	for i := 0; i < length; i++ {
		c := s.next(text)
		text = append(text, c)
		w.WriteByte(c)
		if c == '\n' {
			w.Flush()
		}
	}
	w.WriteByte('\n')
	return w.Flush()
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

// next runs the model on the last ≤ n bytes of text and draws a byte.
func (s *sampler) next(text []byte) byte {
	ctx := text[max(0, len(text)-s.m.Spec.N):]
	in := s.in[:len(ctx)]
	for i, c := range ctx {
		in[i] = int32(c)
	}
	s.m.Forward(s.ws, in, nil, 1)
	return byte(pick(s.ws.Logits(0, len(ctx)-1), s.temp, s.topk, s.rng, s.probs, s.order))
}

// pick draws an index from logits at temperature temp among the topk
// largest (ties broken by index); temp 0 is the argmax. probs and order
// are scratch of len(logits).
func pick(logits []float32, temp float64, topk int, rng *rand.Rand, probs []float64, order []int) int {
	v := len(logits)
	for i := range order[:v] {
		order[i] = i
	}
	sort.SliceStable(order[:v], func(a, b int) bool { return logits[order[a]] > logits[order[b]] })
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
