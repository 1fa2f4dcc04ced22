package kerneltest

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/internal/kernelbench"
	"github.com/synthgen/synthgen/kerneltest/harness"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// Tolerance. Two levels of one kernel may round differently (vector lanes
// sum in another order, the assembly fuses multiply-adds, exponentials and
// tanh are approximated differently within a few ulps), so an output
// element passes when
//
//	|got − want| ≤ RelTol · (|want| + scale)
//
// where scale, the absolute part, is the largest magnitude among the
// finite entries of that output (the reference's): the size of the terms
// its entries are sums of, whose rounding an entry may carry however small
// it is. Two outputs get a larger scale: LinearBack's dfq and dfk, which
// are differences of terms of dv's size (at t = 1 they vanish analytically,
// and both levels return rounding noise), take 1/100 of dv's; TriDot's
// result, a sum of t(t+1)/2 products, takes Σ|x·y| / √(t(t+1)/2), the size
// such a sum of random terms has. NaN passes only against NaN, an infinity
// only against itself.
//
// The levels of the shipped specs agree within a tenth of this (all but
// LinearBack's noise at t = 1 within a hundredth); a wrong kernel (a term missing or counted twice, a row or a
// column off by one, a tail left unwritten) is off by much more: one term
// of L ≤ 1024 changes an entry by about 1/L of its size.
const RelTol = 1e-4

// The guarded buffers and their markers are package harness's: canary
// fills every float a kernel must not touch (NaN, so a kernel that reads
// one into its arithmetic poisons its output); unwritten fills the entries
// a kernel must overwrite.
const (
	unwrittenBits = harness.UnwrittenBits
	lead          = harness.Lead
	tail          = harness.Tail
)

var (
	canary    = harness.Canary
	unwritten = harness.Unwritten
	isMarker  = harness.IsMarker
	fmtVal    = harness.Fmt
)

// Case is one call Test makes of a kernel on every instruction set.
type Case struct {
	// T is the call's size: the length t ≤ N for the sequence kernels,
	// the rows for the row-wise kernels (the parameters for AdamW), and
	// kc for GemmTile.
	T int
	// Inputs names the inputs: "random" (ordinary values) for every kernel,
	// and per kind "extreme" (logits or keys of ±1e4), "masked" (logit rows
	// fully and partly −Inf), "nobias" (the optional bias slice empty),
	// "offset" (LayerNorm rows with a large common offset), "tiny"
	// (AdamW's gradients near eps); for GemmTile the operands' layout and
	// tile corner ("packed", "rowmajor-edge", "colmajor-edge",
	// "packed-corner").
	Inputs string
	unit   string // what T counts: t, rows or kc
}

// String names the case as Test's subtests do, e.g. "t=127/inputs=masked".
func (c Case) String() string {
	u := c.unit
	if u == "" {
		u = "t"
	}
	return fmt.Sprintf("%s=%d/inputs=%s", u, c.T, c.Inputs)
}

// modes lists the input sets of each kind beyond "random".
func modes(k catalog.Kind) []string {
	switch k {
	case catalog.SoftmaxValue, catalog.SoftmaxRows:
		return []string{"random", "extreme", "masked"}
	case catalog.Product, catalog.ProductBackW:
		return []string{"random", "nobias"}
	case catalog.AFTFull, catalog.AFTFullBack, catalog.AFTLocal, catalog.AFTLocalBack,
		catalog.AFTConv, catalog.AFTConvBack, catalog.AFTSimple, catalog.AFTSimpleBack,
		catalog.SoftmaxStats, catalog.SoftmaxScale:
		return []string{"random", "extreme"}
	case catalog.LayerNorm, catalog.LayerNormBack:
		return []string{"random", "offset"}
	case catalog.AdamW:
		return []string{"random", "tiny"}
	case catalog.Exp, catalog.Gate, catalog.Attend:
		return []string{"random", "extreme"}
	}
	return []string{"random"}
}

