package gogen

import (
	"fmt"
	"math"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// emitSoftmaxValue emits the fused causal softmax and value product. The
// exponentials are expNeg's, in float64 (b − m formed exactly in float64,
// the result within 6e-9 relative, then rounded to float32: at most one
// float32 ulp from the correctly rounded value), summed in float64; the
// normalisation a = e·(1/Σ) adds one float32 rounding, so each a is within
// about two float32 ulps of the exact value.
func emitSoftmaxValue(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the causal softmax fused with the value product
(kernels.SoftmaxValueFunc) for N = %d, D = %d, DH = %d: for every row i < t,

	a[i·N+j] = exp(b[i·N+j] − m_i) / Σ_{j'≤i} exp(b[i·N+j'] − m_i),  j ≤ i, m_i = max_{j≤i} b[i·N+j]
	y[i·D+c] = Σ_{j≤i} a[i·N+j] · v[j·D+c],  c < DH

a may be b. A row of b that is all −Inf gives a = 0 and y = 0. The
exponentials are computed in float64 to within 6e-9 relative (so a is within
two float32 ulps of exact); entries with j > i and columns c ≥ DH are never
touched.`, Name(op), cfg.N, cfg.D, cfg.DH)
	row := []jen.Code{
		jen.Id("br").Op(":=").Add(triRow("b", rowLen(cfg))),
		jen.Id("ar").Op(":=").Add(triRow("a", rowLen(cfg))),
		jen.Id("yr").Op(":=").Add(win("y", rowOff("i", "D"), jen.Id("DH"))),
	}
	row = append(row, softmaxRow("a = 0 and y = 0", jen.Clear(jen.Id("yr")))...)
	row = append(row, jen.Comment("y_i = Σ_j a_ij · v_j, a chunk of output columns at a time."))
	row = append(row, combineRows("ar", "v", "D", "yr", cfg.DH, "")...)
	funcDecl(f, op, maskDoc(cfg, doc),
		constBlock(
			size{"N", cfg.N, "row stride of b and a"},
			size{"D", cfg.D, "row stride of v and y"},
			size{"DH", cfg.DH, "head width"},
		),
		forRows(row...),
	)
}

// softmaxRow is the softmax of row i from br to ar (the rows of b and a,
// declared before): the maximum m, then ar = exp(br − m) / Σ exp(br − m).
// A fully masked row (m = −Inf) clears ar, runs masked (which clears the
// row's other outputs, named in the comment by zeros) and continues.
func softmaxRow(zeros string, masked ...jen.Code) []jen.Code {
	return []jen.Code{
		jen.Comment("m is the row maximum; a fully masked row (all −Inf) gives " + zeros + "."),
		jen.Id("m").Op(":=").Id("br").Index(jen.Lit(0)),
		jen.For(jen.List(jen.Id("_"), jen.Id("bj")).Op(":=").Range().Id("br").Index(jen.Lit(1), jen.Empty())).Block(
			jen.If(jen.Id("bj").Op(">").Id("m")).Block(jen.Id("m").Op("=").Id("bj")),
		),
		jen.If(jen.Qual("math", "IsInf").Call(jen.Float64().Call(jen.Id("m")), jen.Lit(-1))).Block(
			append(append([]jen.Code{jen.Clear(jen.Id("ar"))}, masked...), jen.Continue())...,
		),
		jen.Comment("a_ij = exp(b_ij − m) / Σ_j' exp(b_ij' − m), the difference taken exactly in float64."),
		jen.Var().Id("sum").Float64(),
		jen.For(jen.List(jen.Id("j"), jen.Id("bj")).Op(":=").Range().Id("br")).Block(
			append(expNeg("e", jen.Float64().Call(jen.Id("bj")).Op("-").Float64().Call(jen.Id("m"))),
				jen.Id("sum").Op("+=").Id("e"),
				jen.Id("ar").Index(jen.Id("j")).Op("=").Float32().Call(jen.Id("e")),
			)...,
		),
		jen.Id("inv").Op(":=").Float32().Call(jen.Lit(1).Op("/").Id("sum")),
		jen.For(jen.Id("j").Op(":=").Range().Id("ar")).Block(
			jen.Id("ar").Index(jen.Id("j")).Op("*=").Id("inv"),
		),
	}
}

// emitSoftmaxRows emits the softmax alone: SoftmaxValue's rows without the
// value product, over the strip of rows i0 ≤ i < i1.
func emitSoftmaxRows(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the causal softmax alone (kernels.SoftmaxRowsFunc)
for N = %d: for every row i0 ≤ i < i1 of a t-row block, r = i − i0,

	a[r·N+j] = exp(b[r·N+j] − m_i) / Σ_{j'≤i} exp(b[r·N+j'] − m_i),  j ≤ i, m_i = max_{j≤i} b[r·N+j]

b and a start at row i0; a may be b. A row of b that is all −Inf gives
a = 0. The exponentials are computed in float64 to within 6e-9 relative
(so a is within two float32 ulps of exact); entries with j > i are never
touched. Each row is computed alone, so a strip's rows are bit for bit
those of the whole block's.`, Name(op), cfg.N)
	row := []jen.Code{
		jen.Id("br").Op(":=").Add(stripRow("b", rowLen(cfg))),
		jen.Id("ar").Op(":=").Add(stripRow("a", rowLen(cfg))),
	}
	row = append(row, softmaxRow("a = 0")...)
	funcDecl(f, op, maskDoc(cfg, doc),
		constBlock(size{"N", cfg.N, "row stride of b and a"}),
		forStrip(row...),
	)
}

