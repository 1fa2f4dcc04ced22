package tests

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/kerneltest/harness"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The strip kinds (SoftmaxRows, SoftmaxRowsBack: catalog.Entry.Strip) on
// a range of rows i0 ≤ i < i1 of a t-row block, their slices starting at
// row i0. TestKernels calls them on whole blocks (i0 = 0, i1 = t) against
// the float64 references; here every level of a few specs (causal and
// bidirectional, t < N and t = N) is called on strips at awkward places
// (the first rows, the last, i0 > 0 and i1 < t, lengths no multiple of a
// group or a vector, single rows, empty strips) and each strip's rows must
// be those of the same kernel's whole-block call bit for bit. The strip's
// slices start at row i0 of a buffer laid out as the whole block, holding
// exactly the strip's entries: the rows above and below the strip, the
// entries past each row's keys and the floats around are guards that must
// come back unchanged (and, NaN, poison any output that reads them).
// TestSoftmaxStripMutantsAreCaught shows the checks catch wrong strip
// handling (i0 ignored in the addressing or in the rows' lengths, a row
// left out, a write past a row).

// stripSpecs are the specs the strips run on: causal and bidirectional
// twins (odd, enc_odd; vanilla, enc_vanilla), a short one (odd_ffn) and a
// longer one (mid).
var stripSpecs = []string{"odd", "enc_odd", "odd_ffn", "vanilla", "enc_vanilla", "mid"}

// stripOut is each strip kind's output.
var stripOut = map[string]string{"SoftmaxRows": "a", "SoftmaxRowsBack": "db"}

// stripModes are each strip kind's input modes: random logits, masked
// rows (all −Inf, one key, about half −Inf), and the outputs aliasing an
// input.
var stripModes = map[string][]string{
	"SoftmaxRows":     {"random", "masked", "alias"},
	"SoftmaxRowsBack": {"random", "alias_a", "alias_g"},
}

// stripCall calls a strip kernel on rows i0 ≤ i < i1 of a t-row block,
// the slices by parameter name.
type stripCall func(t, i0, i1 int, s map[string][]float32)

// stripCallOf is kernel fn (a kernels.SoftmaxRowsFunc or
// SoftmaxRowsBackFunc) as a stripCall.
func stripCallOf(fn reflect.Value) stripCall {
	switch f := fn.Interface().(type) {
	case kernels.SoftmaxRowsFunc:
		return func(t, i0, i1 int, s map[string][]float32) { f(t, i0, i1, s["b"], s["a"]) }
	case kernels.SoftmaxRowsBackFunc:
		return func(t, i0, i1 int, s map[string][]float32) { f(t, i0, i1, s["a"], s["g"], s["db"]) }
	}
	panic(fmt.Sprintf("stripCallOf: %s is no strip kind", fn.Type()))
}

// stripArg is one slice argument over the whole block: its role, its
// active values (in and alias targets) and the operand it aliases.
type stripArg struct {
	name  string
	role  role
	vals  mat
	alias string
}

// stripInputs are the whole block's arguments of kernel f at length t.
func stripInputs(e *env, f string, t int, mode string, rng *rand.Rand) []stripArg {
	l := e.logits(t)
	switch f {
	case "SoftmaxRows":
		b := mixed(rng, l, 3)
		if mode != "random" {
			maskRows(rng, b)
		}
		args := []stripArg{{name: "b", role: in, vals: b}, {name: "a", role: out}}
		if mode == "alias" {
			args[1].alias = "b" // a is b
		}
		return args
	case "SoftmaxRowsBack":
		args := []stripArg{
			{name: "a", role: in, vals: probabilities(rng, l, 2)},
			{name: "g", role: in, vals: mixed(rng, l, 1)},
			{name: "db", role: out},
		}
		switch mode {
		case "alias_a":
			args[2].alias = "a" // db is a
		case "alias_g":
			args[2].alias = "g" // db is g
		}
		return args
	}
	panic("stripInputs: no strip kind " + f)
}

