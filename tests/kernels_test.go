package tests

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/gen/catalog"
	_ "github.com/synthgen/synthgen/generated/all" // links every shipped spec
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// env is one spec's sizes as the kernels see them, and the head the tests
// place head slices at.
type env struct {
	name                     string
	n, d, heads, dh, k, a, b int
	ffn, vocab               int
	// bidi is the spec's "causal": false: the attention kernels see every
	// key j < t, and logit matrices are the square i, j < t rather than
	// the causal triangle.
	bidi bool
	// h is the head whose columns head-sliced operands occupy: a middle
	// one, so that other heads' columns lie on both sides as guards when
	// there are three heads or more.
	h int
}

func envOf(s specs.Spec) *env {
	return &env{name: s.Name, n: s.N, d: s.D, heads: s.Heads, dh: s.DH(), k: s.K, a: s.A, b: s.B, ffn: s.FFN, vocab: s.Vocab, h: s.Heads / 2, bidi: s.Bidirectional}
}

// logits is the layout of a logit or probability matrix at length t: the
// causal triangle, or the square of a bidirectional spec.
func (e *env) logits(t int) layout {
	if e.bidi {
		return square(t, e.n)
	}
	return triangle(t, e.n)
}

// head is head e.h's slice of a [t, D] matrix.
func (e *env) head(t int) layout {
	return layout{rows: t, stride: e.d, width: e.dh, col: e.h * e.dh}
}

