package catalog

import (
	"fmt"
	"math"
	"reflect"
	"strings"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// Kind is what a kernel computes; see the function types of runtime/kernels.
type Kind int

// The kinds of kernel. Each has an entry in the table below; a new kind is
// a constant here, its entry, a Go emitter, an assembly emitter and a
// reference in tests (docs/new-kernel-kind.md).
const (
	SoftmaxValue     Kind = iota // kernels.SoftmaxValueFunc
	SoftmaxValueBack             // kernels.SoftmaxValueBackFunc
	Product                      // kernels.ProductFunc
	ProductBackX                 // kernels.ProductBackXFunc
	ProductBackW                 // kernels.ProductBackWFunc
	Tile                         // kernels.TileFunc
	TileBack                     // kernels.TileBackFunc
	TriScale                     // kernels.TriScaleFunc
	TriAxpy                      // kernels.TriAxpyFunc
	TriDot                       // kernels.TriDotFunc

	AFTFull       // kernels.AFTFullFunc
	AFTFullBack   // kernels.AFTFullBackFunc
	AFTLocal      // kernels.AFTLocalFunc
	AFTLocalBack  // kernels.AFTLocalBackFunc
	AFTConv       // kernels.AFTConvFunc
	AFTConvBack   // kernels.AFTConvBackFunc
	AFTSimple     // kernels.AFTSimpleFunc
	AFTSimpleBack // kernels.AFTSimpleBackFunc
	Linear        // kernels.LinearFunc
	LinearBack    // kernels.LinearBackFunc

	GemmTile // kernels.GemmTileFunc (with kernels.GemmShapeFunc beside it)

	LayerNorm     // kernels.LayerNormFunc
	LayerNormBack // kernels.LayerNormBackFunc
	LayerNormGrad // kernels.LayerNormGradFunc
	Gelu          // kernels.GeluFunc
	GeluBack      // kernels.GeluBackFunc
	SoftmaxStats  // kernels.SoftmaxStatsFunc
	SoftmaxScale  // kernels.SoftmaxScaleFunc
	AdamW         // kernels.AdamWFunc
	Exp           // kernels.ExpFunc
	Gate          // kernels.GateFunc
	GateBack      // kernels.GateBackFunc
	AFTFactors    // kernels.AFTFactorsFunc
	AFTQuotBack   // kernels.AFTQuotBackFunc
	AFTKVBack     // kernels.AFTKVBackFunc
	Gemv          // kernels.GemvFunc
	Attend        // kernels.AttendFunc
	Scores        // kernels.ScoresFunc

	SoftmaxRows     // kernels.SoftmaxRowsFunc
	SoftmaxRowsBack // kernels.SoftmaxRowsBackFunc

	AFTMax  // kernels.AFTMaxFunc
	AFTQuot // kernels.AFTQuotFunc

	numKinds
)

// Decoder reports whether k is one of the incremental decoder's one-row
// kinds (Gemv, Attend, Scores), which only causal specs get.
func (k Kind) Decoder() bool { return k == Gemv || k == Attend || k == Scores }

// NoKind is the Forward of a kind that reads no forward's outputs.
const NoKind Kind = -1

// Role is what a kernel does to a slice argument.
type Role int

// The roles of a slice argument.
const (
	In  Role = iota // read only: it comes back bit for bit unchanged
	Out             // overwritten: every entry written, none read first
	Acc             // accumulated into, or updated in place: read, then written
)

// The Go types of kernel parameters.
const (
	Int     = "int"
	Float32 = "float32"
	Bool    = "bool"
	Slice   = "[]float32"
)

// Arg is one parameter of a kind's signature.
type Arg struct {
	Name string
	Type string // Int, Float32, Bool or Slice
	// Role is what the kernel does to a Slice argument.
	Role Role
	// Default is, for a Float32 argument, the value the benchmarks pass.
	Default float32
}

// AFTBias is the bias structure of an attention-free kind: which keys of
// row i get a learned bias b_ij.
type AFTBias int

// The bias structures.
const (
	BiasFull   AFTBias = iota // b_ij = w[i·N+j] for every j ≤ i
	BiasLocal                 // b_ij = w[i·N+j] inside the window, 0 outside
	BiasConv                  // b_ij = u[i−j] inside the window, 0 outside
	BiasSimple                // b_ij = 0
)

// Scan reports whether some keys have bias 0 (kept as a running scan).
func (b AFTBias) Scan() bool { return b != BiasFull }

// Window reports whether some keys have a learned bias.
func (b AFTBias) Window() bool { return b != BiasSimple }

// Entry is what the generator, the benchmarks and the tests know of a kind.
type Entry struct {
	Name string // the kind's name, that of its kernels.*Func type less "Func"
	// Params are the parameters in signature order.
	Params []Arg
	Result string // the result's Go type; "" for none
	// RowWise kinds (LayerNorm, GELU, the cross-entropy's softmax and the
	// Flat ones) take t as a count of rows of a row-major matrix, which
	// may hold several sequences: any t ≥ 0 rather than a length ≤ N.
	RowWise bool
	// Flat kinds are element-wise over t consecutive floats (AdamW, Exp,
	// the gate, the factorised aft_full's element-wise passes): row-wise,
	// with rows of one float.
	Flat bool
	// Causal kinds are the Synthesizer's attention kernels over the causal
	// triangle: they execute about half of their nominal FLOPs. A
	// bidirectional spec's (Config.Bidirectional) run over the whole square.
	Causal bool
	// Strip kinds (SoftmaxRows, SoftmaxRowsBack) take, after t, the rows
	// i0 ≤ i < i1 (0 ≤ i0 ≤ i1 ≤ t) of the t-row block they compute, a
	// strip, and their slices start at row i0: a shape's Rows −1 is then
	// i1 − i0 rows, and the last one's Width −1 is i1 (the triangle's row
	// i1 − 1), or t for a Square shape. Bind calls them on the whole
	// block, i0 = 0 and i1 = t.
	Strip bool
	// Forward is the kind whose outputs (statistics) this backward kind
	// reads, NoKind for none.
	Forward Kind
	// Bias is the bias structure of an attention-free kind.
	Bias AFTBias
	// Flops is the nominal floating-point work of one call at length t, as
	// for a dense (unmasked) computation; nil for a kind without a dense
	// convention (measured in elements per second).
	Flops func(op Op, cfg Config, t int) float64
	// bind calls a kernel of the kind; nil for GemmTile, whose arguments
	// are not slices of a fixed shape.
	bind func(fn any, t int, s func(string) []float32, x func(string) float32) func() float32
}

// Of returns kind k's entry; it panics for a value that is not a kind.
func Of(k Kind) *Entry {
	if k < 0 || k >= numKinds {
		panic(fmt.Sprintf("catalog: %d is not a kind", int(k)))
	}
	return &table[k]
}

// Valid reports whether k is a kind of the table.
func (k Kind) Valid() bool { return k >= 0 && k < numKinds }

// Kinds lists every kind, in order.
func Kinds() []Kind {
	out := make([]Kind, numKinds)
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

// KindOf returns the kind of kernel fn, a function of one of the
// kernels.*Func types (the kind's name followed by Func).
func KindOf(fn any) (Kind, bool) {
	t := reflect.TypeOf(fn)
	if t == nil || t.PkgPath() != kernelsPath {
		return 0, false
	}
	for k := range numKinds {
		if table[k].Name+"Func" == t.Name() {
			return k, true
		}
	}
	return 0, false
}

// kernelsPath is the import path of the kernel contract.
var kernelsPath = reflect.TypeOf(kernels.Set{}).PkgPath()

// String names the kind.
func (k Kind) String() string {
	if !k.Valid() {
		return fmt.Sprintf("Kind(%d)", int(k))
	}
	return table[k].Name
}

// RowWise reports whether kind k is row-wise (see Entry.RowWise).
func (k Kind) RowWise() bool { return k.Valid() && (table[k].RowWise || table[k].Flat) }

// Flat reports whether kind k is element-wise (see Entry.Flat).
func (k Kind) Flat() bool { return k.Valid() && table[k].Flat }

// Sig is the kind's Go signature, parameters of one type in a row grouped,
// e.g. "func(t int, b, a, v, y []float32)".
func (e *Entry) Sig() string {
	var b strings.Builder
	b.WriteString("func(")
	for i, p := range e.Params {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Name)
		if i+1 == len(e.Params) || e.Params[i+1].Type != p.Type {
			b.WriteString(" " + p.Type)
		}
	}
	b.WriteString(")")
	if e.Result != "" {
		b.WriteString(" " + e.Result)
	}
	return b.String()
}

// Roles maps each slice parameter to its role.
func (e *Entry) Roles() map[string]Role {
	m := map[string]Role{}
	for _, p := range e.Params {
		if p.Type == Slice {
			m[p.Name] = p.Role
		}
	}
	return m
}

// Entry is the op's kind's entry.
func (o Op) Entry() *Entry { return Of(o.Kind) }

// Sig is the op's Go signature.
func (o Op) Sig() string { return o.Entry().Sig() }

// Flops is the nominal floating-point work of one call of o at length t
// (see Entry.Flops), 0 for a kind without a convention.
func (o Op) Flops(cfg Config, t int) float64 {
	if f := o.Entry().Flops; f != nil {
		return f(o, cfg, t)
	}
	return 0
}

// Executed is the floating-point work one call of o at length t really
// does: Flops, less the masked half for the Causal kinds of a causal spec.
func (o Op) Executed(cfg Config, t int) float64 {
	f := o.Flops(cfg, t)
	if o.Entry().Causal && !cfg.Bidirectional && t > 0 {
		return f * float64(t+1) / float64(2*t) // the causal triangle's share
	}
	return f
}

// RowElems is the number of elements one call of a row-wise op on rows
// rows processes: rows times the width of its first slice's rows (D for
// LayerNorm, FFN for GELU, Vocab for the cross-entropy, 1 for the Flat
// kinds).
func (o Op) RowElems(rows int) float64 {
	if len(o.Slices) == 0 {
		return 0
	}
	return float64(rows * o.Slices[0].Shape.Width)
}

// Bind returns a closure that calls fn, a kernel of o's kind (a function
// of the kernels.*Func type of its kind), once at length t (rows for the
// row-wise kinds) on the slices of a, by parameter name, and returns its
// result (0 for kinds without one). The slices are looked up when Bind is
// called. sc gives the scalar arguments by name; those it lacks take the
// entry's Default. A Strip kind is called on the whole block (rows 0 to
// t). Bind returns nil for GemmTile, whose arguments are not
// slices of a fixed shape, and for a nil fn or one of another type.
func (o Op) Bind(fn any, t int, a map[string][]float32, sc map[string]float32) func() float32 {
	e := o.Entry()
	if e.bind == nil || fn == nil {
		return nil
	}
	def := map[string]float32{}
	for _, p := range e.Params {
		if p.Type == Float32 {
			def[p.Name] = p.Default
		}
	}
	return e.bind(fn, t, func(name string) []float32 { return a[name] }, func(name string) float32 {
		if v, ok := sc[name]; ok {
			return v
		}
		return def[name]
	})
}

// Parameter lists.
func ints(names ...string) []Arg {
	out := make([]Arg, len(names))
	for i, n := range names {
		out[i] = Arg{Name: n, Type: Int}
	}
	return out
}

func slices(r Role, names ...string) []Arg {
	out := make([]Arg, len(names))
	for i, n := range names {
		out[i] = Arg{Name: n, Type: Slice, Role: r}
	}
	return out
}

func in(names ...string) []Arg  { return slices(In, names...) }
func out(names ...string) []Arg { return slices(Out, names...) }
func acc(names ...string) []Arg { return slices(Acc, names...) }

func scalar(name string, def float32) []Arg {
	return []Arg{{Name: name, Type: Float32, Default: def}}
}

// params joins parameter lists, after the length t.
func params(parts ...[]Arg) []Arg {
	ps := ints("t")
	for _, p := range parts {
		ps = append(ps, p...)
	}
	return ps
}

// FLOP conventions, in t and the head width dh.
func sq(t int) float64 { return float64(t) * float64(t) }

func flopsTT(c float64) func(Op, Config, int) float64 {
	return func(_ Op, _ Config, t int) float64 { return c * sq(t) }
}

func flopsTTDH(c float64) func(Op, Config, int) float64 {
	return func(_ Op, cfg Config, t int) float64 { return c * sq(t) * float64(cfg.DH) }
}

// The benchmarks' AdamW scalars: the update at step 3 with lr 1e-3, weight
// decay 0.1 and a clipping factor of 0.7.
var adamWArgs = []Arg{
	{Name: "decay", Type: Float32, Default: 1 - 1e-4},
	{Name: "gscale", Type: Float32, Default: 0.7},
	{Name: "b1", Type: Float32, Default: 0.9},
	{Name: "c1", Type: Float32, Default: 0.1},
	{Name: "b2", Type: Float32, Default: 0.95},
	{Name: "c2", Type: Float32, Default: 0.05},
	{Name: "eps", Type: Float32, Default: 1e-8},
	{Name: "step", Type: Float32, Default: float32(1e-3 / (1 - 0.9*0.9*0.9))},
	{Name: "rbc2", Type: Float32, Default: float32(1 / math.Sqrt(1-0.95*0.95*0.95))},
}

// Binding helpers: a kernel's type assertion and its call.
type (
	sl = func(string) []float32
	sc = func(string) float32
)

// table is the catalog of kinds. The Flops conventions are the benchmark
// suite's (package bench): dense counting, so that figures compare with
// dense libraries'; aft_full counts the two [t,t]×[t,dh] products of its
// dense form exp(w)·(exp(K)⊙V) and exp(w)·exp(K), linear attention its
// state updates and reads.
var table = [numKinds]Entry{
	SoftmaxValue: {Name: "SoftmaxValue", Params: params(in("b"), out("a"), in("v"), out("y")),
		Causal: true, Forward: NoKind, Flops: flopsTTDH(2), // A·V
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxValueFunc)
			if !ok {
				return nil
			}
			b, a, v, y := s("b"), s("a"), s("v"), s("y")
			return func() float32 { f(t, b, a, v, y); return 0 }
		}},
	SoftmaxValueBack: {Name: "SoftmaxValueBack", Params: params(in("a", "v", "dy"), out("db", "dv")),
		Causal: true, Forward: NoKind, Flops: flopsTTDH(4), // Aᵀ·dY and dY·Vᵀ
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxValueBackFunc)
			if !ok {
				return nil
			}
			a, v, dy, db, dv := s("a"), s("v"), s("dy"), s("db"), s("dv")
			return func() float32 { f(t, a, v, dy, db, dv); return 0 }
		}},
	Product: {Name: "Product", Params: params(in("x", "w", "bias"), out("c"), scalar("scale", 0.125)),
		Causal: true, Forward: NoKind, Flops: productFlops,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.ProductFunc)
			if !ok {
				return nil
			}
			xx, w, bias, c, scale := s("x"), s("w"), s("bias"), s("c"), x("scale")
			return func() float32 { f(t, xx, w, bias, c, scale); return 0 }
		}},
	ProductBackX: {Name: "ProductBackX", Params: params(in("dc", "w"), out("dx"), scalar("scale", 0.125)),
		Causal: true, Forward: NoKind, Flops: productFlops,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.ProductBackXFunc)
			if !ok {
				return nil
			}
			dc, w, dx, scale := s("dc"), s("w"), s("dx"), x("scale")
			return func() float32 { f(t, dc, w, dx, scale); return 0 }
		}},
	ProductBackW: {Name: "ProductBackW", Params: params(in("dc", "x"), acc("dw", "dbias"), scalar("scale", 0.125)),
		Causal: true, Forward: NoKind, Flops: productFlops,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.ProductBackWFunc)
			if !ok {
				return nil
			}
			dc, xx, dw, dbias, scale := s("dc"), s("x"), s("dw"), s("dbias"), x("scale")
			return func() float32 { f(t, dc, xx, dw, dbias, scale); return 0 }
		}},
	Tile: {Name: "Tile", Params: params(in("fa", "fb"), out("c")),
		Causal: true, Forward: NoKind, Flops: flopsTT(1),
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.TileFunc)
			if !ok {
				return nil
			}
			fa, fb, c := s("fa"), s("fb"), s("c")
			return func() float32 { f(t, fa, fb, c); return 0 }
		}},
	TileBack: {Name: "TileBack", Params: params(in("dc", "fa", "fb"), out("dfa", "dfb")),
		Causal: true, Forward: NoKind, Flops: flopsTT(4),
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.TileBackFunc)
			if !ok {
				return nil
			}
			dc, fa, fb, dfa, dfb := s("dc"), s("fa"), s("fb"), s("dfa"), s("dfb")
			return func() float32 { f(t, dc, fa, fb, dfa, dfb); return 0 }
		}},
	TriScale: {Name: "TriScale", Params: params(scalar("alpha", 0.5), in("x"), out("y")),
		Causal: true, Forward: NoKind, Flops: flopsTT(1),
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.TriScaleFunc)
			if !ok {
				return nil
			}
			alpha, xx, y := x("alpha"), s("x"), s("y")
			return func() float32 { f(t, alpha, xx, y); return 0 }
		}},
	TriAxpy: {Name: "TriAxpy", Params: params(scalar("alpha", 1e-7), in("x"), acc("y")),
		Causal: true, Forward: NoKind, Flops: flopsTT(2),
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.TriAxpyFunc)
			if !ok {
				return nil
			}
			alpha, xx, y := x("alpha"), s("x"), s("y")
			return func() float32 { f(t, alpha, xx, y); return 0 }
		}},
	TriDot: {Name: "TriDot", Params: params(in("x", "y")), Result: Float32,
		Causal: true, Forward: NoKind, Flops: flopsTT(2),
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.TriDotFunc)
			if !ok {
				return nil
			}
			x, y := s("x"), s("y")
			return func() float32 { return f(t, x, y) }
		}},

	AFTFull: {Name: "AFTFull", Params: params(in("k", "v", "w"), out("z", "m", "rd")),
		Forward: NoKind, Bias: BiasFull, Flops: flopsTTDH(4), bind: bindAFT},
	AFTFullBack: {Name: "AFTFullBack", Params: params(in("k", "v", "w", "z", "m", "rd", "dz"), out("dk", "dv"), acc("dw")),
		Forward: AFTFull, Bias: BiasFull, Flops: flopsTTDH(8), bind: bindAFTBack},
	AFTLocal: {Name: "AFTLocal", Params: params(in("k", "v", "w"), out("z", "m", "rd")),
		Forward: NoKind, Bias: BiasLocal, bind: bindAFT},
	AFTLocalBack: {Name: "AFTLocalBack", Params: params(in("k", "v", "w", "z", "m", "rd", "dz"), out("dk", "dv"), acc("dw")),
		Forward: AFTLocal, Bias: BiasLocal, bind: bindAFTBack},
	AFTConv: {Name: "AFTConv", Params: params(in("k", "v", "u"), out("z", "m", "rd")),
		Forward: NoKind, Bias: BiasConv, bind: bindAFT},
	AFTConvBack: {Name: "AFTConvBack", Params: params(in("k", "v", "u", "z", "m", "rd", "dz"), out("dk", "dv"), acc("du")),
		Forward: AFTConv, Bias: BiasConv, bind: bindAFTBack},
	AFTSimple: {Name: "AFTSimple", Params: params(in("k", "v"), out("z", "m", "rd")),
		Forward: NoKind, Bias: BiasSimple, bind: bindAFT},
	AFTSimpleBack: {Name: "AFTSimpleBack", Params: params(in("k", "v", "z", "m", "rd", "dz"), out("dk", "dv")),
		Forward: AFTSimple, Bias: BiasSimple, bind: bindAFTBack},
	Linear: {Name: "Linear", Params: params(in("fq", "fk", "v"), out("y", "rd")),
		Forward: NoKind, Flops: linearFlops(4),
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.LinearFunc)
			if !ok {
				return nil
			}
			fq, fk, v, y, rd := s("fq"), s("fk"), s("v"), s("y"), s("rd")
			return func() float32 { f(t, fq, fk, v, y, rd); return 0 }
		}},
	LinearBack: {Name: "LinearBack", Params: params(in("fq", "fk", "v", "y", "rd", "dy"), out("dfq", "dfk", "dv")),
		Forward: Linear, Flops: linearFlops(12),
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.LinearBackFunc)
			if !ok {
				return nil
			}
			fq, fk, v, y, rd, dy, dfq, dfk, dv := s("fq"), s("fk"), s("v"), s("y"), s("rd"), s("dy"), s("dfq"), s("dfk"), s("dv")
			return func() float32 { f(t, fq, fk, v, y, rd, dy, dfq, dfk, dv); return 0 }
		}},

	GemmTile: {Name: "GemmTile", Forward: NoKind, Params: concat(
		ints("kc"), in("a"), ints("ai", "ap", "at"), in("b"), ints("bp"), acc("c"), ints("ldc", "mr", "nr"),
		in("bias"), acc("asum"), out("apack", "bpack"), []Arg{{Name: "overwrite", Type: Bool}})},

	LayerNorm: {Name: "LayerNorm", Params: params(in("x", "gamma", "beta"), out("y", "mu", "rs")),
		RowWise: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.LayerNormFunc)
			if !ok {
				return nil
			}
			x, gamma, beta, y, mu, rs := s("x"), s("gamma"), s("beta"), s("y"), s("mu"), s("rs")
			return func() float32 { f(t, x, gamma, beta, y, mu, rs); return 0 }
		}},
	LayerNormBack: {Name: "LayerNormBack", Params: params(in("dy", "x", "mu", "rs", "gamma"), acc("dx")),
		RowWise: true, Forward: LayerNorm,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.LayerNormBackFunc)
			if !ok {
				return nil
			}
			dy, x, mu, rs, gamma, dx := s("dy"), s("x"), s("mu"), s("rs"), s("gamma"), s("dx")
			return func() float32 { f(t, dy, x, mu, rs, gamma, dx); return 0 }
		}},
	LayerNormGrad: {Name: "LayerNormGrad", Params: params(in("dy", "x", "mu", "rs"), acc("dgamma", "dbeta")),
		RowWise: true, Forward: LayerNorm,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.LayerNormGradFunc)
			if !ok {
				return nil
			}
			dy, x, mu, rs, dgamma, dbeta := s("dy"), s("x"), s("mu"), s("rs"), s("dgamma"), s("dbeta")
			return func() float32 { f(t, dy, x, mu, rs, dgamma, dbeta); return 0 }
		}},
	Gelu: {Name: "Gelu", Params: params(acc("u"), out("g")),
		RowWise: true, Forward: NoKind,
		// u becomes gelu'(u), in [−0.13, 1.13]: ordinary inputs again.
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.GeluFunc)
			if !ok {
				return nil
			}
			u, g := s("u"), s("g")
			return func() float32 { f(t, u, g); return 0 }
		}},
	GeluBack: {Name: "GeluBack", Params: params(acc("a"), in("b")),
		RowWise: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.GeluBackFunc)
			if !ok {
				return nil
			}
			a, b := s("a"), s("b")
			return func() float32 { f(t, a, b); return 0 }
		}},
	SoftmaxStats: {Name: "SoftmaxStats", Params: params(in("x"), out("mx", "s")),
		RowWise: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxStatsFunc)
			if !ok {
				return nil
			}
			x, mx, ss := s("x"), s("mx"), s("s")
			return func() float32 { f(t, x, mx, ss); return 0 }
		}},
	SoftmaxScale: {Name: "SoftmaxScale", Params: params(in("x", "lse"), out("y"), scalar("scale", 1.0/128)),
		RowWise: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxScaleFunc)
			if !ok {
				return nil
			}
			xx, lse, y, scale := s("x"), s("lse"), s("y"), x("scale")
			return func() float32 { f(t, xx, lse, y, scale); return 0 }
		}},
	AdamW: {Name: "AdamW", Params: params(acc("p"), in("g"), acc("m", "v"), adamWArgs),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.AdamWFunc)
			if !ok {
				return nil
			}
			p, g, m, v := s("p"), s("g"), s("m"), s("v")
			decay, gscale, b1, c1, b2, c2, eps, step, rbc2 := x("decay"), x("gscale"), x("b1"), x("c1"), x("b2"), x("c2"), x("eps"), x("step"), x("rbc2")
			return func() float32 {
				f(t, p, g, m, v, decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
				return 0
			}
		}},
	Exp: {Name: "Exp", Params: params(acc("x")),
		Flat: true, Forward: NoKind,
		// x becomes e^x, then e^(e^x), …: from the second call on,
		// 1 ≤ x ≤ e^88, as the clamp keeps it.
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.ExpFunc)
			if !ok {
				return nil
			}
			x := s("x")
			return func() float32 { f(t, x); return 0 }
		}},
	Gate: {Name: "Gate", Params: params(acc("q"), in("z"), out("y")),
		Flat: true, Forward: NoKind,
		// q becomes σ(q), then σ(σ(q)), …: from the second call on, ½ < q < 0.74.
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.GateFunc)
			if !ok {
				return nil
			}
			q, z, y := s("q"), s("z"), s("y")
			return func() float32 { f(t, q, z, y); return 0 }
		}},
	GateBack: {Name: "GateBack", Params: params(acc("dy"), in("q", "z"), out("dq")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.GateBackFunc)
			if !ok {
				return nil
			}
			dy, q, z, dq := s("dy"), s("q"), s("z"), s("dq")
			return func() float32 { f(t, dy, q, z, dq); return 0 }
		}},
	AFTFactors: {Name: "AFTFactors", Params: params(in("k", "kappa", "v"), out("kv", "ek")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AFTFactorsFunc)
			if !ok {
				return nil
			}
			k, kappa, v, kv, ek := s("k"), s("kappa"), s("v"), s("kv"), s("ek")
			return func() float32 { f(t, k, kappa, v, kv, ek); return 0 }
		}},
	AFTQuotBack: {Name: "AFTQuotBack", Params: params(in("dz", "z", "den"), out("dnum", "dden")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AFTQuotBackFunc)
			if !ok {
				return nil
			}
			dz, z, den, dnum, dden := s("dz"), s("z"), s("den"), s("dnum"), s("dden")
			return func() float32 { f(t, dz, z, den, dnum, dden); return 0 }
		}},
	AFTKVBack: {Name: "AFTKVBack", Params: params(in("ek", "v", "g1", "g2"), out("dk", "dv")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AFTKVBackFunc)
			if !ok {
				return nil
			}
			ek, v, g1, g2, dk, dv := s("ek"), s("v"), s("g1"), s("g2"), s("dk"), s("dv")
			return func() float32 { f(t, ek, v, g1, g2, dk, dv); return 0 }
		}},
	Gemv: {Name: "Gemv", Params: params(in("x", "w", "bias"), out("y")),
		RowWise: true, Forward: NoKind, Flops: gemvFlops,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.GemvFunc)
			if !ok {
				return nil
			}
			x, w, bias, y := s("x"), s("w"), s("bias"), s("y")
			return func() float32 { f(t, x, w, bias, y); return 0 }
		}},
	// b becomes e^(b − max): from the second call on, 0 ≤ b ≤ 1.
	Attend: {Name: "Attend", Params: params(acc("b"), in("v"), out("y")), Result: Float32,
		Forward: NoKind, Flops: attendFlops,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AttendFunc)
			if !ok {
				return nil
			}
			b, v, y := s("b"), s("v"), s("y")
			return func() float32 { return f(t, b, v, y) }
		}},
	Scores: {Name: "Scores", Params: params(in("q", "k"), out("b"), scalar("scale", 0.125)),
		Forward: NoKind, Flops: scoresFlops,
		bind: func(fn any, t int, s sl, x sc) func() float32 {
			f, ok := fn.(kernels.ScoresFunc)
			if !ok {
				return nil
			}
			q, k, b, scale := s("q"), s("k"), s("b"), x("scale")
			return func() float32 { f(t, q, k, b, scale); return 0 }
		}},
	// The softmax alone: elementwise, no dense FLOP convention.
	SoftmaxRows: {Name: "SoftmaxRows", Params: params(ints("i0", "i1"), in("b"), out("a")),
		Causal: true, Strip: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxRowsFunc)
			if !ok {
				return nil
			}
			b, a := s("b"), s("a")
			return func() float32 { f(t, 0, t, b, a); return 0 }
		}},
	SoftmaxRowsBack: {Name: "SoftmaxRowsBack", Params: params(ints("i0", "i1"), in("a", "g"), out("db")),
		Causal: true, Strip: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.SoftmaxRowsBackFunc)
			if !ok {
				return nil
			}
			a, g, db := s("a"), s("g"), s("db")
			return func() float32 { f(t, 0, t, a, g, db); return 0 }
		}},
	AFTMax: {Name: "AFTMax", Params: params(in("k"), acc("kappa")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AFTMaxFunc)
			if !ok {
				return nil
			}
			k, kappa := s("k"), s("kappa")
			return func() float32 { f(t, k, kappa); return 0 }
		}},
	AFTQuot: {Name: "AFTQuot", Params: params(in("num", "den"), out("z")),
		Flat: true, Forward: NoKind,
		bind: func(fn any, t int, s sl, _ sc) func() float32 {
			f, ok := fn.(kernels.AFTQuotFunc)
			if !ok {
				return nil
			}
			num, den, z := s("num"), s("den"), s("z")
			return func() float32 { f(t, num, den, z); return 0 }
		}},
}