// runStrip calls the kernel on rows i0 ≤ i < i1 of the block whose
// arguments are args: each slice starts at row i0 of a guarded buffer
// laid out as the whole block (stride N), and is exactly as long as the
// strip's entries need, with room after it for a whole block. It returns the outputs (each operand's active
// entries, row by row) and the guards or inputs the call changed.
func runStrip(e *env, t, i0, i1 int, args []stripArg, call stripCall) (map[string][]float32, []string) {
	l := e.logits(t)
	var ops []*harness.Operand
	for _, a := range args {
		// Span: room for rows up to t past the slice's start, so a kernel
		// that addresses row i at i·N writes guards, not the heap.
		ho := &harness.Operand{Name: a.name, Role: a.role, Offset: i0 * e.n, Span: (i0 + t) * e.n, Stride: e.n, Alias: a.alias}
		if i1 > i0 {
			ho.Len = (i1-i0-1)*e.n + l.rowLen(i1-1)
		}
		for i := i0; i < i1; i++ {
			for p := 0; p < l.rowLen(i); p++ {
				ho.Active = append(ho.Active, (i-i0)*e.n+p)
				if a.role != out && a.alias == "" {
					ho.Vals = append(ho.Vals, a.vals.at(i, p))
				}
			}
		}
		ops = append(ops, ho)
	}
	res := harness.Exercise(ops, func(s map[string][]float32) float32 {
		call(t, i0, i1, s)
		return 0
	})
	return res.Out, res.Problems
}