// tValues are the lengths every kernel is tested at: the short ones, and
// the longest two. Specs with N > 128 skip 2 and 15 to keep the suite fast;
// specs with N > 512 take 509 for N − 1.
func tValues(n int) []int {
	cand := []int{1, 2, 7, 15, n - 1, n}
	switch {
	case n > 512:
		// Long contexts: the float64 references cost O(t²·d) per call, so
		// the odd length is a mid-sized prime rather than n − 1 (n itself is
		// still tested; so is n − 1, at spec sizes, by the generated
		// packages' own tests).
		cand = []int{1, 7, 509, n}
	case n > 128:
		cand = []int{1, 7, n - 1, n}
	}
	var out []int
	seen := map[int]bool{}
	for _, t := range cand {
		if t >= 1 && t <= n && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// rngFor is a generator seeded from the scenario's identity, so every run
// and every level sees the same inputs.
func rngFor(parts ...any) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprint(h, parts...)
	s := h.Sum64()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// mixed fills a matrix with values of typical size scale: normal, with
// exact zeros (one in ten) and negatives mixed in; values beyond float32's
// range are clamped to ±MaxFloat32.
func mixed(rng *rand.Rand, l layout, scale float64) mat {
	m := newMat(l)
	for k := range m.v {
		if rng.IntN(10) != 0 {
			x := rng.NormFloat64() * scale
			m.v[k] = float32(math.Max(-math.MaxFloat32, math.Min(math.MaxFloat32, x)))
		}
	}
	return m
}

// ints fills a matrix with integers in [−lim, lim]: products and sums of
// these are exact in float32, whatever the order.
func ints(rng *rand.Rand, l layout, lim int) mat {
	m := newMat(l)
	for k := range m.v {
		m.v[k] = float32(rng.IntN(2*lim+1) - lim)
	}
	return m
}

// vec is a matrix of one row of n values.
func vecLayout(n int) layout { return layout{rows: 1, stride: n, width: n} }

// bind calls kernel fn (a function of one of the kernels.*Func types) with
// a scenario's arguments, by parameter name, through the catalog entry of
// its kind (catalog.Op.Bind, as kerneltest and the benchmarks call it).
func bind(fn reflect.Value) invoker {
	f := fn.Interface()
	k, ok := catalog.KindOf(f)
	if !ok {
		panic(fmt.Sprintf("bind: %s is no kind of the catalog", fn.Type()))
	}
	op := catalog.Op{Kind: k}
	return func(a args) float32 {
		call := op.Bind(f, a.t, a.s, a.scalar)
		if call == nil {
			panic(fmt.Sprintf("bind: cannot call %s", fn.Type()))
		}
		return call()
	}
}

// kernelTest describes how to test one kind of kernel.
type kernelTest struct {
	modes    []string
	scenario func(e *env, field string, t int, mode string, rng *rand.Rand) scenario
	// lengths lists the t to test at (nil: tValues).
	lengths func(e *env) []int
}

// geometry is a product kernel's width, row strides and column offsets.
type geometry struct{ w, lx, lw, colX, colW int }

func (e *env) geometry(field string) geometry {
	switch {
	case strings.HasPrefix(field, "VanillaLogits"): // x = Q_h, w = K_h
		return geometry{w: e.dh, lx: e.d, lw: e.d, colX: e.h * e.dh, colW: e.h * e.dh}
	case strings.HasPrefix(field, "DenseLogits"): // x = relu(w1(h))_h, w = w2.weight [N, DH]
		return geometry{w: e.dh, lx: e.d, lw: e.dh, colX: e.h * e.dh}
	case strings.HasPrefix(field, "FactRandomLogits"): // x = R1[h], w = R2[h]
		return geometry{w: e.k, lx: e.k, lw: e.k}
	}
	panic("no product geometry for " + field)
}

// tileLayouts are the fa and fb head slices of factorized dense.
func (e *env) tileLayouts(t int) (la, lb layout) {
	return layout{rows: t, stride: e.heads * e.a, width: e.a, col: e.h * e.a},
		layout{rows: t, stride: e.heads * e.b, width: e.b, col: e.h * e.b}
}

// maskRows applies the masking patterns to logits b, by row: all −Inf
// (fully masked: a = 0, y = 0), −Inf except one entry, about half −Inf,
// and untouched.
func maskRows(rng *rand.Rand, b mat) {
	inf := float32(math.Inf(-1))
	for i := 0; i < b.lay.rows; i++ {
		L := b.lay.rowLen(i)
		keep := rng.IntN(L)
		for j := 0; j < L; j++ {
			k := b.lay.pos(i, j)
			switch i % 4 {
			case 0:
				b.v[k] = inf
			case 1:
				if j != keep {
					b.v[k] = inf
				}
			case 2:
				if rng.IntN(2) == 0 && j != keep {
					b.v[k] = inf
				}
			}
		}
	}
}

// extremeLogits are logits of ±1e4 and ordinary sizes mixed.
func extremeLogits(rng *rand.Rand, l layout) mat {
	m := newMat(l)
	for k := range m.v {
		switch rng.IntN(3) {
		case 0:
			m.v[k] = float32(1e4 + rng.NormFloat64()*3)
		case 1:
			m.v[k] = float32(-1e4 + rng.NormFloat64()*3)
		default:
			m.v[k] = float32(rng.NormFloat64() * 3)
		}
	}
	return m
}

// probabilities is a softmax of random logits over the rows of layout l
// (causal or square), rounded to float32, with every fifth row fully
// masked (zero).
func probabilities(rng *rand.Rand, l layout, scale float64) mat {
	a := newMat(l)
	for i := 0; i < l.rows; i++ {
		if i%5 == 3 {
			continue
		}
		x := make([]float64, l.rowLen(i))
		m, s := math.Inf(-1), 0.0
		for j := range x {
			x[j] = rng.NormFloat64() * scale
			m = math.Max(m, x[j])
		}
		for j := range x {
			x[j] = math.Exp(x[j] - m)
			s += x[j]
		}
		for j := range x {
			a.v[a.lay.pos(i, j)] = float32(x[j] / s)
		}
	}
	return a
}

var kernelTests = map[string]kernelTest{
	"SoftmaxValue": {
		modes: []string{"random", "extreme", "masked", "alias"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			return softmaxValueScenario(e, t, mode, rng, 1, 3)
		},
	},
	"SoftmaxValueBack": {
		modes: []string{"random", "alias", "integers"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			return softmaxValueBackScenario(e, t, mode, rng, 1, 2)
		},
	},
	"Product":      productTest,
	"ProductBackX": productBackXTest,
	"ProductBackW": productBackWTest,
	"FactDenseLogits": {
		modes: []string{"random", "integers"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			la, lb := e.tileLayouts(t)
			fa, fb := mixed(rng, la, 1), mixed(rng, lb, 1)
			if mode == "integers" {
				fa, fb = ints(rng, la, 3), ints(rng, lb, 3)
			}
			lc := e.logits(t)
			c := refTile(t, e.b, fa, fb, lc)
			if mode == "integers" {
				exactly(c)
			}
			return scenario{
				ops: []*operand{
					{name: "fa", lay: la, vals: fa.v}, {name: "fb", lay: lb, vals: fb.v},
					{name: "c", lay: lc, role: out},
				},
				want: map[string]*expect{"c": c},
			}
		},
	},
	"FactDenseLogitsBack": {
		modes: []string{"random", "integers"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			la, lb := e.tileLayouts(t)
			lc := e.logits(t)
			fa, fb, dc := mixed(rng, la, 1), mixed(rng, lb, 1), mixed(rng, lc, 1)
			if mode == "integers" {
				fa, fb, dc = ints(rng, la, 3), ints(rng, lb, 3), ints(rng, lc, 3)
			}
			dfa, dfb := refTileBack(t, e.a, e.b, dc, fa, fb)
			if mode == "integers" {
				exactly(dfa, dfb)
			}
			return scenario{
				ops: []*operand{
					{name: "dc", lay: lc, vals: dc.v}, {name: "fa", lay: la, vals: fa.v}, {name: "fb", lay: lb, vals: fb.v},
					{name: "dfa", lay: la, role: out}, {name: "dfb", lay: lb, role: out},
				},
				want: map[string]*expect{"dfa": dfa, "dfb": dfb},
			}
		},
	},
	"TriScale": {
		modes: []string{"random"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			l := e.logits(t)
			x := mixed(rng, l, 1)
			alpha := float32(rng.NormFloat64())
			return scenario{
				ops:     []*operand{{name: "x", lay: l, vals: x.v}, {name: "y", lay: l, role: out}},
				scalars: map[string]float32{"alpha": alpha},
				want:    map[string]*expect{"y": refTriScale(t, alpha, x)},
			}
		},
	},
	"TriAxpy": {
		modes: []string{"random", "integers"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			l := e.logits(t)
			x, y0 := mixed(rng, l, 1), mixed(rng, l, 1)
			alpha := float32(rng.NormFloat64())
			if mode == "integers" {
				x, y0, alpha = ints(rng, l, 3), ints(rng, l, 3), 2
			}
			y := refTriAxpy(t, alpha, x, y0)
			if mode == "integers" {
				exactly(y)
			}
			return scenario{
				ops:     []*operand{{name: "x", lay: l, vals: x.v}, {name: "y", lay: l, role: acc, vals: y0.v}},
				scalars: map[string]float32{"alpha": alpha},
				want:    map[string]*expect{"y": y},
			}
		},
	},
	"TriDot": {
		modes: []string{"random", "integers"},
		scenario: func(e *env, _ string, t int, mode string, rng *rand.Rand) scenario {
			l := e.logits(t)
			x, y := mixed(rng, l, 1), mixed(rng, l, 1)
			if mode == "integers" {
				x, y = ints(rng, l, 3), ints(rng, l, 3)
			}
			r := refTriDot(t, x, y)
			if mode == "integers" {
				exactly(r)
			}
			return scenario{
				ops:  []*operand{{name: "x", lay: l, vals: x.v}, {name: "y", lay: l, vals: y.v}},
				want: map[string]*expect{"return": r},
			}
		},
	},
}

func productOps(e *env, field string, t int) (g geometry, lx, lw, lc layout) {
	g = e.geometry(field)
	return g, layout{rows: t, stride: g.lx, width: g.w, col: g.colX},
		layout{rows: t, stride: g.lw, width: g.w, col: g.colW}, e.logits(t)
}

var productTest = kernelTest{
	modes: []string{"random", "nobias", "integers"},
	scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
		g, lx, lw, lc := productOps(e, field, t)
		x, w, bias := mixed(rng, lx, 1), mixed(rng, lw, 1), mixed(rng, vecLayout(t), 1)
		scale := float32(1 / math.Sqrt(float64(g.w)))
		if mode == "integers" {
			x, w, bias, scale = ints(rng, lx, 3), ints(rng, lw, 3), ints(rng, vecLayout(t), 3), 0.5
		}
		ops := []*operand{
			{name: "x", lay: lx, vals: x.v}, {name: "w", lay: lw, vals: w.v},
			{name: "bias", lay: vecLayout(t), vals: bias.v},
			{name: "c", lay: lc, role: out},
		}
		if mode == "nobias" {
			bias.v = nil
			ops[2].empty = true
		}
		c := refProduct(t, g.w, x, w, bias.v, scale, lc)
		if mode == "integers" {
			exactly(c)
		}
		return scenario{ops: ops, scalars: map[string]float32{"scale": scale}, want: map[string]*expect{"c": c}}
	},
}

var productBackXTest = kernelTest{
	modes: []string{"random", "integers"},
	scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
		g, lx, lw, lc := productOps(e, field, t)
		dc, w := mixed(rng, lc, 1), mixed(rng, lw, 1)
		scale := float32(1 / math.Sqrt(float64(g.w)))
		if mode == "integers" {
			dc, w, scale = ints(rng, lc, 3), ints(rng, lw, 3), 0.25
		}
		dx := refProductBackX(t, g.w, dc, w, scale, lx)
		if mode == "integers" {
			exactly(dx)
		}
		return scenario{
			ops: []*operand{
				{name: "dc", lay: lc, vals: dc.v}, {name: "w", lay: lw, vals: w.v},
				{name: "dx", lay: lx, role: out},
			},
			scalars: map[string]float32{"scale": scale},
			want:    map[string]*expect{"dx": dx},
		}
	},
}

