package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// The row-wise kernels (kernels.LayerNormFunc, LayerNormBackFunc,
// LayerNormGradFunc, GeluFunc, GeluBackFunc). LayerNorm works row by row
// on rows of the constant length D, re-sliced to constant-length windows;
// its row sums use rowUnroll float32 accumulators (column c in accumulator
// c mod rowUnroll, added pairwise at the end), so their order depends on D
// only. The GELU kernels treat their t rows of FFN floats as t·FFN
// consecutive floats.

// rowUnroll is the window width of the LayerNorm passes and the number of
// accumulators of each of their row sums: two sums of four fit the X
// registers with their operands.
const rowUnroll = 4

// lnEps is the LayerNorm's ε, as the kernels' contract states it.
const lnEps = 1e-5

// rowPass emits a pass over the width columns of one row: windows of
// rowUnroll columns (a loop over c when there are several), then the
// remainder unrolled (a single window is unrolled too). slices are the
// names of the constant-length slices the pass reads or writes (each cut
// to its window as name+"q"); elem emits the code for the column at
// position k of its window, at(name) being that column of slice name.
// Column c's code gets k = c mod rowUnroll, the accumulator it adds into.
func rowPass(width int, slices []string, elem func(k int, at func(name string) *jen.Statement) []jen.Code) []jen.Code {
	full := width / rowUnroll * rowUnroll
	if full == rowUnroll {
		full = 0 // a single window: unroll it with the remainder
	}
	var out []jen.Code
	if full > 0 {
		var body []jen.Code
		for _, s := range slices {
			body = append(body, jen.Id(s+"q").Op(":=").Add(win(s, idx("c"), jen.Lit(rowUnroll))))
		}
		for k := 0; k < rowUnroll; k++ {
			body = append(body, elem(k, func(name string) *jen.Statement { return at(name+"q", k) })...)
		}
		out = append(out, jen.For(jen.Id("c").Op(":=").Lit(0), jen.Id("c").Op("<").Lit(full),
			jen.Id("c").Op("+=").Lit(rowUnroll)).Block(body...))
	}
	for c := full; c < width; c++ {
		code := elem(c%rowUnroll, func(name string) *jen.Statement { return at(name, c) })
		if width-full > rowUnroll && len(code) > 1 { // k repeats: scope each column's temporaries
			code = []jen.Code{jen.Block(code...)}
		}
		out = append(out, code...)
	}
	return out
}

// named is the identifier prefix followed by k.
func named(prefix string, k int) *jen.Statement { return jen.Id(fmt.Sprintf("%s%d", prefix, k)) }

// declNamed declares the float32 accumulators prefix0 … prefix(n−1).
func declNamed(prefix string, n int) jen.Code {
	ids := make([]jen.Code, n)
	for k := range ids {
		ids[k] = named(prefix, k)
	}
	return jen.Var().List(ids...).Float32()
}

// sumNamed is the pairwise sum of prefix0 … prefix(n−1), as sumAccs.
func sumNamed(prefix string, lo, hi int) jen.Code {
	if hi-lo == 1 {
		return named(prefix, lo)
	}
	mid := lo + (hi-lo+1)/2
	l, r := sumNamed(prefix, lo, mid), sumNamed(prefix, mid, hi)
	if mid-lo > 1 {
		l = jen.Parens(l)
	}
	if hi-mid > 1 {
		r = jen.Parens(r)
	}
	return jen.Add(l).Op("+").Add(r)
}

// dRow is name[i·D : i·D+D : i·D+D], row i of a [t, D] matrix.
func dRow(name string) *jen.Statement { return win(name, rowOff("i", "D"), jen.Id("D")) }

// dWin is name[:D:D], a parameter vector cut to its constant length.
func dWin(name string) *jen.Statement {
	return jen.Id(name).Index(jen.Empty(), jen.Id("D"), jen.Id("D"))
}

// lnConst declares D (and ε for the forward).
func lnConst(cfg catalog.Config, eps bool) jen.Code {
	defs := []jen.Code{jen.Id("D").Op("=").Lit(cfg.D).Comment("row length and row stride")}
	if eps {
		defs = append(defs, jen.Id("eps").Op("=").Lit(lnEps).Comment("added to the variance"))
	}
	return jen.Const().Defs(defs...)
}