// stripLengths are the block lengths the strips are cut from.
func stripLengths(n int) []int {
	var out []int
	seen := map[int]bool{}
	for _, t := range []int{1, 2, 7, 17, 33, n - 1, n} {
		if t >= 1 && t <= n && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// stripRanges are the strips [i0, i1) of a t-row block tested: the whole
// block, empty ones (at the top, inside, at the bottom), single rows,
// strips from the top, to the bottom and inside, of lengths that are no
// multiple of AVX2's or AVX-512's row group (4, 8) or vector (8, 16), and
// starting on and off those boundaries.
func stripRanges(t int) [][2]int {
	cand := [][2]int{
		{0, t}, {0, 0}, {3, 3}, {t, t}, {0, 1}, {t - 1, t}, {t / 2, t/2 + 1},
		{1, t}, {0, t - 1}, {1, 2}, {5, t - 2}, {7, 16}, {8, 24}, {9, 22}, {13, t},
		{16, 49}, {t / 3, 2*t/3 + 1}, {0, 11}, {t - 13, t},
	}
	var out [][2]int
	seen := map[[2]int]bool{}
	for _, r := range cand {
		if r[0] >= 0 && r[0] <= r[1] && r[1] <= t && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// stripProblems runs kernel f of env e through call on every strip of
// every length and mode, and lists every difference from the whole
// block's call and every guard or input a call changed.
func stripProblems(e *env, f string, call stripCall) []string {
	var problems []string
	name := stripOut[f]
	for _, t := range stripLengths(e.n) {
		l := e.logits(t)
		for _, mode := range stripModes[f] {
			args := stripInputs(e, f, t, mode, rngFor("strip", e.name, f, t, mode))
			whole, probs := runStrip(e, t, 0, t, args, call)
			for _, p := range probs {
				problems = append(problems, fmt.Sprintf("t=%d %s, whole block: %s", t, mode, p))
			}
			for _, r := range stripRanges(t) {
				i0, i1 := r[0], r[1]
				what := fmt.Sprintf("t=%d %s, rows %d to %d", t, mode, i0, i1)
				got, probs := func() (got map[string][]float32, probs []string) {
					defer func() {
						if x := recover(); x != nil {
							probs = []string{fmt.Sprintf("panic: %v", x)}
						}
					}()
					return runStrip(e, t, i0, i1, args, call)
				}()
				for _, p := range probs {
					problems = append(problems, what+": "+p)
				}
				if probs != nil && got == nil {
					continue
				}
				// The strip's entries are contiguous in the whole
				// block's row-by-row list (pos is arithmetic: at i0 = t
				// it is the list's end).
				k0, n := l.pos(i0, 0), 0
				for i := i0; i < i1; i++ {
					n += l.rowLen(i)
				}
				want := whole[name][k0 : k0+n]
				if p := sameBits(got[name], want, l, i0); p != "" {
					problems = append(problems, fmt.Sprintf("%s: %s vs the whole block's: %s", what, name, p))
				}
			}
		}
	}
	return problems
}

// sameBits compares a strip's outputs with the whole block's, bit for
// bit, and describes the first few differences ("" for none); entry k
// of either is row i0 + (its row in the strip) of the layout l.
func sameBits(got, want []float32, l layout, i0 int) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d values, want %d", len(got), len(want))
	}
	k0 := l.pos(i0, 0)
	var misses []string
	bad := 0
	for k := range got {
		if math.Float32bits(got[k]) == math.Float32bits(want[k]) {
			continue
		}
		bad++
		if len(misses) < 4 {
			i, j := l.coord(k0 + k)
			misses = append(misses, fmt.Sprintf("(%d,%d): %s, whole block %s", i, j, harness.Fmt(got[k]), harness.Fmt(want[k])))
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d differ: %s", bad, len(got), strings.Join(misses, "; "))
}

// TestSoftmaxRowsStrips runs the strip kinds of stripSpecs, at every level
// this run can execute, on strips of rows (stripProblems).
func TestSoftmaxRowsStrips(t *testing.T) {
	for _, name := range stripSpecs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec, err := kernels.Spec(name)
			if err != nil {
				t.Fatal(err)
			}
			e := envOf(spec)
			for _, s := range levelsOf(t, name) {
				for _, f := range []string{"SoftmaxRows", "SoftmaxRowsBack"} {
					fn := field(s, f)
					if !fn.IsValid() || fn.IsNil() {
						if s.ISA == kernels.Go {
							t.Fatalf("%s has no Go %s", name, f)
						}
						t.Logf("level %s does not provide %s", s.ISA, f)
						continue
					}
					for _, p := range stripProblems(e, f, stripCallOf(fn)) {
						t.Errorf("%s %s: %s", f, s.ISA, p)
					}
				}
			}
		})
	}
}

// stripMutants are strip kernels with one fault each, built on the correct
// Go kernel; each must be caught on a causal spec and on a bidirectional one.
var stripMutants = []struct {
	name, field string
	wrap        func(e *env, ok stripCall) stripCall
}{
	{"addresses row i at i·N (i0 left out of the addressing)", "SoftmaxRows", rowsFromBlockStart},
	{"addresses row i at i·N (i0 left out of the addressing)", "SoftmaxRowsBack", rowsFromBlockStart},
	{"treats the strip as a block of its own (row lengths from i − i0)", "SoftmaxRows", stripAsBlock},
	{"treats the strip as a block of its own (row lengths from i − i0)", "SoftmaxRowsBack", stripAsBlock},
	{"leaves the strip's last row out", "SoftmaxRows", func(e *env, ok stripCall) stripCall {
		return func(t, i0, i1 int, s map[string][]float32) { ok(t, i0, max(i0, i1-1), s) }
	}},
	{"writes past the strip's first row", "SoftmaxRowsBack", func(e *env, ok stripCall) stripCall {
		return func(t, i0, i1 int, s map[string][]float32) {
			ok(t, i0, i1, s)
			if L := e.logits(t).rowLen(i0); i1 > i0 && L < e.n {
				db := s["db"]
				db[:L+1][L] = 0
			}
		}
	}},
}

// rowsFromBlockStart computes row i from the floats at i·N of the strip's
// slices, as a kernel that forgets to subtract i0 from the row would (the
// rows whose entries lie past the slices' ends left out).
func rowsFromBlockStart(e *env, ok stripCall) stripCall {
	return func(t, i0, i1 int, s map[string][]float32) {
		for i := i0; i < i1; i++ {
			o, L, sub := i*e.n, e.logits(t).rowLen(i), map[string][]float32{}
			for k, v := range s {
				if o+L > len(v) {
					return
				}
				sub[k] = v[o:]
			}
			ok(t, i, i+1, sub)
		}
	}
}

// stripAsBlock calls the kernel on the strip as if it were the rows 0 to
// i1 − i0 of a block of that length.
func stripAsBlock(e *env, ok stripCall) stripCall {
	return func(t, i0, i1 int, s map[string][]float32) { ok(i1-i0, 0, i1-i0, s) }
}

// TestSoftmaxStripMutantsAreCaught runs stripMutants on odd and enc_odd:
// stripProblems must report each.
func TestSoftmaxStripMutantsAreCaught(t *testing.T) {
	for _, name := range []string{"odd", "enc_odd"} {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		e := envOf(spec)
		goK, err := kernels.LookupAt(name, kernels.Go)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range stripMutants {
			t.Run(name+"/"+m.field+"/"+m.name, func(t *testing.T) {
				problems := stripProblems(e, m.field, m.wrap(e, stripCallOf(field(goK.Set, m.field))))
				if len(problems) == 0 {
					t.Fatalf("mutant %q of %s %s was not caught", m.name, name, m.field)
				}
				t.Logf("reported (%d problems), first: %s", len(problems), problems[0])
			})
		}
	}
}

// TestSoftmaxStripChecks checks the strip kinds' wrappers at every level:
// they reject rows outside 0 ≤ i0 ≤ i1 ≤ t and slices a float shorter
// than the strip needs ((i1−i0−1)·N plus the last row's i1 entries, t for
// a bidirectional spec), and accept slices of exactly that length.
func TestSoftmaxStripChecks(t *testing.T) {
	for _, name := range []string{"odd", "enc_odd"} {
		spec, err := kernels.Spec(name)
		if err != nil {
			t.Fatal(err)
		}
		e := envOf(spec)
		for _, s := range levelsOf(t, name) {
			for _, f := range []string{"SoftmaxRows", "SoftmaxRowsBack"} {
				call := stripCallOf(field(s, f))
				try := func(tl, i0, i1, short int) (p any) {
					defer func() { p = recover() }()
					n := 0
					if i1 > i0 {
						n = (i1-i0-1)*e.n + e.logits(tl).rowLen(i1-1)
					}
					sl := map[string][]float32{}
					for _, k := range []string{"a", "b", "g", "db"} {
						sl[k] = make([]float32, max(n-short, 0), n+e.n)
					}
					call(tl, i0, i1, sl)
					return nil
				}
				tl := e.n - 5
				for _, r := range [][2]int{{-1, 3}, {4, 3}, {2, tl + 1}} {
					if p := try(tl, r[0], r[1], 0); p == nil || !strings.Contains(fmt.Sprint(p), "want 0 ≤ i0 ≤ i1 ≤ t") {
						t.Errorf("%s %s %s: rows %d to %d of %d: panic %v", name, s.ISA, f, r[0], r[1], tl, p)
					}
				}
				for _, r := range [][2]int{{0, tl}, {5, 6}, {3, 20}, {tl - 1, tl}, {7, 7}} {
					if p := try(tl, r[0], r[1], 0); p != nil {
						t.Errorf("%s %s %s: rows %d to %d of %d, exact slices: panic %v", name, s.ISA, f, r[0], r[1], tl, p)
					}
					if r[1] > r[0] {
						if p := try(tl, r[0], r[1], 1); p == nil || !strings.Contains(fmt.Sprint(p), "rows "+fmt.Sprint(r[0])+" to "+fmt.Sprint(r[1])) {
							t.Errorf("%s %s %s: rows %d to %d of %d, a float short: panic %v", name, s.ISA, f, r[0], r[1], tl, p)
						}
					}
				}
			}
		}
	}
}