var productBackWTest = kernelTest{
	modes: []string{"random", "nobias", "integers"},
	scenario: func(e *env, field string, t int, mode string, rng *rand.Rand) scenario {
		g, lx, lw, lc := productOps(e, field, t)
		dc, x := mixed(rng, lc, 1), mixed(rng, lx, 1)
		dw0, db0 := mixed(rng, lw, 1), mixed(rng, vecLayout(t), 1) // accumulate: start nonzero
		scale := float32(1 / math.Sqrt(float64(g.w)))
		if mode == "integers" {
			dc, x, dw0, db0, scale = ints(rng, lc, 3), ints(rng, lx, 3), ints(rng, lw, 3), ints(rng, vecLayout(t), 3), 2
		}
		ops := []*operand{
			{name: "dc", lay: lc, vals: dc.v}, {name: "x", lay: lx, vals: x.v},
			{name: "dw", lay: lw, role: acc, vals: dw0.v}, {name: "dbias", lay: vecLayout(t), role: acc, vals: db0.v},
		}
		var dbias0 []float32
		if mode == "nobias" {
			ops[3].empty = true
		} else {
			dbias0 = db0.v
		}
		dw, dbias := refProductBackW(t, g.w, dc, x, dw0, dbias0, scale)
		want := map[string]*expect{"dw": dw}
		if dbias != nil {
			dbias.lay = vecLayout(t)
			want["dbias"] = dbias
		}
		if mode == "integers" {
			exactly(dw, dbias)
		}
		return scenario{ops: ops, scalars: map[string]float32{"scale": scale}, want: want}
	},
}

