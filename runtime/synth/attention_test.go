package synth_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd"
	_ "github.com/synthgen/synthgen/generated/odd_aft_full"
	_ "github.com/synthgen/synthgen/generated/odd_aft_simple"
	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// TestAttention: per layer and head maps of the prompt's size (its last
// n bytes), causal, rows summing to 1, described; AFT-full's one shared
// map per layer; aft_simple's ErrNoAttention.
func TestAttention(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		spec   string
		heads  int
		input  bool
		phrase string
	}{
		{"small", 2, false, "softmax(the learned R)"},
		{"odd", 3, true, "mixture"},
		{"odd_aft_full", 1, false, "position bias"},
	} {
		s, err := synth.LookupSpec(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := synth.New(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		prompt := []byte(strings.Repeat("Of the Reflexions and Inflexions of Light. ", 3)) // longer than n
		a, err := m.Attention(ctx, prompt)
		if err != nil {
			t.Fatal(err)
		}
		if a.InputDependent != c.input || !strings.Contains(a.What, c.phrase) || len(a.Maps) != s.Layers || string(a.Prompt) != string(prompt[len(prompt)-s.N:]) {
			t.Errorf("%s: %+v", c.spec, a)
		}
		for l, row := range a.Maps {
			if len(row) != c.heads {
				t.Fatalf("%s layer %d: %d maps, want %d", c.spec, l, len(row), c.heads)
			}
			for h, mp := range row {
				if mp.Layer != l || (c.heads == 1 && mp.Head != -1) || (c.heads > 1 && mp.Head != h) || mp.T != s.N || len(mp.P) != s.N*s.N {
					t.Fatalf("%s: map %d/%d: layer %d head %d T %d", c.spec, l, h, mp.Layer, mp.Head, mp.T)
				}
				for i := 0; i < mp.T; i++ {
					sum := 0.0
					for j := 0; j < mp.T; j++ {
						if j > i && mp.At(i, j) != 0 {
							t.Fatalf("%s: not causal at %d,%d", c.spec, i, j)
						}
						sum += float64(mp.At(i, j))
					}
					if math.Abs(sum-1) > 1e-4 {
						t.Fatalf("%s: row %d sums to %g", c.spec, i, sum)
					}
				}
			}
		}
	}
	s, _ := synth.LookupSpec("odd_aft_simple")
	m, err := synth.New(s, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Attention(ctx, []byte("abc")); !errors.Is(err, synth.ErrNoAttention) {
		t.Errorf("aft_simple: %v", err)
	}
	sm, _ := synth.New(small.Spec, 1)
	if _, err := sm.Attention(ctx, nil); err == nil {
		t.Error("empty prompt: no error")
	}
}
