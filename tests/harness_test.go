// Package tests is the repository-wide kernel test suite: every kernel of
// every linked spec, at every instruction-set level this CPU runs, against
// a plain float64 reference written from the formulas of runtime/kernels
// and against the Go level, with guard values around every region a kernel
// may touch.
package tests

import (
	"fmt"
	"math"
	"strings"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/kerneltest/harness"
)

// This file is the comparison with the float64 references: the layouts
// of the arguments, the call (through kerneltest/harness, which lays them
// out in guarded, misaligned buffers and checks what the kernel wrote,
// shared with kerneltest) and the comparisons. The references are in
// reference_test.go, the scenarios in kernels_test.go.

// layout is the shape of one slice argument: rows rows, stride floats
// apart, each width floats wide (width −1: the causal triangle, row r has
// r+1 entries), starting at column col of a buffer row (a head's offset).
type layout struct {
	rows, stride, width, col int
}

// triangle is the causal triangle of t rows with row stride n.
func triangle(t, n int) layout { return layout{rows: t, stride: n, width: -1} }

// square is the unmasked logit matrix of t rows of t entries, row stride n:
// what a bidirectional spec's kernels read and write.
func square(t, n int) layout { return layout{rows: t, stride: n, width: t} }

// colStart is the first row that has an entry in column p: p in the causal
// triangle, 0 otherwise.
func (l layout) colStart(p int) int {
	if l.width < 0 {
		return p
	}
	return 0
}

// rowLen is the number of active entries of row r.
func (l layout) rowLen(r int) int {
	if l.width < 0 {
		return r + 1
	}
	return l.width
}

// count is the number of active entries.
func (l layout) count() int {
	if l.width < 0 {
		return l.rows * (l.rows + 1) / 2
	}
	return l.rows * l.width
}

// pos is the index of entry (r, p) in the list of active values.
func (l layout) pos(r, p int) int {
	if l.width < 0 {
		return r*(r+1)/2 + p
	}
	return r*l.width + p
}

// coord is the inverse of pos.
func (l layout) coord(k int) (r, p int) {
	if l.width < 0 {
		r = int((math.Sqrt(8*float64(k)+1) - 1) / 2)
		for r*(r+1)/2 > k {
			r--
		}
		for (r+1)*(r+2)/2 <= k {
			r++
		}
		return r, k - r*(r+1)/2
	}
	return k / l.width, k % l.width
}

// need is the length of the slice passed: from entry (0, 0) to the last
// active entry, exactly.
func (l layout) need() int {
	if l.rows == 0 {
		return 0
	}
	return (l.rows-1)*l.stride + l.rowLen(l.rows-1)
}

// role is what a kernel may do to an argument (the catalog's).
type role = catalog.Role

const (
	in  = catalog.In  // read only: must come back bit for bit unchanged
	out = catalog.Out // overwritten: starts as unwritten markers
	acc = catalog.Acc // accumulated into: starts from the given values
)

// operand is one slice argument of a call.
type operand struct {
	name  string
	lay   layout
	role  role
	vals  []float32 // active values before the call (in, acc, and alias targets)
	alias string    // share the buffer of this earlier operand (same layout)
	empty bool      // pass an empty slice: an optional argument turned off
}

// mat is a matrix of active values in layout order.
type mat struct {
	lay layout
	v   []float32
}

func newMat(l layout) mat { return mat{l, make([]float32, l.count())} }

func (m mat) at(r, p int) float32 { return m.v[m.lay.pos(r, p)] }

// expect is a reference output: values and the error allowed for each.
type expect struct {
	lay  layout
	v    []float64
	tol  []float64
	name string
}

func newExpect(name string, l layout) *expect {
	return &expect{lay: l, v: make([]float64, l.count()), tol: make([]float64, l.count()), name: name}
}

func (e *expect) set(r, p int, v, tol float64) {
	k := e.lay.pos(r, p)
	e.v[k], e.tol[k] = v, tol
}

// scalarExpect is the expectation for a kernel's return value.
func scalarExpect(v, tol float64) *expect {
	return &expect{lay: layout{rows: 1, stride: 1, width: 1}, v: []float64{v}, tol: []float64{tol}, name: "return value"}
}