// sizes lists the sizes a kind is tested at: for the sequence kernels
// t = N, N − 1, 13 and 1 (full length, a tail that is no multiple of the
// vector width, a short length, one position); for the row-wise kernels
// 1, 7 and N rows (the Flat kinds: 1, 7, 33 and 4099 floats).
func sizes(spec specs.Spec, k catalog.Kind) []int {
	cand := []int{spec.N, spec.N - 1, 13, 1}
	switch {
	case k.Flat():
		cand = []int{4099, 33, 7, 1}
	case k.RowWise():
		cand = []int{spec.N, 7, 1}
	}
	var out []int
	seen := map[int]bool{}
	for _, t := range cand {
		if t >= 1 && (k.RowWise() || t <= spec.N) && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// findOp returns spec's catalog entry for kernel field.
func findOp(spec specs.Spec, kernel string) (catalog.Op, error) {
	var names []string
	for _, op := range catalog.Ops(&spec) {
		if op.Field == kernel {
			return op, nil
		}
		names = append(names, op.Field)
	}
	return catalog.Op{}, fmt.Errorf("spec %s has no kernel %q (it has %s)", spec.Name, kernel, strings.Join(names, ", "))
}

// findOpOfKind returns spec's op of kind k (a forward kind, of which a
// spec has one).
func findOpOfKind(spec specs.Spec, k catalog.Kind) (catalog.Op, error) {
	for _, op := range catalog.Ops(&spec) {
		if op.Kind == k {
			return op, nil
		}
	}
	return catalog.Op{}, fmt.Errorf("spec %s has no %s kernel", spec.Name, k)
}

// Cases returns the cases Test runs for kernel (a kernels.Set field name,
// e.g. "SoftmaxValue") of spec: every input set of the kernel's kind at
// every size, except that sizes above 256 (the long sequences of a large
// N, whose reference calls take long) run "random" at N and the other
// input sets at N − 1.
func Cases(spec specs.Spec, kernel string) ([]Case, error) {
	op, err := findOp(spec, kernel)
	if err != nil {
		return nil, err
	}
	if op.Kind == catalog.GemmTile {
		return gemmCases(spec), nil
	}
	unit := "t"
	if op.Kind.RowWise() {
		unit = "rows"
	}
	var out []Case
	all := modes(op.Kind)
	for _, t := range sizes(spec, op.Kind) {
		ms := all
		if t > bigT { // one call costs O(t²): random at the largest size, the rest at the next
			switch {
			case t == spec.N || len(all) == 1 || op.Kind.Flat():
				ms = all[:1]
			default:
				ms = all[1:]
			}
		}
		for _, m := range ms {
			out = append(out, Case{T: t, Inputs: m, unit: unit})
		}
	}
	return out, nil
}

// bigT is the size above which Cases runs each input set at one size only.
const bigT = 256

// Compare calls kernel of spec once from set ref and once from set got on
// the inputs of case c and returns every difference found: an output
// element of got off ref's beyond the tolerance (RelTol), an entry of an
// overwritten output that got left unwritten, a read-only input got
// changed, or a float got wrote outside the regions it may write (the
// guards around every slice, the gaps between a head's rows, the upper
// triangle of a logit matrix). The inputs are a function of (spec,
// kernel, c) only. For a backward kernel the statistics its forward
// writes come from ref's forward. Compare(…, goSet, goSet) checks the Go
// level itself: deterministic, and within its bounds. GemmTile, whose tile
// shape differs from level to level, is checked at got's shape against a
// float64 reference instead (CheckGemmTile), whatever ref.
//
// The error reports a case that cannot run: an unknown kernel, or one
// that ref or got does not provide.
func Compare(spec specs.Spec, kernel string, c Case, ref, got kernels.Set) ([]string, error) {
	op, err := findOp(spec, kernel)
	if err != nil {
		return nil, err
	}
	if op.Kind == catalog.GemmTile {
		return compareGemm(spec, c, got)
	}
	k, err := newCall(spec, op, c, ref)
	if err != nil {
		return nil, err
	}
	return k.check(got)
}

// role is what a kernel may do to a slice argument (the catalog's).
type role = catalog.Role

const (
	in  = catalog.In  // read only
	out = catalog.Out // overwritten
	acc = catalog.Acc // accumulated into, or updated in place
)

// arg is one slice argument: its placement in a guarded buffer
// (harness.Operand) and its contents before the call.
type arg struct {
	name  string
	role  role
	shape catalog.Shape
	op    *harness.Operand
	// init is the slice's contents before the call (length op.Len): the
	// active entries' values, canaries elsewhere.
	init []float32
}

// call is one prepared case: the arguments before the call and ref's
// results.
type call struct {
	spec    specs.Spec
	op      catalog.Op
	c       Case
	refISA  kernels.ISA
	args    []*arg
	scalars map[string]float32
	want    harness.Result // ref's call
	// related raises an output's scale to 1/100 of another output's
	// (see RelTol); retScale is the result's scale.
	related  map[string]string
	retScale float64
}

// rngFor is a generator seeded by the case's identity, so every level
// and every run sees the same inputs.
func rngFor(parts ...any) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprint(h, parts...)
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// newCall lays out case c's arguments for op and runs ref on them.
func newCall(spec specs.Spec, op catalog.Op, c Case, ref kernels.Set) (*call, error) {
	fn := kernelbench.KernelOf(ref, op.Field)
	if fn == nil {
		return nil, fmt.Errorf("the %s set of spec %s has no %s", ref.ISA, spec.Name, op.Field)
	}
	k := &call{spec: spec, op: op, c: c, refISA: ref.ISA, scalars: map[string]float32{}}
	t := c.T
	rng := rngFor(spec.Name, op.Field, c.T, c.Inputs)
	rs := op.Entry().Roles()
	views := map[string][]float32{}
	for _, p := range op.Slices {
		n, active := harness.Shape(p.Shape, t)
		empty := c.Inputs == "nobias" && p.Shape.Optional
		if empty {
			n, active = 0, nil
		}
		a := &arg{name: p.Name, role: rs[p.Name], shape: p.Shape, init: make([]float32, n),
			op: &harness.Operand{Name: p.Name, Role: rs[p.Name], Len: n, Span: n, Active: active, Stride: p.Shape.Stride, Empty: empty}}
		for i := range a.init {
			a.init[i] = canary
		}
		for _, j := range active {
			if a.role == out {
				a.init[j] = unwritten
			} else {
				a.init[j] = float32(rng.NormFloat64())
			}
		}
		k.args = append(k.args, a)
		views[p.Name] = a.init
	}
	if err := k.prepare(views, rng, ref); err != nil {
		return nil, err
	}
	k.want = k.run(fn)
	return k, nil
}

// rowsOf visits the active entries of a slice of shape sh at length t by
// (row, column), with the index into the slice.
func rowsOf(sh catalog.Shape, t int, visit func(r, p, i int)) {
	rows := sh.Rows
	if rows < 0 {
		rows = t
	}
	for r := 0; r < rows; r++ {
		w := sh.Width
		switch {
		case sh.Triangle():
			w = r + 1
		case w < 0:
			w = t
		}
		for p := 0; p < w; p++ {
			visit(r, p, r*sh.Stride+p)
		}
	}
}

// prepare turns the normal random inputs into the case's: scales, the
// mode's special values, the inputs a kind assumes (probabilities,
// positive features, a row's log-sum-exp, non-negative moments), and a
// backward's statistics from ref's forward.
func (k *call) prepare(v map[string][]float32, rng *rand.Rand, ref kernels.Set) error {
	t, mode := k.c.T, k.c.Inputs
	shape := map[string]catalog.Shape{}
	for _, a := range k.args {
		shape[a.name] = a.shape
	}
	each := func(name string, f func(r, p int, x float32) float32) {
		s, ok := v[name]
		if !ok || len(s) == 0 {
			return
		}
		rowsOf(shape[name], t, func(r, p, i int) { s[i] = f(r, p, s[i]) })
	}
	scale := func(name string, by float32) { each(name, func(_, _ int, x float32) float32 { return x * by }) }
	extreme := func(name string, grid bool) {
		each(name, func(_, _ int, x float32) float32 {
			var y float64
			switch rng.IntN(3) {
			case 0:
				y = 1e4 + 3*float64(x)
			case 1:
				y = -1e4 + 3*float64(x)
			default:
				y = 3 * float64(x)
			}
			if grid { // on a 1/64 grid: exponents of sums of these are exact
				y = math.Round(y*64) / 64
			}
			return float32(y)
		})
	}
	op := k.op
	switch op.Kind {
	case catalog.SoftmaxValue, catalog.SoftmaxRows:
		switch mode {
		case "extreme":
			extreme("b", false)
		case "masked":
			scale("b", 3)
			inf := float32(math.Inf(-1))
			keep := 0
			each("b", func(r, p int, x float32) float32 {
				if p == 0 {
					keep = rng.IntN(r + 1)
				}
				switch r % 4 {
				case 0: // fully masked: a = 0, y = 0
					return inf
				case 1: // one key left
					if p != keep {
						return inf
					}
				case 2: // about half masked
					if p != keep && rng.IntN(2) == 0 {
						return inf
					}
				}
				return x
			})
		default:
			scale("b", 3)
		}
	case catalog.SoftmaxValueBack, catalog.SoftmaxRowsBack:
		// Softmax rows (causal, or all t keys of a bidirectional spec) of
		// logits of size 2; every fifth row fully masked (zero), as a
		// masked forward leaves it.
		a, sh := v["a"], shape["a"]
		for r := 0; r < t; r++ {
			w := t
			if sh.Triangle() {
				w = r + 1
			}
			row := a[r*sh.Stride : r*sh.Stride+w]
			if r%5 == 3 {
				clear(row)
				continue
			}
			m := math.Inf(-1)
			e := make([]float64, len(row))
			for j := range row {
				e[j] = 2 * float64(row[j])
				m = math.Max(m, e[j])
			}
			s := 0.0
			for j := range e {
				e[j] = math.Exp(e[j] - m)
				s += e[j]
			}
			for j := range row {
				row[j] = float32(e[j] / s)
			}
		}
	case catalog.Product, catalog.ProductBackX, catalog.ProductBackW:
		k.scalars["scale"] = float32(1 / math.Sqrt(float64(op.W)))
	case catalog.TriScale:
		k.scalars["alpha"] = 0.7
	case catalog.TriDot:
		var sum float64
		terms := 0
		x, y := v["x"], v["y"]
		rowsOf(shape["x"], t, func(_, _, i int) {
			sum += math.Abs(float64(x[i]) * float64(y[i]))
			terms++
		})
		k.retScale = sum / math.Sqrt(float64(max(terms, 1)))
	case catalog.TriAxpy:
		k.scalars["alpha"] = -1.3
	case catalog.AFTFull, catalog.AFTLocal, catalog.AFTConv, catalog.AFTSimple,
		catalog.AFTFullBack, catalog.AFTLocalBack, catalog.AFTConvBack, catalog.AFTSimpleBack:
		if mode == "extreme" {
			for _, name := range []string{"k", "w", "u"} {
				extreme(name, true)
			}
		}
	case catalog.Linear, catalog.LinearBack: // φ(x) = elu(x) + 1 > 0
		if op.Kind == catalog.LinearBack {
			k.related = map[string]string{"dfq": "dv", "dfk": "dv"}
		}
		for _, name := range []string{"fq", "fk"} {
			each(name, func(_, _ int, x float32) float32 { return float32(math.Abs(float64(x))) + 0.05 })
		}
	case catalog.LayerNorm, catalog.LayerNormBack, catalog.LayerNormGrad:
		off := float32(0.5)
		if mode == "offset" {
			off = 300
		}
		each("x", func(_, _ int, x float32) float32 { return off + 2*x })
		each("gamma", func(_, _ int, x float32) float32 { return 1 + 0.3*x })
		scale("beta", 0.3)
	case catalog.Gelu:
		scale("u", 3) // beyond tanh's clamp (|x| ≳ 4.3) now and then
	case catalog.SoftmaxStats, catalog.SoftmaxScale:
		if mode == "extreme" {
			extreme("x", false)
		} else {
			scale("x", 3)
		}
		if op.Kind == catalog.SoftmaxScale {
			k.scalars["scale"] = 0.25
			x, lse, vocab := v["x"], v["lse"], k.spec.Vocab
			for r := 0; r < t; r++ {
				row := x[r*vocab : r*vocab+vocab]
				m := math.Inf(-1)
				for _, y := range row {
					m = math.Max(m, float64(y))
				}
				s := 0.0
				for _, y := range row {
					s += math.Exp(float64(y) - m)
				}
				lse[r] = float32(m + math.Log(s))
			}
		}
	case catalog.Exp:
		if mode == "extreme" { // flushed, clamped and e^−Inf
			extreme("x", false)
			each("x", func(r, _ int, x float32) float32 {
				if r%7 == 3 {
					return float32(math.Inf(-1))
				}
				return x
			})
		} else {
			scale("x", 3)
		}
	case catalog.Gate:
		if mode == "extreme" { // σ saturated at 0 (flushed, clamped) and 1
			extreme("q", false)
		} else {
			scale("q", 8)
		}
	case catalog.Attend: // logits of σ 3, or ±1e4 mixed with those
		if mode == "extreme" {
			extreme("b", false)
		} else {
			scale("b", 3)
		}
	case catalog.Scores:
		k.scalars["scale"] = float32(1 / math.Sqrt(float64(k.spec.DH())))
	case catalog.GateBack: // σ in [0, 1]
		each("q", func(_, _ int, x float32) float32 { return (x + 1) / 2 })
	case catalog.AFTFactors: // k − κ over [−8, 8]
		scale("k", 4)
		scale("kappa", 4)
	case catalog.AFTQuotBack, catalog.AFTQuot: // positive denominators
		each("den", func(_, _ int, x float32) float32 { return x*x + 1e-3 })
	case catalog.AFTKVBack: // ek in [0, 1]
		each("ek", func(_, _ int, x float32) float32 { return x * x })
	case catalog.AdamW:
		gs := 1e-2
		if mode == "tiny" { // gradients and moments near eps's scale
			gs = 1e-7
		}
		scale("g", float32(gs))
		scale("m", float32(gs))
		each("v", func(_, _ int, x float32) float32 { return float32(gs * gs * math.Abs(float64(x))) })
		// The scalars: the catalog's defaults, as the benchmarks'.
	}
	fk := op.Entry().Forward
	if fk == catalog.NoKind {
		return nil
	}
	fop, err := findOpOfKind(k.spec, fk)
	if err != nil {
		return err
	}
	fn := kernelbench.KernelOf(ref, fop.Field)
	if fn == nil {
		return fmt.Errorf("the %s set of spec %s has no %s, whose outputs %s reads", ref.ISA, k.spec.Name, fop.Field, op.Field)
	}
	fv := map[string][]float32{}
	for _, p := range fop.Slices {
		if s, ok := v[p.Name]; ok {
			fv[p.Name] = s
			continue
		}
		s := make([]float32, p.Shape.Need(t)) // a forward output the backward does not read
		if p.Name == "gamma" {
			for i := range s {
				s[i] = 1
			}
		}
		fv[p.Name] = s
	}
	fop.Bind(fn, t, fv, nil)()
	return nil
}

// run calls fn in fresh guarded buffers holding the arguments.
func (k *call) run(fn any) harness.Result {
	ops := make([]*harness.Operand, len(k.args))
	for i, a := range k.args {
		a.op.Vals = make([]float32, len(a.op.Active))
		for n, j := range a.op.Active {
			a.op.Vals[n] = a.init[j]
		}
		ops[i] = a.op
	}
	return harness.Exercise(ops, func(s map[string][]float32) float32 {
		if f := k.op.Bind(fn, k.c.T, s, k.scalars); f != nil {
			return f()
		}
		return 0
	})
}

// close reports whether got is within the tolerance of want, an entry of
// an output whose largest finite magnitude is scale.
func closeTo(got, want float32, scale float64) bool {
	if math.Float32bits(got) == math.Float32bits(want) {
		return true
	}
	g, w := float64(got), float64(want)
	if math.IsNaN(g) || math.IsNaN(w) {
		return math.IsNaN(g) && math.IsNaN(w) && !isMarker(got) && !isMarker(want)
	}
	if math.IsInf(g, 0) || math.IsInf(w, 0) {
		return g == w
	}
	return math.Abs(g-w) <= RelTol*(math.Abs(w)+scale)
}

// maxFinite is the largest magnitude among the finite values of v.
func maxFinite(v []float32) float64 {
	m := 0.0
	for _, x := range v {
		if !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) {
			m = math.Max(m, math.Abs(float64(x)))
		}
	}
	return m
}

// maxReports is how many elements each kind of problem lists.
const maxReports = 3

// check runs got's kernel on the case and returns the problems.
func (k *call) check(got kernels.Set) ([]string, error) {
	fn := kernelbench.KernelOf(got, k.op.Field)
	if fn == nil {
		return nil, fmt.Errorf("the %s set of spec %s has no %s", got.ISA, k.spec.Name, k.op.Field)
	}
	res := k.run(fn)
	problems := res.Problems
	for _, a := range k.args {
		g, want := res.Out[a.name], k.want.Out[a.name]
		if g == nil {
			continue // read-only, or empty
		}
		scale := k.scale(a)
		var unw, off []string
		nUnw, nOff := 0, 0
		for n, x := range g {
			j := a.op.Active[n]
			switch {
			case math.Float32bits(x) == unwrittenBits:
				if nUnw < maxReports {
					unw = append(unw, a.op.Where(j))
				}
				nUnw++
			case !closeTo(x, want[n], scale):
				if nOff < maxReports {
					off = append(off, fmt.Sprintf("%s: got %s, want %s ± %.3g", a.op.Where(j), fmtVal(x), fmtVal(want[n]),
						RelTol*(math.Abs(float64(want[n]))+scale)))
				}
				nOff++
			}
		}
		if nUnw > 0 {
			problems = append(problems, fmt.Sprintf("%s: left %d entries of this output unwritten: %s", a.name, nUnw, strings.Join(unw, ", ")))
		}
		if nOff > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d of %d entries differ from the %s level's: %s", a.name, nOff, len(g), k.refISA, strings.Join(off, "; ")))
		}
	}
	if !closeTo(res.Ret, k.want.Ret, k.retScale) {
		problems = append(problems, fmt.Sprintf("returned %s, the %s level %s", fmtVal(res.Ret), k.refISA, fmtVal(k.want.Ret)))
	}
	return problems, nil
}

// checkSelf returns the problems of the reference call itself: floats
// written outside its outputs' entries, read-only inputs changed, outputs
// left unwritten.
func (k *call) checkSelf() []string {
	problems := append([]string(nil), k.want.Problems...)
	for _, a := range k.args {
		var list []string
		n := 0
		for i, x := range k.want.Out[a.name] {
			if math.Float32bits(x) == unwrittenBits {
				if n < maxReports {
					list = append(list, a.op.Where(a.op.Active[i]))
				}
				n++
			}
		}
		if n > 0 {
			problems = append(problems, fmt.Sprintf("%s: left %d entries of this output unwritten: %s", a.name, n, strings.Join(list, ", ")))
		}
	}
	return problems
}

// scale is the absolute part of output a's tolerance (see RelTol).
func (k *call) scale(a *arg) float64 {
	s := maxFinite(k.want.Out[a.name])
	if other, ok := k.related[a.name]; ok {
		s = math.Max(s, maxFinite(k.want.Out[other])/100)
	}
	return s
}
