package gogen

// Building blocks shared by the emitters: local size constants, windows of
// constant length (the re-slices that let the compiler drop bounds checks),
// unrolled dot products and the two linear-combination loops every
// matrix-shaped kernel reduces to.

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// chunk is the number of independent float32 accumulators the unrolled
// loops keep in registers. Six hide the add latency of scalar code and,
// with the six operands the compiler loads ahead of the adds and the
// shared factor, still fit amd64's fifteen allocatable X registers: eight
// made the Go compiler spill an accumulator to the stack every iteration
// and ran 1.5–2× slower (measured on the big spec, Zen 4).
const chunk = 6

// fullUnroll is the widest reduction emitted fully unrolled; wider ones
// loop over chunks with an unrolled remainder.
const fullUnroll = 16

// size is one local constant of a generated kernel.
type size struct {
	name string
	val  int
	doc  string
}

// constBlock declares a kernel's sizes as local constants.
func constBlock(sz ...size) jen.Code {
	defs := make([]jen.Code, len(sz))
	for i, s := range sz {
		defs[i] = jen.Id(s.name).Op("=").Lit(s.val).Comment(s.doc)
	}
	return jen.Const().Defs(defs...)
}

// acc names accumulator k.
func acc(k int) *jen.Statement { return jen.Id(fmt.Sprintf("s%d", k)) }

// accs lists accumulators s0 … s(n−1).
func accs(n int) []jen.Code {
	out := make([]jen.Code, n)
	for k := range out {
		out[k] = acc(k)
	}
	return out
}

// declAccs declares n zeroed float32 accumulators.
func declAccs(n int) jen.Code { return jen.Var().List(accs(n)...).Float32() }

// sumAccs is the pairwise sum of accumulators s0 … s(n−1).
func sumAccs(n int) jen.Code { return sumRange(0, n) }

func sumRange(lo, hi int) jen.Code {
	if hi-lo == 1 {
		return acc(lo)
	}
	mid := lo + (hi-lo+1)/2
	l, r := sumRange(lo, mid), sumRange(mid, hi)
	if mid-lo > 1 {
		l = jen.Parens(l)
	}
	if hi-mid > 1 {
		r = jen.Parens(r)
	}
	return jen.Add(l).Op("+").Add(r)
}

// expr is an index expression built fresh on every call, so one expression
// can appear in several places of the tree (jennifer statements grow when
// methods are called on them, so they must not be shared and extended).
type expr func() *jen.Statement

// idx is the expression name.
func idx(name string) expr { return func() *jen.Statement { return jen.Id(name) } }

// rowOff is the expression row·stride.
func rowOff(row, stride string) expr {
	return func() *jen.Statement { return jen.Id(row).Op("*").Id(stride) }
}

// win is s[lo : lo+n : lo+n]: a window of constant length n whose indexing
// by constants needs no bounds check.
func win(s string, lo expr, n jen.Code) *jen.Statement {
	return jen.Id(s).Index(lo(), lo().Op("+").Add(n), lo().Op("+").Add(n))
}

// at is s[k] for a constant k.
func at(s string, k int) *jen.Statement { return jen.Id(s).Index(jen.Lit(k)) }

// dotInto declares res := Σ_{p<width} xs[p]·ys[p] for two slices of
// constant length width, in up to chunk independent accumulators that are
// summed pairwise at the end. Widths up to fullUnroll are unrolled fully;
// wider ones loop over chunks and unroll the remainder.
func dotInto(res, xs, ys string, width int) []jen.Code {
	k := min(chunk, width)
	var out []jen.Code
	if width <= fullUnroll {
		for p := 0; p < width; p++ {
			op := "+="
			if p < k {
				op = ":="
			}
			out = append(out, acc(p%k).Op(op).Add(at(xs, p)).Op("*").Add(at(ys, p)))
		}
	} else {
		full := width / chunk * chunk
		var body []jen.Code
		body = append(body,
			jen.Id("xq").Op(":=").Add(win(xs, idx("p"), jen.Lit(chunk))),
			jen.Id("yq").Op(":=").Add(win(ys, idx("p"), jen.Lit(chunk))),
		)
		for q := 0; q < chunk; q++ {
			body = append(body, acc(q).Op("+=").Add(at("xq", q)).Op("*").Add(at("yq", q)))
		}
		out = append(out,
			declAccs(k),
			jen.For(jen.Id("p").Op(":=").Lit(0), jen.Id("p").Op("<").Lit(full), jen.Id("p").Op("+=").Lit(chunk)).Block(body...),
		)
		for p := full; p < width; p++ {
			out = append(out, acc(p%k).Op("+=").Add(at(xs, p)).Op("*").Add(at(ys, p)))
		}
	}
	out = append(out, jen.Id(res).Op(":=").Add(sumAccs(k)))
	return out
}

