package listops

import (
	"errors"
	"strings"
	"testing"
)

// FuzzGenerate draws sets with arbitrary seeds and options. The result
// must be an *OptionError, ErrExhausted or a set whose every sequence the
// brute-force evaluator confirms within the options' bounds; never a
// panic.
//
//	go test ./runtime/listops -run '^$' -fuzz '^FuzzGenerate$' -fuzztime 30s
func FuzzGenerate(f *testing.F) {
	f.Add(uint64(1), int8(10), int8(10), int16(500), int16(2000), uint8(5))
	f.Add(uint64(2), int8(1), int8(2), int16(1), int16(1), uint8(9))
	f.Add(uint64(3), int8(3), int8(2), int16(10), int16(10), uint8(3))
	f.Add(uint64(4), int8(0), int8(0), int16(0), int16(0), uint8(0))
	f.Add(uint64(5), int8(-1), int8(1), int16(-3), int16(2), uint8(1))
	f.Fuzz(func(t *testing.T, seed uint64, depth, args int8, minLen, maxLen int16, count uint8) {
		o := Options{MaxDepth: int(depth), MaxArgs: int(args), MinLen: int(minLen), MaxLen: int(maxLen)}
		c := Counts{Train: int(count) % 16, Test: int(count) / 16}
		s, err := Generate(seed, o, c)
		if err != nil {
			var oe *OptionError
			if !errors.As(err, &oe) && !errors.Is(err, ErrExhausted) && !strings.Contains(err.Error(), "counts") {
				t.Fatalf("%+v %+v: unexpected error %v", o, c, err)
			}
			return
		}
		if len(s.Train) != c.Train || len(s.Test) != c.Test {
			t.Fatalf("%+v: %d/%d sequences, want %+v", o, len(s.Train), len(s.Test), c)
		}
		seen := map[string]bool{}
		checkSet(t, o, s.Train, seen)
		checkSet(t, o, s.Test, seen)
	})
}