// softmaxValueScenario builds a SoftmaxValue call; bscale and vscale are
// the typical sizes of the logits and the values.
func softmaxValueScenario(e *env, t int, mode string, rng *rand.Rand, vscale, bscale float64) scenario {
	lb, lv := e.logits(t), e.head(t)
	b := mixed(rng, lb, bscale)
	switch mode {
	case "extreme":
		b = extremeLogits(rng, lb)
	case "masked", "alias":
		maskRows(rng, b)
	}
	v := mixed(rng, lv, vscale)
	a, y := refSoftmaxValue(t, e.dh, b, v, lb, lv)
	ops := []*operand{
		{name: "b", lay: lb, vals: b.v},
		{name: "a", lay: lb, role: out},
		{name: "v", lay: lv, vals: v.v},
		{name: "y", lay: lv, role: out},
	}
	if mode == "alias" {
		ops[1].alias = "b" // a is b
	}
	return scenario{ops: ops, want: map[string]*expect{"a": a, "y": y}}
}

// softmaxValueBackScenario builds a SoftmaxValueBack call; ascale is the
// size of the logits the probabilities come from, gscale that of v and dy.
func softmaxValueBackScenario(e *env, t int, mode string, rng *rand.Rand, gscale, ascale float64) scenario {
	la, lv := e.logits(t), e.head(t)
	a := probabilities(rng, la, ascale)
	v, dy := mixed(rng, lv, gscale), mixed(rng, lv, gscale)
	if mode == "integers" {
		a, v, dy = ints(rng, la, 3), ints(rng, lv, 3), ints(rng, lv, 3)
	}
	db, dv := refSoftmaxValueBack(t, e.dh, a, v, dy, la, lv)
	if mode == "integers" {
		exactly(db, dv)
	}
	ops := []*operand{
		{name: "a", lay: la, vals: a.v},
		{name: "v", lay: lv, vals: v.v},
		{name: "dy", lay: lv, vals: dy.v},
		{name: "db", lay: la, role: out},
		{name: "dv", lay: lv, role: out},
	}
	if mode == "alias" {
		ops[3].alias = "a" // db is a
	}
	return scenario{ops: ops, want: map[string]*expect{"db": db, "dv": dv}}
}

