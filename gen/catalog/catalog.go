// Package catalog is the generator's list of kernels. Its table of kinds
// (kinds.go) has one entry per kind of kernel: the name, the parameters in
// signature order (name, Go type, and for slices what the kernel does to
// them), whether t counts rows, the forward kind a backward reads the
// statistics of, the FLOP convention of the benchmarks, and how to call a
// kernel of the kind. Ops lists, for a spec, which kernels its generated
// package holds, the sizes baked into each, and the shapes of their slice
// arguments. The emitters (gen/asmgen for AVX-512 and AVX2, gen/gogen for
// unrolled Go, each with a table of emitters by kind that its tests check
// covers every kind here), the package writer (gen), the benchmarks
// (bench) and the kernel tests (kerneltest) all read it, so a kind is
// described in one place; docs/new-kernel-kind.md lists the four edits a
// new kind takes.
//
// The semantics of each kind are documented on the matching function types
// of runtime/kernels.
package catalog

import (
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// Shape is the extent of a slice argument as a function of t: Rows rows of
// Width floats, Stride apart, so it needs (Rows−1)·Stride + Width elements.
// Rows and Width of −1 mean t (Width −1 is the causal triangle's widest row).
// Optional slices may be empty, which turns their part of the kernel off.
type Shape struct {
	Rows, Stride, Width int
	Optional            bool
	// Square marks a Rows −1, Width −1 shape whose every row has t active
	// entries (the [t, t] block of a bidirectional spec's matrix) rather
	// than the causal triangle's r + 1; it needs as many elements.
	Square bool
}

// Triangle reports whether the shape's row r has r + 1 active entries
// (the causal triangle).
func (s Shape) Triangle() bool { return s.Rows < 0 && s.Width < 0 && !s.Square }

// Need returns the number of elements the shape needs at length t.
func (s Shape) Need(t int) int {
	r, w := s.Rows, s.Width
	if r < 0 {
		r = t
	}
	if w < 0 {
		w = t
	}
	if r == 0 || t == 0 {
		return 0
	}
	return (r-1)*s.Stride + w
}

// Param is one slice argument of a kernel.
type Param struct {
	Name  string
	Shape Shape
}

// Op is one kernel of a generated package.
type Op struct {
	Field string // the kernels.Set field it fills, e.g. "VanillaLogits"
	Func  string // base name of its functions: Func+"Go", Func+"AVX2", Func+"AVX512"
	Kind  Kind
	// Product kinds: the width W and the row strides LX of x and LW of w.
	W, LX, LW int
	// Tile kinds: FA, FB and the row strides LA, LB of fa and fb.
	FA, FB, LA, LB int
	// Gemv: the inner size GK and the output width GN.
	GK, GN int
	// Attend: the width (and row stride) AW of the weighted rows.
	AW int
	// AFTLocal and AFTConv kinds: the window s (keys with i − j < s get the
	// learned bias).
	Window int
	// Slices lists the slice arguments in signature order with their shapes.
	Slices []Param
}

// Config is what the emitters need of a spec: the sizes baked in as constants.
type Config struct {
	N, D, DH, Heads int
	FFN             int // feed-forward width: the row length of the GELU kernels
	Vocab           int // vocabulary: the row length of the cross-entropy kernels
	// Bidirectional is the spec's "causal": false: the attention kernels
	// (the Causal kinds, the attention-free and linear ones) run over all
	// t keys of every row rather than the keys j ≤ i.
	Bidirectional bool
}

// ConfigOf derives the emitters' sizes from a spec.
func ConfigOf(s *specs.Spec) Config {
	return Config{N: s.N, D: s.D, DH: s.DH(), Heads: s.Heads, FFN: s.FFN, Vocab: s.Vocab, Bidirectional: s.Bidirectional}
}

// Ops lists the kernels spec s needs, in a fixed order. The decoder's
// one-row kinds (Gemv, Attend, Scores) are a causal spec's only: a
// bidirectional spec's positions see the later ones, so it has no
// incremental decoder (runtime/model refuses to build one).
func Ops(s *specs.Spec) []Op {
	c := ConfigOf(s)
	if specs.IsAttentionFree(s.Variant) {
		return decoderless(c, append(append(append(attentionFreeOps(s, c), gemmOp), rowOps(c)...), gemvOps(c)...))
	}
	if !s.IsSynthesizer() {
		return nil
	}
	// The logit matrices: the causal triangle, or the square of a
	// bidirectional spec.
	tri := Shape{Rows: -1, Stride: c.N, Width: -1, Square: c.Bidirectional}
	head := Shape{Rows: -1, Stride: c.D, Width: c.DH}
	ops := []Op{
		{Field: "SoftmaxValue", Func: "softmaxValue", Kind: SoftmaxValue,
			Slices: []Param{{"b", tri}, {"a", tri}, {"v", head}, {"y", head}}},
		{Field: "SoftmaxValueBack", Func: "softmaxValueBack", Kind: SoftmaxValueBack,
			Slices: []Param{{"a", tri}, {"v", head}, {"dy", head}, {"db", tri}, {"dv", head}}},
		{Field: "SoftmaxRows", Func: "softmaxRows", Kind: SoftmaxRows,
			Slices: []Param{{"b", tri}, {"a", tri}}},
		{Field: "SoftmaxRowsBack", Func: "softmaxRowsBack", Kind: SoftmaxRowsBack,
			Slices: []Param{{"a", tri}, {"g", tri}, {"db", tri}}},
	}
	product := func(field, fn string, w, lx, lw int) {
		x := Shape{Rows: -1, Stride: lx, Width: w}
		wt := Shape{Rows: -1, Stride: lw, Width: w}
		bias := Shape{Rows: 1, Stride: 0, Width: -1, Optional: true}
		ops = append(ops,
			Op{Field: field, Func: fn, Kind: Product, W: w, LX: lx, LW: lw,
				Slices: []Param{{"x", x}, {"w", wt}, {"bias", bias}, {"c", tri}}},
			Op{Field: field + "BackX", Func: fn + "BackX", Kind: ProductBackX, W: w, LX: lx, LW: lw,
				Slices: []Param{{"dc", tri}, {"w", wt}, {"dx", x}}},
			Op{Field: field + "BackW", Func: fn + "BackW", Kind: ProductBackW, W: w, LX: lx, LW: lw,
				Slices: []Param{{"dc", tri}, {"x", x}, {"dw", wt}, {"dbias", bias}}},
		)
	}
	if s.Has("vanilla") {
		product("VanillaLogits", "vanillaLogits", c.DH, c.D, c.D)
	}
	if s.Has("dense") {
		product("DenseLogits", "denseLogits", c.DH, c.D, c.DH)
	}
	if s.Has("factorized_random") {
		product("FactRandomLogits", "factRandomLogits", s.K, s.K, s.K)
	}
	if s.Has("factorized_dense") {
		la, lb := s.Heads*s.A, s.Heads*s.B
		fa := Shape{Rows: -1, Stride: la, Width: s.A}
		fb := Shape{Rows: -1, Stride: lb, Width: s.B}
		ops = append(ops,
			Op{Field: "FactDenseLogits", Func: "factDenseLogits", Kind: Tile, FA: s.A, FB: s.B, LA: la, LB: lb,
				Slices: []Param{{"fa", fa}, {"fb", fb}, {"c", tri}}},
			Op{Field: "FactDenseLogitsBack", Func: "factDenseLogitsBack", Kind: TileBack, FA: s.A, FB: s.B, LA: la, LB: lb,
				Slices: []Param{{"dc", tri}, {"fa", fa}, {"fb", fb}, {"dfa", fa}, {"dfb", fb}}},
		)
	}
	ops = append(ops,
		Op{Field: "TriScale", Func: "triScale", Kind: TriScale, Slices: []Param{{"x", tri}, {"y", tri}}},
		Op{Field: "TriAxpy", Func: "triAxpy", Kind: TriAxpy, Slices: []Param{{"x", tri}, {"y", tri}}},
		Op{Field: "TriDot", Func: "triDot", Kind: TriDot, Slices: []Param{{"x", tri}, {"y", tri}}},
		gemmOp,
		attendOp("AttendDH", "attendDH", c.N, c.DH),
	)
	if s.Has("vanilla") {
		ops = append(ops, Op{Field: "VanillaScores", Func: "vanillaScores", Kind: Scores, Slices: []Param{
			{"q", Shape{Rows: 1, Stride: 0, Width: c.DH}},
			{"k", Shape{Rows: -1, Stride: c.DH, Width: c.DH}},
			{"b", Shape{Rows: 1, Stride: 0, Width: -1}},
		}})
	}
	return decoderless(c, append(append(ops, rowOps(c)...), gemvOps(c)...))
}

// decoderless is ops without the decoder's kinds when c is bidirectional.
func decoderless(c Config, ops []Op) []Op {
	if !c.Bidirectional {
		return ops
	}
	kept := ops[:0]
	for _, o := range ops {
		if !o.Kind.Decoder() {
			kept = append(kept, o)
		}
	}
	return kept
}

// attendOp is the decoder's attention row over up to n cached rows w wide
// (kernels.AttendFunc).
func attendOp(field, fn string, n, w int) Op {
	return Op{Field: field, Func: fn, Kind: Attend, AW: w, Slices: []Param{
		{"b", Shape{Rows: 1, Stride: 0, Width: -1}},
		{"v", Shape{Rows: -1, Stride: w, Width: w}},
		{"y", Shape{Rows: 1, Stride: 0, Width: w}},
	}}
}

// gemvOps are the decoder's one-row linear layers, which every causal
// spec gets, one kernel per (K, N) pair: D→D (the attention's projections), D→FFN
// and FFN→D (the feed-forward), D→Vocab (the output).
func gemvOps(c Config) []Op {
	op := func(field, fn string, k, n int) Op {
		return Op{Field: field, Func: fn, Kind: Gemv, GK: k, GN: n, Slices: []Param{
			{"x", Shape{Rows: -1, Stride: k, Width: k}},
			{"w", Shape{Rows: 1, Stride: 0, Width: k * n}},
			{"bias", Shape{Rows: 1, Stride: 0, Width: n, Optional: true}},
			{"y", Shape{Rows: -1, Stride: n, Width: n}},
		}}
	}
	return []Op{
		op("GemvDD", "gemvDD", c.D, c.D),
		op("GemvDF", "gemvDF", c.D, c.FFN),
		op("GemvFD", "gemvFD", c.FFN, c.D),
		op("GemvDV", "gemvDV", c.D, c.Vocab),
	}
}

// rowOps are the row-wise kernels of the training step's other passes,
// which every spec gets: LayerNorm over [t, D] rows (forward, input
// gradient, parameter gradients), the feed-forward's GELU over [t, FFN]
// rows (forward with its derivative, and the backward's product), the
// cross-entropy's softmax over [t, Vocab] logits (statistics, gradient),
// and the optimizer's update of t parameters.
func rowOps(c Config) []Op {
	rowsD := Shape{Rows: -1, Stride: c.D, Width: c.D}         // [t, D] row-major
	rowsF := Shape{Rows: -1, Stride: c.FFN, Width: c.FFN}     // [t, FFN] row-major
	rowsV := Shape{Rows: -1, Stride: c.Vocab, Width: c.Vocab} // [t, Vocab] logits
	perRow := Shape{Rows: -1, Stride: 1, Width: 1}            // one float per row
	param := Shape{Rows: 1, Stride: 0, Width: c.D}            // D floats, whatever t
	p := func(name string, sh Shape) Param { return Param{Name: name, Shape: sh} }
	return []Op{
		{Field: "LayerNorm", Func: "layerNorm", Kind: LayerNorm,
			Slices: []Param{p("x", rowsD), p("gamma", param), p("beta", param), p("y", rowsD), p("mu", perRow), p("rs", perRow)}},
		{Field: "LayerNormBack", Func: "layerNormBack", Kind: LayerNormBack,
			Slices: []Param{p("dy", rowsD), p("x", rowsD), p("mu", perRow), p("rs", perRow), p("gamma", param), p("dx", rowsD)}},
		{Field: "LayerNormGrad", Func: "layerNormGrad", Kind: LayerNormGrad,
			Slices: []Param{p("dy", rowsD), p("x", rowsD), p("mu", perRow), p("rs", perRow), p("dgamma", param), p("dbeta", param)}},
		{Field: "Gelu", Func: "gelu", Kind: Gelu, Slices: []Param{p("u", rowsF), p("g", rowsF)}},
		{Field: "GeluBack", Func: "geluBack", Kind: GeluBack, Slices: []Param{p("a", rowsF), p("b", rowsF)}},
		{Field: "SoftmaxStats", Func: "softmaxStats", Kind: SoftmaxStats,
			Slices: []Param{p("x", rowsV), p("mx", perRow), p("s", perRow)}},
		{Field: "SoftmaxScale", Func: "softmaxScale", Kind: SoftmaxScale,
			Slices: []Param{p("x", rowsV), p("lse", perRow), p("y", rowsV)}},
		{Field: "AdamW", Func: "adamW", Kind: AdamW,
			Slices: []Param{p("p", perRow), p("g", perRow), p("m", perRow), p("v", perRow)}},
	}
}

// gemmOp is the linear layers' GEMM micro-kernel, which every spec gets. Its
// sizes are not the spec's: the tile shape is the level's (GemmShape), and
// kc, ldc, mr and nr are run-time arguments, so the package writer checks
// its arguments with its own code rather than with Slices.
var gemmOp = Op{Field: "GemmTile", Func: "gemmTile", Kind: GemmTile}

// GemmShape is the register tile MR×NR of the GemmTile kernel at level isa:
// the rows of A and the columns of B it reads (see kernels.GemmTileFunc).
func GemmShape(isa kernels.ISA) (mr, nr int) {
	switch isa {
	case kernels.AVX512:
		return 8, 32
	case kernels.AVX2:
		return 6, 16
	}
	return 2, 4
}

// attentionFreeOps lists the kernels of the attention-free variants
// (aft_full, aft_local, aft_conv, aft_simple) and of linear attention: a
// forward and a backward per variant, each working on one (sequence, head).
func attentionFreeOps(s *specs.Spec, c Config) []Op {
	head := Shape{Rows: -1, Stride: c.D, Width: c.DH}                       // head slice of a [t, D] matrix
	tri := Shape{Rows: -1, Stride: c.N, Width: -1, Square: c.Bidirectional} // causal triangle (bidirectional: [t, t] block) of an [N, N] matrix
	bias := Shape{Rows: 1, Stride: 0, Width: s.Window}                      // head h's row of u [Heads, window]
	if c.Bidirectional {
		bias.Width = 2*s.Window - 1 // u [Heads, 2·window − 1], a window centred on the query
	}
	headCol := Shape{Rows: -1, Stride: c.Heads, Width: 1} // column h of a [t, Heads] matrix
	p := func(name string, sh Shape) Param { return Param{Name: name, Shape: sh} }
	fwd := []Param{p("z", head), p("m", head), p("rd", head)}
	back := []Param{p("z", head), p("m", head), p("rd", head), p("dz", head), p("dk", head), p("dv", head)}
	kv := []Param{p("k", head), p("v", head)}
	cat := func(parts ...[]Param) []Param {
		var out []Param
		for _, x := range parts {
			out = append(out, x...)
		}
		return out
	}
	flat := func(names ...string) []Param {
		var out []Param
		for _, n := range names {
			out = append(out, p(n, Shape{Rows: -1, Stride: 1, Width: 1})) // t consecutive floats
		}
		return out
	}
	// Every aft variant's σ(Q) gate, over the [t, D] activations at once.
	gate := []Op{
		{Field: "Gate", Func: "gate", Kind: Gate, Slices: flat("q", "z", "y")},
		{Field: "GateBack", Func: "gateBack", Kind: GateBack, Slices: flat("dy", "q", "z", "dq")},
	}
	switch s.Variant {
	case "aft_full":
		// Exp and the AFT* element-wise kernels: the factorised products'
		// exponentials and the passes around them (runtime/model's
		// aftfull.go), t consecutive floats.
		return append([]Op{
			{Field: "AFTFull", Func: "aftFull", Kind: AFTFull, Slices: cat(kv, []Param{p("w", tri)}, fwd)},
			{Field: "AFTFullBack", Func: "aftFullBack", Kind: AFTFullBack, Slices: cat(kv, []Param{p("w", tri)}, back, []Param{p("dw", tri)})},
			{Field: "Exp", Func: "exp", Kind: Exp, Slices: flat("x")},
			{Field: "AFTMax", Func: "aftMax", Kind: AFTMax, Slices: flat("k", "kappa")},
			{Field: "AFTFactors", Func: "aftFactors", Kind: AFTFactors, Slices: flat("k", "kappa", "v", "kv", "ek")},
			{Field: "AFTQuot", Func: "aftQuot", Kind: AFTQuot, Slices: flat("num", "den", "z")},
			{Field: "AFTQuotBack", Func: "aftQuotBack", Kind: AFTQuotBack, Slices: flat("dz", "z", "den", "dnum", "dden")},
			{Field: "AFTKVBack", Func: "aftKVBack", Kind: AFTKVBack, Slices: flat("ek", "v", "g1", "g2", "dk", "dv")},
			attendOp("AttendKV", "attendKV", c.N, 2*c.D),
		}, gate...)
	case "aft_local":
		return append([]Op{
			{Field: "AFTLocal", Func: "aftLocal", Kind: AFTLocal, Window: s.Window, Slices: cat(kv, []Param{p("w", tri)}, fwd)},
			{Field: "AFTLocalBack", Func: "aftLocalBack", Kind: AFTLocalBack, Window: s.Window, Slices: cat(kv, []Param{p("w", tri)}, back, []Param{p("dw", tri)})},
		}, gate...)
	case "aft_conv":
		return append([]Op{
			{Field: "AFTConv", Func: "aftConv", Kind: AFTConv, Window: s.Window, Slices: cat(kv, []Param{p("u", bias)}, fwd)},
			{Field: "AFTConvBack", Func: "aftConvBack", Kind: AFTConvBack, Window: s.Window, Slices: cat(kv, []Param{p("u", bias)}, back, []Param{p("du", bias)})},
		}, gate...)
	case "aft_simple":
		return append([]Op{
			{Field: "AFTSimple", Func: "aftSimple", Kind: AFTSimple, Slices: cat(kv, fwd)},
			{Field: "AFTSimpleBack", Func: "aftSimpleBack", Kind: AFTSimpleBack, Slices: cat(kv, back)},
		}, gate...)
	case "linear":
		return []Op{
			{Field: "Linear", Func: "linear", Kind: Linear,
				Slices: []Param{p("fq", head), p("fk", head), p("v", head), p("y", head), p("rd", headCol)}},
			{Field: "LinearBack", Func: "linearBack", Kind: LinearBack,
				Slices: []Param{p("fq", head), p("fk", head), p("v", head), p("y", head), p("rd", headCol),
					p("dy", head), p("dfq", head), p("dfk", head), p("dv", head)}},
		}
	}
	return nil
}