// rowSum is the pairwise sum of the rowUnroll accumulators prefix0….
func rowSum(prefix string) jen.Code { return sumNamed(prefix, 0, rowUnroll) }

// emitLayerNorm emits the LayerNorm forward: per row, the mean m0 in
// rowUnroll accumulators; then the sums of d = x − m0 and d² around it,
// which give the correction dm = Σd/D (mu = m0 + dm) and the variance
// Σd²/D − dm², clamped at 0; then y from x − m0 − dm, which keeps the
// precision mu's rounding to float32 would lose under a large offset.
func emitLayerNorm(f *jen.File, op catalog.Op, cfg catalog.Config) {
	row := []jen.Code{
		jen.Id("xr").Op(":=").Add(dRow("x")),
		declNamed("s", rowUnroll),
	}
	row = append(row, rowPass(cfg.D, []string{"xr"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{named("s", k).Op("+=").Add(at("xr"))}
	})...)
	row = append(row,
		jen.Id("m0").Op(":=").Parens(rowSum("s")).Op("/").Id("D"),
		declNamed("e", rowUnroll),
		declNamed("q", rowUnroll),
	)
	row = append(row, rowPass(cfg.D, []string{"xr"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{
			named("d", k).Op(":=").Add(at("xr")).Op("-").Id("m0"),
			named("e", k).Op("+=").Add(named("d", k)),
			named("q", k).Op("+=").Add(named("d", k)).Op("*").Add(named("d", k)),
		}
	})...)
	row = append(row,
		jen.Id("dm").Op(":=").Parens(rowSum("e")).Op("/").Id("D"),
		jen.Id("v").Op(":=").Max(jen.Parens(rowSum("q")).Op("/").Id("D").Op("-").Id("dm").Op("*").Id("dm"), jen.Lit(0)),
		jen.Id("m").Op(":=").Id("m0").Op("+").Id("dm"),
		jen.Id("r").Op(":=").Lit(1).Op("/").Float32().Call(
			jen.Qual("math", "Sqrt").Call(jen.Float64().Call(jen.Id("v").Op("+").Id("eps")))),
		jen.List(jen.Id("mu").Index(jen.Id("i")), jen.Id("rs").Index(jen.Id("i"))).Op("=").List(jen.Id("m"), jen.Id("r")),
		jen.Id("yr").Op(":=").Add(dRow("y")),
	)
	row = append(row, rowPass(cfg.D, []string{"xr", "yr", "gamma", "beta"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{at("yr").Op("=").Parens(at("xr").Op("-").Id("m0").Op("-").Id("dm")).Op("*").Id("r").Op("*").Add(at("gamma")).Op("+").Add(at("beta"))}
	})...)
	funcDecl(f, op, fmt.Sprintf("%s is the LayerNorm forward over t rows of D = %d floats\n"+
		"(kernels.LayerNormFunc, overwrite): per row the mean in %d float32 accumulators,\n"+
		"then the sums of d = x − mean and d², which correct the mean and give the\n"+
		"centred variance, then y = (x − mu)·rs·gamma + beta with x − mu formed\n"+
		"as (x − mean) − correction.", Name(op), cfg.D, rowUnroll),
		lnConst(cfg, true),
		jen.List(jen.Id("gamma"), jen.Id("beta")).Op("=").List(dWin("gamma"), dWin("beta")),
		jen.List(jen.Id("mu"), jen.Id("rs")).Op("=").List(jen.Id("mu").Index(jen.Empty(), jen.Id("t")), jen.Id("rs").Index(jen.Empty(), jen.Id("t"))),
		forRows(row...),
	)
}