// attendFlops is 2·t·W, the weighted sum's (the softmax's t exponentials
// not counted).
func attendFlops(op Op, _ Config, t int) float64 { return 2 * float64(t) * float64(op.AW) }

// scoresFlops is 2·t·DH.
func scoresFlops(_ Op, cfg Config, t int) float64 { return 2 * float64(t) * float64(cfg.DH) }

// gemvFlops is 2·t·K·N, a linear layer's on t rows.
func gemvFlops(op Op, _ Config, t int) float64 {
	return 2 * float64(t) * float64(op.GK) * float64(op.GN)
}

func concat(parts ...[]Arg) []Arg {
	var out []Arg
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// productFlops is 2·t²·W, the logit products' convention.
func productFlops(op Op, _ Config, t int) float64 { return 2 * sq(t) * float64(op.W) }

// linearFlops is c·t·dh², linear attention's convention.
func linearFlops(c float64) func(Op, Config, int) float64 {
	return func(_ Op, cfg Config, t int) float64 { return c * float64(t) * float64(cfg.DH) * float64(cfg.DH) }
}

// bindAFT binds the four attention-free forwards, which share a signature
// shape: k, v, the bias (w, u or none), then z, m and rd.
func bindAFT(fn any, t int, s sl, _ sc) func() float32 {
	k, v, z, m, rd := s("k"), s("v"), s("z"), s("m"), s("rd")
	switch f := fn.(type) {
	case kernels.AFTFullFunc:
		w := s("w")
		return func() float32 { f(t, k, v, w, z, m, rd); return 0 }
	case kernels.AFTLocalFunc:
		w := s("w")
		return func() float32 { f(t, k, v, w, z, m, rd); return 0 }
	case kernels.AFTConvFunc:
		u := s("u")
		return func() float32 { f(t, k, v, u, z, m, rd); return 0 }
	case kernels.AFTSimpleFunc:
		return func() float32 { f(t, k, v, z, m, rd); return 0 }
	}
	return nil
}

// bindAFTBack binds the four attention-free backwards.
func bindAFTBack(fn any, t int, s sl, _ sc) func() float32 {
	k, v, z, m, rd, dz, dk, dv := s("k"), s("v"), s("z"), s("m"), s("rd"), s("dz"), s("dk"), s("dv")
	switch f := fn.(type) {
	case kernels.AFTFullBackFunc:
		w, dw := s("w"), s("dw")
		return func() float32 { f(t, k, v, w, z, m, rd, dz, dk, dv, dw); return 0 }
	case kernels.AFTLocalBackFunc:
		w, dw := s("w"), s("dw")
		return func() float32 { f(t, k, v, w, z, m, rd, dz, dk, dv, dw); return 0 }
	case kernels.AFTConvBackFunc:
		u, du := s("u"), s("du")
		return func() float32 { f(t, k, v, u, z, m, rd, dz, dk, dv, du); return 0 }
	case kernels.AFTSimpleBackFunc:
		return func() float32 { f(t, k, v, z, m, rd, dz, dk, dv); return 0 }
	}
	return nil
}