// col is a column offset inside a row: the loop variable v (if any) plus
// the constant k.
type col struct {
	v string
	k int
}

// span is s[base+c : base+c+r : base+c+r] for a row offset base (nil for
// none) and a column offset c, with the constants folded.
func span(s string, base expr, c col, r int) *jen.Statement {
	bound := func(k int) jen.Code {
		var e *jen.Statement
		if base != nil {
			e = base()
		}
		if c.v != "" {
			if e == nil {
				e = jen.Id(c.v)
			} else {
				e = e.Op("+").Id(c.v)
			}
		}
		switch {
		case e == nil && k == 0:
			return jen.Empty()
		case e == nil:
			return jen.Lit(k)
		case k != 0:
			return e.Op("+").Lit(k)
		}
		return e
	}
	return jen.Id(s).Index(bound(c.k), bound(c.k+r), bound(c.k+r))
}

// chunks calls body for each chunk of a width-wide row: the full chunks
// (as a loop over c0 when there are several) and the remainder.
func chunks(width int, body func(c col, r int) []jen.Code) []jen.Code {
	var out []jen.Code
	full := width / chunk
	switch {
	case full == 1:
		out = append(out, jen.Block(body(col{}, chunk)...))
	case full > 1:
		out = append(out, jen.For(jen.Id("c0").Op(":=").Lit(0), jen.Id("c0").Op("<").Lit(full*chunk),
			jen.Id("c0").Op("+=").Lit(chunk)).Block(body(col{v: "c0"}, chunk)...))
	}
	if r := width % chunk; r > 0 {
		out = append(out, jen.Block(body(col{k: full * chunk}, r)...))
	}
	return out
}

// store writes the r accumulators to out[c : c+r]: overwrite (op "=") or
// accumulate (op "+="), multiplied by scale unless scale is empty.
func store(out string, c col, r int, op, scale string) []jen.Code {
	res := []jen.Code{jen.Id("oq").Op(":=").Add(span(out, nil, c, r))}
	for k := 0; k < r; k++ {
		v := acc(k)
		if scale != "" {
			v = jen.Id(scale).Op("*").Add(acc(k))
		}
		res = append(res, at("oq", k).Op(op).Add(v))
	}
	return res
}

// combineRows emits, for out a slice of constant length width and coef a
// slice indexed by j,
//
//	out[c] = scale · Σ_j coef[j] · src[j·stride + c],  c < width,
//
// one chunk of output columns at a time, each column in its own
// accumulator, looping over j inside the chunk. scale "" means 1.
func combineRows(coef, src, stride, out string, width int, scale string) []jen.Code {
	return chunks(width, func(c col, r int) []jen.Code {
		inner := []jen.Code{
			jen.Id("sq").Op(":=").Add(span(src, rowOff("j", stride), c, r)),
		}
		for k := 0; k < r; k++ {
			inner = append(inner, acc(k).Op("+=").Id("cj").Op("*").Add(at("sq", k)))
		}
		body := []jen.Code{
			declAccs(r),
			jen.For(jen.List(jen.Id("j"), jen.Id("cj")).Op(":=").Range().Id(coef)).Block(inner...),
		}
		return append(body, store(out, c, r, "=", scale)...)
	})
}