// emitLayerNormBack emits the LayerNorm input gradient: per row, the sums
// of g = dy·gamma and g·x̂ in rowUnroll accumulators each, then
// dx += rs·(g − mean(g) − x̂·mean(g·x̂)).
func emitLayerNormBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	xhat := func(at func(string) *jen.Statement) *jen.Statement {
		return jen.Parens(jen.Parens(at("xr").Op("-").Id("m")).Op("*").Id("r"))
	}
	row := []jen.Code{
		jen.Id("xr").Op(":=").Add(dRow("x")),
		jen.Id("dyr").Op(":=").Add(dRow("dy")),
		jen.List(jen.Id("m"), jen.Id("r")).Op(":=").List(jen.Id("mu").Index(jen.Id("i")), jen.Id("rs").Index(jen.Id("i"))),
		declNamed("s", rowUnroll),
		declNamed("h", rowUnroll),
	}
	row = append(row, rowPass(cfg.D, []string{"xr", "dyr", "gamma"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{
			named("g", k).Op(":=").Add(at("dyr")).Op("*").Add(at("gamma")),
			named("s", k).Op("+=").Add(named("g", k)),
			named("h", k).Op("+=").Add(named("g", k)).Op("*").Add(xhat(at)),
		}
	})...)
	row = append(row,
		jen.Id("mg").Op(":=").Parens(rowSum("s")).Op("/").Id("D"),
		jen.Id("mgx").Op(":=").Parens(rowSum("h")).Op("/").Id("D"),
		jen.Id("dxr").Op(":=").Add(dRow("dx")),
	)
	row = append(row, rowPass(cfg.D, []string{"xr", "dyr", "gamma", "dxr"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{at("dxr").Op("+=").Id("r").Op("*").Parens(
			at("dyr").Op("*").Add(at("gamma")).Op("-").Id("mg").Op("-").Add(xhat(at)).Op("*").Id("mgx"))}
	})...)
	funcDecl(f, op, fmt.Sprintf("%s is the LayerNorm input gradient over t rows of D = %d floats\n"+
		"(kernels.LayerNormBackFunc, accumulate): per row the sums of g = dy·gamma and\n"+
		"g·x̂ in %d float32 accumulators each, then dx += rs·(g − mean g − x̂·mean g·x̂).",
		Name(op), cfg.D, rowUnroll),
		lnConst(cfg, false),
		jen.Id("gamma").Op("=").Add(dWin("gamma")),
		jen.List(jen.Id("mu"), jen.Id("rs")).Op("=").List(jen.Id("mu").Index(jen.Empty(), jen.Id("t")), jen.Id("rs").Index(jen.Empty(), jen.Id("t"))),
		forRows(row...),
	)
}

// emitLayerNormGrad emits the LayerNorm parameter gradients: one
// accumulator per column (the arrays sg and sb), rows in order, added to
// dgamma and dbeta at the end.
func emitLayerNormGrad(f *jen.File, op catalog.Op, cfg catalog.Config) {
	row := []jen.Code{
		jen.Id("xr").Op(":=").Add(dRow("x")),
		jen.Id("dyr").Op(":=").Add(dRow("dy")),
		jen.List(jen.Id("m"), jen.Id("r")).Op(":=").List(jen.Id("mu").Index(jen.Id("i")), jen.Id("rs").Index(jen.Id("i"))),
		jen.List(jen.Id("sgw"), jen.Id("sbw")).Op(":=").List(dWin("sg"), dWin("sb")),
	}
	row = append(row, rowPass(cfg.D, []string{"xr", "dyr", "sgw", "sbw"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{
			at("sgw").Op("+=").Add(at("dyr")).Op("*").Parens(jen.Parens(at("xr").Op("-").Id("m")).Op("*").Id("r")),
			at("sbw").Op("+=").Add(at("dyr")),
		}
	})...)
	var add []jen.Code
	add = append(add, jen.List(jen.Id("dgw"), jen.Id("dbw"), jen.Id("sgw"), jen.Id("sbw")).Op(":=").List(
		dWin("dgamma"), dWin("dbeta"), dWin("sg"), dWin("sb")))
	add = append(add, rowPass(cfg.D, []string{"dgw", "dbw", "sgw", "sbw"}, func(k int, at func(string) *jen.Statement) []jen.Code {
		return []jen.Code{at("dgw").Op("+=").Add(at("sgw")), at("dbw").Op("+=").Add(at("sbw"))}
	})...)
	body := []jen.Code{
		lnConst(cfg, false),
		jen.List(jen.Id("mu"), jen.Id("rs")).Op("=").List(jen.Id("mu").Index(jen.Empty(), jen.Id("t")), jen.Id("rs").Index(jen.Empty(), jen.Id("t"))),
		jen.Var().List(jen.Id("sg"), jen.Id("sb")).Index(jen.Id("D")).Float32(),
		forRows(row...),
	}
	funcDecl(f, op, fmt.Sprintf("%s is the LayerNorm parameter gradient over t rows of D = %d\n"+
		"floats (kernels.LayerNormGradFunc, accumulate): one float32 accumulator per\n"+
		"column, rows in order from 0, added to dgamma and dbeta once.", Name(op), cfg.D),
		append(body, add...)...,
	)
}

