package data

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzData feeds arbitrary texts, context lengths, vocabularies, batch
// sizes, seeds and steps to the data loader (Load, CheckVocab, Split), the
// training sampler and the evaluation windows. A rejection must be an error
// naming the file, never a panic; an accepted text must split into its two
// parts, and every window drawn must be a window of the text.
//
//	go test ./runtime/data -run '^$' -fuzz '^FuzzData$' -fuzztime 5s
func FuzzData(f *testing.F) {
	opticks := []byte("Sir Isaac Newton, Opticks: or, a Treatise of the Reflections, Refractions, Inflections and Colours of Light.\n")
	long := bytes.Repeat(opticks, 4)
	for _, c := range []struct {
		text     []byte
		n, vocab uint16
		batch    uint8
		seed     uint64
		step     int64
	}{
		{long, 16, 256, 4, 1, 0},
		{long, 40, 128, 2, 7, 99},
		{long, 16, 10, 2, 7, 99},       // bytes outside the vocabulary
		{long[:200], 24, 256, 1, 1, 1}, // too short for the split
		{long[:17], 16, 256, 1, 1, 1},
		{long[:MinLen(39)], 39, 256, 3, 2, 5}, // just long enough
		{nil, 1, 256, 1, 0, 0},
		{[]byte{0, 1, 2, 255}, 0, 0, 0, 0, -1},
		{bytes.Repeat([]byte{200}, 100), 1, 201, 255, 1 << 63, 1 << 62},
	} {
		f.Add(c.text, c.n, c.vocab, c.batch, c.seed, c.step)
	}
	path := filepath.Join(f.TempDir(), "data.txt")
	f.Fuzz(func(t *testing.T, text []byte, n16, vocab16 uint16, batch8 uint8, seed uint64, step int64) {
		n, vocab, batch := int(n16), int(vocab16)%300, int(batch8)%9
		named := func(what string, err error) {
			if err != nil && !strings.Contains(err.Error(), path) {
				t.Fatalf("%s: error %q does not name the file", what, err)
			}
		}
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
		vErr := CheckVocab("data file "+path, text, vocab)
		named("CheckVocab", vErr)
		if vErr == nil && vocab < 256 {
			for _, c := range text {
				if int(c) >= vocab {
					t.Fatalf("byte %d passed a vocabulary of %d", c, vocab)
				}
			}
		}
		d, err := Load(path, n, vocab)
		named("Load", err)
		if (err == nil) != (vErr == nil && len(text) >= MinLenOrZero(n)) {
			t.Fatalf("Load(%d bytes, n %d, vocab %d): %v (vocab check: %v)", len(text), n, vocab, err, vErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(append(append([]byte(nil), d.Train...), d.Val...), text) || len(d.Val) != len(text)/HeldOutDivisor || len(d.Train) < n+1 || len(d.Val) < n+1 {
			t.Fatalf("split of %d bytes: %d + %d", len(text), len(d.Train), len(d.Val))
		}
		s, err := NewSampler(d.Train, n, batch, seed)
		if batch < 1 {
			if err == nil {
				t.Fatal("batch 0 accepted")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range []int{0, 1, int(step)} {
			s.Batch(st)
			for b, off := range s.Offsets {
				if off < 0 || off+n+1 > len(d.Train) {
					t.Fatalf("window at %d of a %d-byte text", off, len(d.Train))
				}
				for i := 0; i < n; i++ {
					if s.Inputs[b*n+i] != int32(d.Train[off+i]) || s.Targets[b*n+i] != int32(d.Train[off+i+1]) {
						t.Fatalf("window %d of step %d is not the text at %d", b, st, off)
					}
				}
			}
		}
		k := NumWindows(d.Val, n, int(batch8)%4)
		if k < 1 || k*(n+1) > len(d.Val) {
			t.Fatalf("%d windows of %d bytes in %d", k, n+1, len(d.Val))
		}
		in, tg := make([]int32, n), make([]int32, n)
		Window(d.Val, n, k-1, in, tg)
	})
}

// MinLenOrZero is MinLen(n), or a length no text has when n < 1.
func MinLenOrZero(n int) int {
	if n < 1 {
		return int(^uint(0) >> 1)
	}
	return MinLen(n)
}
