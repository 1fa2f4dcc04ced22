package harness

import (
	"strings"
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
)

// TestExercise calls toy kernels on a 2×3 input (stride 4) and a 2×3
// output and checks what Exercise reports: nothing for a correct kernel,
// and each kind of fault for a faulty one.
func TestExercise(t *testing.T) {
	n, act := Shape(catalog.Shape{Rows: 2, Stride: 4, Width: 3}, 5)
	if n != 7 || len(act) != 6 || act[3] != 4 {
		t.Fatalf("Shape: %d %v", n, act)
	}
	ops := func() []*Operand {
		return []*Operand{
			{Name: "x", Role: catalog.In, Len: n, Span: 8, Active: act, Vals: []float32{1, 2, 3, 4, 5, 6}, Stride: 4},
			{Name: "y", Role: catalog.Out, Len: n, Span: 8, Active: act, Stride: 4},
		}
	}
	copyX := func(s map[string][]float32) {
		for _, j := range act {
			s["y"][j] = 2 * s["x"][j]
		}
	}
	for _, c := range []struct {
		name, want string
		call       func(s map[string][]float32)
	}{
		{"correct", "", copyX},
		{"writes the gap", "outside", func(s map[string][]float32) { copyX(s); s["y"][3] = 0 }},
		{"writes past the end", "past the region", func(s map[string][]float32) { copyX(s); s["y"][:n+2][n+1] = 0 }},
		{"writes its input", "read-only", func(s map[string][]float32) { copyX(s); s["x"][0] = 0 }},
		{"leaves an entry", "unwritten", func(s map[string][]float32) { copyX(s); s["y"][6] = Unwritten }},
	} {
		res := Exercise(ops(), func(s map[string][]float32) float32 { c.call(s); return 7 })
		got := strings.Join(res.Problems, "\n")
		if y := res.Out["y"]; len(y) == 6 && Fmt(y[5]) == "unwritten" {
			got += "unwritten"
		}
		if res.Ret != 7 {
			t.Errorf("%s: result %v", c.name, res.Ret)
		}
		if c.want == "" {
			if got != "" || res.Out["y"][5] != 12 {
				t.Errorf("%s: %s, y %v", c.name, got, res.Out["y"])
			}
			continue
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: %q lacks %q", c.name, got, c.want)
		}
	}
}

// TestAliasAndEmpty checks a slice passed twice and an empty one.
func TestAliasAndEmpty(t *testing.T) {
	res := Exercise([]*Operand{
		{Name: "a", Role: catalog.Acc, Len: 2, Span: 2, Active: []int{0, 1}, Vals: []float32{1, 2}},
		{Name: "b", Role: catalog.In, Len: 2, Span: 2, Active: []int{0, 1}, Alias: "a"},
		{Name: "c", Role: catalog.Out, Empty: true},
	}, func(s map[string][]float32) float32 {
		if len(s["c"]) != 0 || &s["a"][0] != &s["b"][0] {
			t.Error("empty or alias not as asked")
		}
		s["a"][1] += s["b"][0]
		return 0
	})
	if len(res.Problems) != 0 || res.Out["a"][1] != 3 || res.Out["c"] != nil {
		t.Errorf("%v %v", res.Problems, res.Out)
	}
}