// The coefficients of Eigen's rational tanh (generic_fast_tanh_float) and
// the GELU's constants, as runtime/kernels.GeluFunc states them.
var geluConsts = []struct {
	name string
	val  float64
}{
	{"geluC", 0.7978845608028654}, // √(2/π)
	{"geluA", 0.044715},
	{"tanhClamp", 7.90531110763549805}, // |z| beyond which the rational tanh is ±1
	{"tanhA1", 4.89352455891786e-03},
	{"tanhA3", 6.37261928875436e-04},
	{"tanhA5", 1.48572235717979e-05},
	{"tanhA7", 5.12229709037114e-08},
	{"tanhA9", -8.60467152213735e-11},
	{"tanhA11", 2.00018790482477e-13},
	{"tanhA13", -2.76076847742355e-16},
	{"tanhB0", 4.89352518554385e-03},
	{"tanhB2", 2.26843463243900e-03},
	{"tanhB4", 1.18534705686654e-04},
	{"tanhB6", 1.19825839466702e-06},
}

// geluUnroll is how many elements the GELU loop interleaves: the rational
// tanh is a chain of dependent operations, latency-bound one at a time.
const geluUnroll = 4

// geluStages are the GELU of one element as stages of statements on
// names suffixed by k, x being the element's value: the stages of the
// geluUnroll elements are interleaved.
func geluStages(k int, x jen.Code) [][]jen.Code {
	v := func(p string) *jen.Statement { return named(p, k) }
	st := func(codes ...jen.Code) []jen.Code { return codes }
	return [][]jen.Code{
		st(v("x").Op(":=").Add(x)),
		st(v("s").Op(":=").Add(v("x")).Op("*").Add(v("x"))),
		st(v("z").Op(":=").Min(jen.Max(jen.Id("geluC").Op("*").Parens(v("x").Op("+").Id("geluA").Op("*").Add(v("s")).Op("*").Add(v("x"))),
			jen.Op("-").Id("tanhClamp")), jen.Id("tanhClamp"))),
		st(v("w").Op(":=").Add(v("z")).Op("*").Add(v("z"))),
		st(v("p").Op(":=").Add(v("w")).Op("*").Id("tanhA13").Op("+").Id("tanhA11"),
			v("q").Op(":=").Add(v("w")).Op("*").Id("tanhB6").Op("+").Id("tanhB4")),
		st(v("p").Op("=").Add(v("w")).Op("*").Add(v("p")).Op("+").Id("tanhA9"),
			v("q").Op("=").Add(v("w")).Op("*").Add(v("q")).Op("+").Id("tanhB2")),
		st(v("p").Op("=").Add(v("w")).Op("*").Add(v("p")).Op("+").Id("tanhA7"),
			v("q").Op("=").Add(v("w")).Op("*").Add(v("q")).Op("+").Id("tanhB0")),
		st(v("p").Op("=").Add(v("w")).Op("*").Add(v("p")).Op("+").Id("tanhA5")),
		st(v("p").Op("=").Add(v("w")).Op("*").Add(v("p")).Op("+").Id("tanhA3")),
		st(v("p").Op("=").Add(v("w")).Op("*").Add(v("p")).Op("+").Id("tanhA1")),
		st(v("h").Op(":=").Add(v("z")).Op("*").Add(v("p")).Op("/").Add(v("q"))), // tanh z
	}
}

// geluStore is the stores of element k: g = 0.5·x·(1 + h), and u = gelu'(x).
func geluStore(k int, gAt, uAt jen.Code) []jen.Code {
	v := func(p string) *jen.Statement { return named(p, k) }
	return []jen.Code{
		jen.Add(gAt).Op("=").Lit(0.5).Op("*").Add(v("x")).Op("*").Parens(jen.Lit(1).Op("+").Add(v("h"))),
		jen.Add(uAt).Op("=").Lit(0.5).Op("*").Parens(jen.Lit(1).Op("+").Add(v("h"))).Op("+").
			Lit(0.5).Op("*").Add(v("x")).Op("*").Parens(jen.Lit(1).Op("-").Add(v("h")).Op("*").Add(v("h"))).Op("*").Id("geluC").Op("*").
			Parens(jen.Lit(1).Op("+").Lit(3).Op("*").Id("geluA").Op("*").Add(v("s"))),
	}
}