// emitSoftmaxRowsBack emits the backward of SoftmaxRows, row by row over
// the strip i0 ≤ i < i1: s_i, then db_ij, each entry of db written after
// its a_ij and g_ij are read, so db may be a or g.
func emitSoftmaxRowsBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the backward of the causal softmax alone
(kernels.SoftmaxRowsBackFunc) for N = %d; it overwrites, for i0 ≤ i < i1
of a t-row block, r = i − i0, and j ≤ i,

	db[r·N+j] = a[r·N+j] · (g[r·N+j] − Σ_{j'≤i} a[r·N+j'] · g[r·N+j'])

the sum taken in float64. a, g and db start at row i0; db may be a or g;
entries with j > i are never touched.`, Name(op), cfg.N)
	row := append([]jen.Code{
		jen.Id("ar").Op(":=").Add(stripRow("a", rowLen(cfg))),
		jen.Id("gr").Op(":=").Add(stripRow("g", rowLen(cfg))),
	}, dbRow(cfg, stripRow)...)
	funcDecl(f, op, maskDoc(cfg, doc),
		constBlock(size{"N", cfg.N, "row stride of a, g and db"}),
		forStrip(row...),
	)
}

// dbRow is db's row i from the rows ar of a and gr of g (declared before):
// s = Σ_j a_ij g_ij in float64, then db_ij = a_ij (g_ij − s), each entry
// written after its a_ij and g_ij are read. row cuts db's row i (triRow,
// or stripRow in a strip).
func dbRow(cfg catalog.Config, row func(name string, n jen.Code) *jen.Statement) []jen.Code {
	return []jen.Code{
		jen.Var().Id("s").Float64(),
		jen.For(jen.List(jen.Id("j"), jen.Id("aj")).Op(":=").Range().Id("ar")).Block(
			jen.Id("s").Op("+=").Float64().Call(jen.Id("aj")).Op("*").Float64().Call(jen.Id("gr").Index(jen.Id("j"))),
		),
		jen.Id("sf").Op(":=").Float32().Call(jen.Id("s")),
		jen.Id("dbr").Op(":=").Add(row("db", rowLen(cfg))),
		jen.For(jen.List(jen.Id("j"), jen.Id("aj")).Op(":=").Range().Id("ar")).Block(
			jen.Id("dbr").Index(jen.Id("j")).Op("=").Id("aj").Op("*").Parens(jen.Id("gr").Index(jen.Id("j")).Op("-").Id("sf")),
		),
	}
}

// emitSoftmaxValueBack emits the backward of SoftmaxValue. dv is computed
// first, from a, because db may overwrite a; then each row's g_ij = dy_i·v_j
// goes to a stack scratch row so that db can be written in place.
func emitSoftmaxValueBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the backward of the causal softmax and value product
(kernels.SoftmaxValueBackFunc) for N = %d, D = %d, DH = %d; it overwrites

	dv[j·D+c] = Σ_{j≤i<t} a[i·N+j] · dy[i·D+c],  c < DH
	db[i·N+j] = a[i·N+j] · (g_ij − Σ_{j'≤i} a[i·N+j'] · g_ij'),  g_ij = Σ_{c<DH} dy[i·D+c] · v[j·D+c]

db may be a: dv is computed before db is written.`, Name(op), cfg.N, cfg.D, cfg.DH)
	row := []jen.Code{
		jen.Id("ar").Op(":=").Add(triRow("a", rowLen(cfg))),
		jen.Id("dyr").Op(":=").Add(win("dy", rowOff("i", "D"), jen.Id("DH"))),
		jen.Id("gr").Op(":=").Id("g").Index(jen.Empty(), jen.Len(jen.Id("ar")), jen.Len(jen.Id("ar"))),
		jen.Comment("g_ij = dy_i · v_j, a chunk of rows of v at a time."),
		jen.Block(rowDots("gr", "dyr", "v", "D", "DH", cfg.DH, nil)...),
	}
	row = append(row, dbRow(cfg, triRow)...)
	funcDecl(f, op, maskDoc(cfg, doc),
		constBlock(
			size{"N", cfg.N, "row stride of a and db"},
			size{"D", cfg.D, "row stride of v, dy and dv"},
			size{"DH", cfg.DH, "head width"},
		),
		jen.Comment("dv_j = Σ_{i≥j} a_ij · dy_i, walking column j of a; done first since db may be a."),
		combineCols(cfg, "a", "dy", "D", "dv", "D", "DH", cfg.DH, "=", ""),
		jen.Comment("db_ij = a_ij · (g_ij − Σ_j' a_ij' g_ij'), row by row, g_ij kept in a scratch row."),
		jen.Var().Id("g").Index(jen.Id("N")).Float32(),
		forRows(row...),
	)
}