// kernelTestFor maps a Set field to its test.
func kernelTestFor(field string) (kernelTest, bool) {
	if kt, ok := kernelTests[field]; ok {
		return kt, true
	}
	for _, fam := range []string{"VanillaLogits", "DenseLogits", "FactRandomLogits"} {
		if rest, ok := strings.CutPrefix(field, fam); ok {
			kt, ok := kernelTests["Product"+rest]
			return kt, ok
		}
	}
	return kernelTest{}, false
}

// levelsOf returns spec name's kernel sets this run tests: those compiled
// in, supported by the CPU and not above SYNTHGEN_ISA's cap, logging why
// any level is left out.
func levelsOf(t testing.TB, name string) []kernels.Set {
	t.Helper()
	limit, err := kernels.Level()
	if err != nil {
		t.Fatalf("dispatch level: %v", err)
	}
	sets, err := kernels.Sets(name)
	if err != nil {
		t.Fatal(err)
	}
	have := map[kernels.ISA]bool{}
	var out []kernels.Set
	for _, s := range sets {
		have[s.ISA] = true
		if s.ISA <= limit {
			out = append(out, s)
		}
	}
	for _, isa := range kernels.Levels() {
		switch {
		case !kernels.Supported(isa):
			t.Logf("level %s skipped: this CPU lacks its features", isa)
		case isa > limit:
			t.Logf("level %s skipped: %s caps dispatch at %s", isa, kernels.EnvISA, limit)
		case !have[isa]:
			t.Logf("level %s skipped: not compiled into this build (purego, or no assembly for this spec)", isa)
		}
	}
	if len(out) == 0 || out[0].ISA != kernels.Go {
		t.Fatalf("spec %s has no Go level", name)
	}
	return out
}

// levelsFor binds kernel f of spec name at each of the levels sets (from
// levelsOf) that provides it, Go first.
func levelsFor(t testing.TB, sets []kernels.Set, name, f string) []level {
	t.Helper()
	if _, ok := kernelTestFor(f); !ok {
		t.Fatalf("no test for kernel %s", f)
	}
	var levels []level
	for _, s := range sets {
		fn := field(s, f)
		if !fn.IsValid() || fn.IsNil() {
			t.Logf("level %s does not provide %s (dispatch falls back to a lower level)", s.ISA, f)
			continue
		}
		levels = append(levels, level{name: s.ISA.String(), call: bind(fn)})
	}
	if len(levels) == 0 || levels[0].name != kernels.Go.String() {
		t.Fatalf("spec %s has no Go %s", name, f)
	}
	return levels
}

// field returns a Set's kernel by field name (invalid Value if absent).
func field(s kernels.Set, name string) reflect.Value {
	return reflect.ValueOf(s).FieldByName(name)
}