func elemConst(cfg catalog.Config) jen.Code {
	return constBlock(size{"FFN", cfg.FFN, "row length and row stride"})
}

// emitGelu emits the GELU forward with its derivative, geluUnroll elements
// at a time with their operations interleaved, then one at a time; every
// element goes through the same operations, so its results do not depend
// on its position.
func emitGelu(f *jen.File, op catalog.Op, cfg catalog.Config) {
	consts := []jen.Code{jen.Id("FFN").Op("=").Lit(cfg.FFN).Comment("row length and row stride")}
	for _, c := range geluConsts {
		consts = append(consts, jen.Id(c.name).Op("=").Lit(c.val))
	}
	var quad []jen.Code
	quad = append(quad,
		jen.Id("uq").Op(":=").Add(win("u", idx("i"), jen.Lit(geluUnroll))),
		jen.Id("gq").Op(":=").Add(win("g", idx("i"), jen.Lit(geluUnroll))),
	)
	stages := make([][][]jen.Code, geluUnroll)
	for k := range stages {
		stages[k] = geluStages(k, at("uq", k))
	}
	for s := range stages[0] {
		for k := range stages {
			quad = append(quad, stages[k][s]...)
		}
	}
	for k := 0; k < geluUnroll; k++ {
		quad = append(quad, geluStore(k, at("gq", k), at("uq", k))...)
	}
	var one []jen.Code
	for _, s := range geluStages(0, jen.Id("u").Index(jen.Id("i"))) {
		one = append(one, s...)
	}
	one = append(one, geluStore(0, jen.Id("g").Index(jen.Id("i")), jen.Id("u").Index(jen.Id("i")))...)
	funcDecl(f, op, fmt.Sprintf("%s is the GELU (tanh form, Eigen's rational tanh) of the t·FFN\n"+
		"floats of u into g, leaving gelu'(u) in u (kernels.GeluFunc); FFN = %d.", Name(op), cfg.FFN),
		jen.Const().Defs(consts...),
		jen.Id("n").Op(":=").Id("t").Op("*").Id("FFN"),
		jen.List(jen.Id("u"), jen.Id("g")).Op("=").List(jen.Id("u").Index(jen.Empty(), jen.Id("n")), jen.Id("g").Index(jen.Empty(), jen.Id("n"))),
		jen.Id("i").Op(":=").Lit(0),
		jen.For(jen.Empty(), jen.Id("i").Op("+").Lit(geluUnroll).Op("<=").Id("n"), jen.Id("i").Op("+=").Lit(geluUnroll)).Block(quad...),
		jen.For(jen.Empty(), jen.Id("i").Op("<").Id("n"), jen.Id("i").Op("++")).Block(one...),
	)
}

// emitGeluBack emits a ← a·b over the t·FFN floats, unrolled by four.
func emitGeluBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	const unroll = 4
	quad := []jen.Code{
		jen.Id("aq").Op(":=").Add(win("a", idx("i"), jen.Lit(unroll))),
		jen.Id("bq").Op(":=").Add(win("b", idx("i"), jen.Lit(unroll))),
	}
	for k := 0; k < unroll; k++ {
		quad = append(quad, at("aq", k).Op("*=").Add(at("bq", k)))
	}
	funcDecl(f, op, fmt.Sprintf("%s multiplies the t·FFN floats of a by those of b\n"+
		"(kernels.GeluBackFunc); FFN = %d.", Name(op), cfg.FFN),
		elemConst(cfg),
		jen.Id("n").Op(":=").Id("t").Op("*").Id("FFN"),
		jen.List(jen.Id("a"), jen.Id("b")).Op("=").List(jen.Id("a").Index(jen.Empty(), jen.Id("n")), jen.Id("b").Index(jen.Empty(), jen.Id("n"))),
		jen.Id("i").Op(":=").Lit(0),
		jen.For(jen.Empty(), jen.Id("i").Op("+").Lit(unroll).Op("<=").Id("n"), jen.Id("i").Op("+=").Lit(unroll)).Block(quad...),
		jen.For(jen.Empty(), jen.Id("i").Op("<").Id("n"), jen.Id("i").Op("++")).Block(
			jen.Id("a").Index(jen.Id("i")).Op("*=").Id("b").Index(jen.Id("i"))),
	)
}