// combineCols emits, for every j < t,
//
//	out[j·ostride + c]  op  scale · Σ_{j≤i<t} tri[i·N + j] · src[i·sstride + c],  c < width,
//
// (Σ_{i<t} for a bidirectional cfg) with op "=" (overwrite) or "+=" (accumulate) and width the value of the
// local constant widthName: the transposed product of a causal triangle,
// walking the triangle's column j inside each chunk of output columns.
// scale "" means 1.
func combineCols(cfg catalog.Config, tri, src, sstride, out, ostride, widthName string, width int, op, scale string) jen.Code {
	body := []jen.Code{
		jen.Id("outr").Op(":=").Add(win(out, rowOff("j", ostride), jen.Id(widthName))),
	}
	body = append(body, chunks(width, func(c col, r int) []jen.Code {
		inner := []jen.Code{
			jen.Id("cij").Op(":=").Id(tri).Index(jen.Id("i").Op("*").Id("N").Op("+").Id("j")),
			jen.Id("sq").Op(":=").Add(span(src, rowOff("i", sstride), c, r)),
		}
		for k := 0; k < r; k++ {
			inner = append(inner, acc(k).Op("+=").Id("cij").Op("*").Add(at("sq", k)))
		}
		res := []jen.Code{
			declAccs(r),
			jen.For(jen.Id("i").Op(":=").Add(colStart(cfg)), jen.Id("i").Op("<").Id("t"), jen.Id("i").Op("++")).Block(inner...),
		}
		return append(res, store("outr", c, r, op, scale)...)
	})...)
	return jen.For(jen.Id("j").Op(":=").Lit(0), jen.Id("j").Op("<").Id("t"), jen.Id("j").Op("++")).Block(body...)
}

// rowDots emits, for every j < len(out),
//
//	out[j] = post(Σ_{p<width} xs[p] · w[j·stride + p])
//
// for xs a slice of constant length width (the value of the local constant
// widthName): chunk rows of w at a time, one accumulator per row, so each
// xs[p] is loaded once per chunk; then the remaining rows one dot product
// each. post maps the accumulator to the stored value (nil: as is).
func rowDots(out, xs, w, stride, widthName string, width int, post func(s jen.Code) jen.Code) []jen.Code {
	if post == nil {
		post = func(s jen.Code) jen.Code { return s }
	}
	wk := func(k int) string { return fmt.Sprintf("w%d", k) }
	var block []jen.Code
	for k := 0; k < chunk; k++ {
		row := func() *jen.Statement { return jen.Parens(jen.Id("j").Op("+").Lit(k)).Op("*").Id(stride) }
		if k == 0 {
			row = rowOff("j", stride)
		}
		block = append(block, jen.Id(wk(k)).Op(":=").Add(win(w, row, jen.Id(widthName))))
	}
	block = append(block, declAccs(chunk))
	step := func(p, xp jen.Code) []jen.Code {
		var out []jen.Code
		for k := 0; k < chunk; k++ {
			out = append(out, acc(k).Op("+=").Add(xp).Op("*").Id(wk(k)).Index(p))
		}
		return out
	}
	if width <= fullUnroll {
		for p := 0; p < width; p++ {
			block = append(block, step(jen.Lit(p), at(xs, p))...)
		}
	} else {
		block = append(block, jen.For(jen.List(jen.Id("p"), jen.Id("xp")).Op(":=").Range().Id(xs)).Block(step(jen.Id("p"), jen.Id("xp"))...))
	}
	block = append(block, jen.Id("oq").Op(":=").Add(win(out, idx("j"), jen.Lit(chunk))))
	for k := 0; k < chunk; k++ {
		block = append(block, at("oq", k).Op("=").Add(post(acc(k))))
	}
	one := []jen.Code{jen.Id("wr").Op(":=").Add(win(w, rowOff("j", stride), jen.Id(widthName)))}
	one = append(one, dotInto("s", xs, "wr", width)...)
	one = append(one, jen.Id(out).Index(jen.Id("j")).Op("=").Add(post(jen.Id("s"))))
	return []jen.Code{
		jen.Id("j").Op(":=").Lit(0),
		jen.For(jen.Empty(), jen.Id("j").Op("+").Lit(chunk).Op("<=").Len(jen.Id(out)), jen.Id("j").Op("+=").Lit(chunk)).Block(block...),
		jen.For(jen.Empty(), jen.Id("j").Op("<").Len(jen.Id(out)), jen.Id("j").Op("++")).Block(one...),
	}
}