// longN is the longest context whose kernels TestKernels checks against the
// float64 references in every run; longer specs (n 1024, 2048) take about
// two thirds of the package's CPU time, so they run when longEnv is set
// (.ci/run sets it).
const (
	longN   = 512
	longEnv = "SYNTHGEN_LONG_TESTS"
)

// testedN is the longest context this run checks: every spec with longEnv
// set to 1, n ≤ 128 with -short, n ≤ longN otherwise.
func testedN() int {
	switch {
	case os.Getenv(longEnv) == "1":
		return specs.MaxN
	case testing.Short():
		return 128
	}
	return longN
}

// TestKernels checks every kernel of every linked spec, at every level
// this run can execute, against the float64 reference and the Go level,
// at several lengths and input modes, with guards around every region.
func TestKernels(t *testing.T) {
	names := kernels.Names()
	if len(names) == 0 {
		t.Fatal("no specs linked")
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec, err := kernels.Spec(name)
			if err != nil {
				t.Fatal(err)
			}
			if limit := testedN(); spec.N > limit {
				t.Skipf("n %d > %d: the float64 references at this length take minutes of CPU; "+
					"%s=1 runs them (CI does), and the generated package's own tests (go test ./generated/%s) check its kernels against the Go level at n", spec.N, limit, longEnv, name)
			}
			e := envOf(spec)
			sets := levelsOf(t, name)
			goK, err := kernels.LookupAt(name, kernels.Go)
			if err != nil {
				t.Fatal(err)
			}
			fields := goK.KernelNames()
			if len(fields) == 0 {
				t.Fatalf("spec %s links no kernels", name)
			}
			for _, s := range sets[1:] {
				for _, f := range kernelFields() {
					if !field(s, f).IsNil() && !field(sets[0], f).IsNil() {
						continue
					}
					if !field(s, f).IsNil() {
						t.Errorf("level %s provides %s, which the Go level lacks", s.ISA, f)
					}
				}
			}
			for _, f := range fields {
				if f == "GemmTile" || f == "GemmShape" {
					continue // TestGemmTile (gemm_test.go) checks the micro-kernel and its shape at every level
				}
				t.Run(f, func(t *testing.T) {
					kt, ok := kernelTestFor(f)
					if !ok {
						// A kernel without a reference here: say so loudly
						// rather than pass silently.
						t.Skipf("no test in tests/ for kernel %s: not covered by this suite", f)
					}
					levels := levelsFor(t, sets, name, f)
					lengths := tValues(e.n)
					if kt.lengths != nil {
						lengths = kt.lengths(e)
					}
					for _, tl := range lengths {
						for _, mode := range kt.modes {
							sc := kt.scenario(e, f, tl, mode, rngFor(name, f, tl, mode))
							sc.t, sc.label = tl, fmt.Sprintf("t=%d %s", tl, mode)
							for _, p := range runScenario(sc, levels) {
								t.Error(p)
							}
						}
					}
				})
			}
		})
	}
}

// kernelFields lists the kernel fields of kernels.Set.
func kernelFields() []string {
	typ := reflect.TypeOf(kernels.Set{})
	var out []string
	for i := 0; i < typ.NumField(); i++ {
		if typ.Field(i).Type.Kind() == reflect.Func {
			out = append(out, typ.Field(i).Name)
		}
	}
	return out
}

// TestDispatch checks that every spec dispatches, at SYNTHGEN_ISA's level
// or the CPU's best, a kernel for everything its Go level has, each at a
// level this run allows.
func TestDispatch(t *testing.T) {
	limit, err := kernels.Level()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range kernels.Names() {
		k, err := kernels.Lookup(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		goK, err := kernels.LookupAt(name, kernels.Go)
		if err != nil {
			t.Fatal(err)
		}
		var chosen []string
		for _, f := range goK.KernelNames() {
			l, ok := k.Chosen[f]
			if !ok || field(k.Set, f).IsNil() {
				t.Errorf("%s: %s not dispatched", name, f)
				continue
			}
			if l > limit {
				t.Errorf("%s: %s dispatched at %s, above the allowed %s", name, f, l, limit)
			}
			chosen = append(chosen, f+"="+l.String())
		}
		t.Logf("%s at %s: %s", name, limit, strings.Join(chosen, " "))
	}
}