// args are the arguments of one call: the length, the slices by operand
// name, and the scalars (scale, alpha) by name.
type args struct {
	t      int
	s      map[string][]float32
	scalar map[string]float32
}

// invoker calls one kernel with a scenario's arguments; its result is the
// kernel's return value (0 for kernels without one).
type invoker func(a args) float32

// scenario is one call to make at every level: length, operands, scalars,
// expected outputs (by operand name; "return" for the return value) and a
// label.
type scenario struct {
	label   string
	t       int
	ops     []*operand
	scalars map[string]float32
	want    map[string]*expect
}

// outputs are a call's results: active values of the out and acc operands,
// and "return".
type outputs map[string][]float32

// exercise lays the operands out in guarded, misaligned buffers
// (harness.Exercise), calls the kernel, and returns its outputs and every
// guard or input that changed.
func exercise(sc scenario, call invoker) (outputs, []string) {
	var hops []*harness.Operand
	for _, op := range sc.ops {
		l := op.lay
		ho := &harness.Operand{Name: op.name, Role: op.role, Len: l.need(), Offset: l.col, Span: l.rows * l.stride,
			Stride: l.stride, Vals: op.vals, Alias: op.alias, Empty: op.empty}
		for r := 0; r < l.rows; r++ {
			for p := 0; p < l.rowLen(r); p++ {
				ho.Active = append(ho.Active, r*l.stride+p)
			}
		}
		hops = append(hops, ho)
	}
	res := harness.Exercise(hops, func(s map[string][]float32) float32 {
		return call(args{t: sc.t, s: s, scalar: sc.scalars})
	})
	got := outputs{"return": {res.Ret}}
	for name, v := range res.Out {
		got[name] = v
	}
	return got, res.Problems
}

// compare checks got against the reference: |got − want| ≤ tol·factor
// element by element (NaN never passes), reporting the first few misses.
func compare(what string, got []float32, want *expect, factor float64) []string {
	if len(got) != len(want.v) {
		return []string{fmt.Sprintf("%s: %d values, want %d", what, len(got), len(want.v))}
	}
	var misses []string
	bad := 0
	for k, g := range got {
		d := math.Abs(float64(g) - want.v[k])
		if d <= want.tol[k]*factor { // false for NaN
			continue
		}
		if want.v[k] == float64(g) { // equal infinities
			continue
		}
		bad++
		if len(misses) < 4 {
			r, p := want.lay.coord(k)
			misses = append(misses, fmt.Sprintf("(%d,%d): got %s, want %.9g ± %.3g", r, p, harness.Fmt(g), want.v[k], want.tol[k]*factor))
		}
	}
	if bad == 0 {
		return nil
	}
	return []string{fmt.Sprintf("%s: %d of %d wrong: %s", what, bad, len(got), strings.Join(misses, "; "))}
}

// level is one instruction set's implementation of the kernel at hand.
type level struct {
	name string
	call invoker
}

// runScenario runs sc at every level (the first must be Go) and returns
// every problem: guards or inputs changed, outputs off the reference, and
// levels above Go off the Go level's outputs by more than twice the
// reference tolerance (each may err by tol in opposite directions).
func runScenario(sc scenario, levels []level) []string {
	var problems []string
	var goOut outputs
	for li, lv := range levels {
		got, probs := exercise(sc, lv.call)
		for _, p := range probs {
			problems = append(problems, fmt.Sprintf("%s %s: %s", sc.label, lv.name, p))
		}
		for name, want := range sc.want {
			g, ok := got[name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s %s: no output %s", sc.label, lv.name, name))
				continue
			}
			for _, p := range compare(name+" vs float64 reference", g, want, 1) {
				problems = append(problems, fmt.Sprintf("%s %s: %s", sc.label, lv.name, p))
			}
			if li == 0 {
				continue
			}
			gw := &expect{lay: want.lay, v: make([]float64, len(want.v)), tol: want.tol}
			for k, v := range goOut[name] {
				gw.v[k] = float64(v)
			}
			for _, p := range compare(name+" vs Go level", g, gw, 2) {
				problems = append(problems, fmt.Sprintf("%s %s: %s", sc.label, lv.name, p))
			}
		}
		if li == 0 {
			goOut = got
		}
	}
	return problems
}