// forRows is `for i := 0; i < t; i++ { body }`.
func forRows(body ...jen.Code) jen.Code {
	return jen.For(jen.Id("i").Op(":=").Lit(0), jen.Id("i").Op("<").Id("t"), jen.Id("i").Op("++")).Block(body...)
}

// triRow is name[i·N : i·N+n : i·N+n], row i of a causal triangle cut to
// its first n entries.
func triRow(name string, n jen.Code) *jen.Statement { return win(name, rowOff("i", "N"), n) }

// forStrip is `for i := i0; i < i1; i++ { ro := (i − i0)·N; body }`: the
// rows of a strip kind (catalog.Entry.Strip), ro the offset of row i in
// slices that start at row i0.
func forStrip(body ...jen.Code) jen.Code {
	return jen.For(jen.Id("i").Op(":=").Id("i0"), jen.Id("i").Op("<").Id("i1"), jen.Id("i").Op("++")).Block(
		append([]jen.Code{jen.Id("ro").Op(":=").Parens(jen.Id("i").Op("-").Id("i0")).Op("*").Id("N")}, body...)...)
}

// stripRow is name[ro : ro+n : ro+n], row i of a strip (forStrip) cut to
// its first n entries.
func stripRow(name string, n jen.Code) *jen.Statement { return win(name, idx("ro"), n) }

// rowLen is the number of keys row i of a logit matrix has: i+1 under the
// causal mask, t for a bidirectional spec (every key j < t).
func rowLen(cfg catalog.Config) jen.Code {
	if cfg.Bidirectional {
		return jen.Id("t")
	}
	return jen.Id("i").Op("+").Lit(1)
}

// colStart is the first row i that column j of a logit matrix has: j under
// the causal mask, 0 for a bidirectional spec.
func colStart(cfg catalog.Config) jen.Code {
	if cfg.Bidirectional {
		return jen.Lit(0)
	}
	return jen.Id("j")
}

// unmasked rewrites a causal kernel's doc comment for a bidirectional spec:
// the triangle j ≤ i becomes the square i, j < t.
var unmasked = strings.NewReplacer(
	"Σ_{j≤i<t}", "Σ_{i<t}",
	"Σ_{j=p·FB+q ≤ i}", "Σ_{j=p·FB+q < t}",
	"Σ_{j≤i}", "Σ_{j<t}",
	"Σ_{j'≤i}", "Σ_{j'<t}",
	"max_{j≤i}", "max_{j<t}",
	"j ≤ i < t", "i, j < t",
	"j ≤ i", "j < t",
	"entries with j > i", "entries with j ≥ t",
	"causal triangle", "square i, j < t",
	"causal softmax", "unmasked softmax",
	"causal product", "unmasked product",
)

// maskDoc is doc as it reads for cfg: unchanged under the causal mask.
func maskDoc(cfg catalog.Config, doc string) string {
	if cfg.Bidirectional {
		return unmasked.Replace(doc)
	}
	return doc
}

// funcDecl adds `func Name(op)<signature> { body }` with its doc comment,
// the signature being the catalog's for op's kind, parameter names and
// grouping included.
func funcDecl(f *jen.File, op catalog.Op, doc string, body ...jen.Code) {
	params, result := signature(op.Entry())
	for _, line := range strings.Split(doc, "\n") {
		f.Comment(line)
	}
	fn := f.Func().Id(Name(op)).Params(params...)
	if result != nil {
		fn = fn.Add(result)
	}
	fn.Block(body...)
}

// signature is the catalog entry's signature as jennifer parameter groups
// (parameters of one type in a row share it) and the result type (nil when
// there is none).
func signature(e *catalog.Entry) (params []jen.Code, result jen.Code) {
	var names []jen.Code
	for i, p := range e.Params {
		names = append(names, jen.Id(p.Name))
		if i+1 < len(e.Params) && e.Params[i+1].Type == p.Type {
			continue
		}
		params = append(params, jen.List(names...).Add(typeOf(p.Type)))
		names = nil
	}
	if e.Result != "" {
		result = typeOf(e.Result)
	}
	return params, result
}

// typeOf is the jennifer type of a catalog parameter type.
func typeOf(typ string) jen.Code {
	if el, ok := strings.CutPrefix(typ, "[]"); ok {
		return jen.Index().Id(el)
	}
	return jen.Id(typ)
}
