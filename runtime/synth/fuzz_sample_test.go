package synth_test

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/odd_ffn"
	"github.com/synthgen/synthgen/runtime/synth"
)

// FuzzSample feeds arbitrary prompt bytes and sampling options to
// Model.Sample and Model.Generate, on a spec with a vocabulary of 75 bytes
// (so prompts can hold bytes outside it) and a context of 24 (so prompts
// can be longer). Bad options and prompts must be errors saying what is
// wrong, never a panic; otherwise the continuation must have Len bytes,
// all in the vocabulary, and the same seed must give the same bytes.
//
//	go test ./runtime/synth -run '^$' -fuzz '^FuzzSample$' -fuzztime 5s
func FuzzSample(f *testing.F) {
	m, err := synth.New(odd_ffn.Spec, 1)
	if err != nil {
		f.Fatal(err)
	}
	m.SetWorkers(1)
	for _, c := range []struct {
		prompt []byte
		n      uint8
		temp   float64
		topk   int
		seed   uint64
	}{
		{[]byte("The light "), 8, 0.8, 0, 1},
		{[]byte("AB"), 4, 0, 0, 2},
		{[]byte(""), 3, 1, 0, 3},
		{[]byte("\xff\x00abc"), 3, 1, 0, 4},
		{bytes.Repeat([]byte("0123456789"), 13), 5, 1e-300, 1, 5},
		{[]byte("x"), 5, 1e300, 100, 6},
		{[]byte("x"), 2, math.NaN(), 0, 7},
		{[]byte("x"), 2, math.Inf(1), 0, 8},
		{[]byte("x"), 2, -1, 0, 9},
		{[]byte("x"), 2, 1, -3, 10},
		{[]byte("x"), 2, 5e-324, 1 << 40, 11},
	} {
		f.Add(c.prompt, c.n, c.temp, c.topk, c.seed)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, prompt []byte, n uint8, temp float64, topk int, seed uint64) {
		opts := synth.SampleOptions{Len: int(n%24) - 2, Temp: temp, TopK: topk, Seed: seed}
		out, err := m.Sample(ctx, prompt, opts)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sample: ") {
				t.Fatalf("error %q does not say it is sampling", err)
			}
			if len(out) != 0 {
				t.Fatalf("error %v, yet %d bytes", err, len(out))
			}
			return
		}
		if len(out) != opts.Len {
			t.Fatalf("%d bytes, want %d", len(out), opts.Len)
		}
		for _, c := range out {
			if int(c) >= odd_ffn.Spec.Vocab {
				t.Fatalf("byte %d outside the vocabulary of %d", c, odd_ffn.Spec.Vocab)
			}
		}
		var buf bytes.Buffer
		if err := m.Generate(ctx, &buf, prompt, opts); err != nil || !bytes.Equal(buf.Bytes(), out) {
			t.Fatalf("Generate: %q, %v; Sample: %q", buf.Bytes(), err, out)
		}
	})
}