// expNeg emits `name := exp(x)` for a float64 x ≤ 0 (−Inf included),
// inline: x = n·ln 2 + r with n an integer and |r| ≤ ln 2 / 2, exp(r) by its
// Taylor polynomial of degree 7 (relative error below 6e-9), times 2ⁿ built
// in the exponent bits. Below −104 the result is 0: exp(−104) rounds to 0 in
// float32, the precision the kernels store. About twice as fast as
// math.Exp; after rounding to float32 it differs from math.Exp's rounded
// result by at most one ulp (in 0.6% of arguments, measured on a 1e-5 grid
// of [−104, 0]).
func expNeg(name string, x jen.Code) []jen.Code {
	return []jen.Code{
		jen.Id("x").Op(":=").Add(x),
		jen.Id(name).Op(":=").Lit(0.0),
		jen.If(jen.Op("!").Parens(jen.Id("x").Op("<=").Lit(-104))).Block(
			jen.Const().Defs(
				jen.Id("log2e").Op("=").Lit(math.Log2E),
				jen.Id("ln2").Op("=").Lit(math.Ln2),
				jen.Id("round").Op("=").Id("0x1.8p52").Comment("adding and subtracting it rounds to an integer"),
			),
			jen.Id("n").Op(":=").Parens(jen.Id("x").Op("*").Id("log2e").Op("+").Id("round")).Op("-").Id("round"),
			jen.Id("r").Op(":=").Id("x").Op("-").Id("n").Op("*").Id("ln2"),
			jen.Id("p").Op(":=").Add(taylorExp(7)),
			jen.Id(name).Op("=").Id("p").Op("*").Qual("math", "Float64frombits").Call(
				jen.Uint64().Call(jen.Int64().Call(jen.Id("n")).Op("+").Lit(1023)).Op("<<").Lit(52)),
		),
	}
}

// taylorExp is Σ_{k≤deg} r^k/k! in Horner form.
func taylorExp(deg int) jen.Code {
	var e jen.Code = jen.Id(fmt.Sprintf("1.0/%d", factorial(deg)))
	for k := deg - 1; k >= 0; k-- {
		var c jen.Code = jen.Lit(1)
		if k >= 2 {
			c = jen.Id(fmt.Sprintf("1.0/%d", factorial(k)))
		} else if k == 1 {
			c = jen.Lit(1)
		}
		e = jen.Add(c).Op("+").Id("r").Op("*").Parens(e)
	}
	return e
}

func factorial(k int) int {
	f := 1
	for i := 2; i <= k; i++ {
		f *= i
	}
	return f
}
