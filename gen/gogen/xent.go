package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// The cross-entropy's row kernels over t rows of Vocab logits
// (kernels.SoftmaxStatsFunc, kernels.SoftmaxScaleFunc): the exponentials
// are expNeg's, in float64, and the sums are float64 too, rounded once.

func vocabConst(cfg catalog.Config) jen.Code {
	return jen.Const().Id("V").Op("=").Lit(cfg.Vocab).Comment("row length and row stride (the vocabulary)")
}

// emitSoftmaxStats emits the per-row max and Σ exp(x − max).
func emitSoftmaxStats(f *jen.File, op catalog.Op, cfg catalog.Config) {
	id := jen.Id
	f.Comment(fmt.Sprintf(`%s writes, for each of t rows of V = %d floats (kernels.SoftmaxStatsFunc),
mx[r] = max_c x[r·V+c] and s[r] = Σ_c exp(x[r·V+c] − mx[r]), summed in float64.`, Name(op), cfg.Vocab))
	f.Func().Id(Name(op)).Params(id("t").Int(), jen.List(id("x"), id("mx"), id("s")).Index().Float32()).Block(
		vocabConst(cfg),
		id("mx").Op(",").Id("s").Op("=").Id("mx").Index(jen.Empty(), id("t")).Op(",").Id("s").Index(jen.Empty(), id("t")),
		jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("t"), id("i").Op("++")).Block(
			id("xr").Op(":=").Id("x").Index(id("i").Op("*").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V")),
			id("m").Op(":=").Id("xr").Index(jen.Lit(0)),
			jen.For(jen.List(jen.Id("_"), id("v")).Op(":=").Range().Id("xr").Index(jen.Lit(1), jen.Empty())).Block(
				jen.If(id("v").Op(">").Id("m").Op("||").Id("v").Op("!=").Id("v")).Block(id("m").Op("=").Id("v")).Comment("a NaN sticks"),
			),
			id("sum").Op(":=").Lit(0.0),
			jen.For(jen.List(jen.Id("_"), id("v")).Op(":=").Range().Id("xr")).Block(
				append(expNeg("e", jen.Float64().Call(id("v")).Op("-").Float64().Call(id("m"))),
					id("sum").Op("+=").Id("e"))...,
			),
			id("mx").Index(id("i")).Op(",").Id("s").Index(id("i")).Op("=").Id("m").Op(",").Float32().Call(id("sum")),
		),
	)
}

// emitSoftmaxScale emits y = exp(x − lse)·scale per row.
func emitSoftmaxScale(f *jen.File, op catalog.Op, cfg catalog.Config) {
	id := jen.Id
	f.Comment(fmt.Sprintf(`%s writes, for each of t rows of V = %d floats (kernels.SoftmaxScaleFunc),
y[r·V+c] = exp(min(x[r·V+c] − lse[r], 0))·scale.`, Name(op), cfg.Vocab))
	f.Func().Id(Name(op)).Params(id("t").Int(), jen.List(id("x"), id("lse"), id("y")).Index().Float32(), id("scale").Float32()).Block(
		vocabConst(cfg),
		id("lse").Op("=").Id("lse").Index(jen.Empty(), id("t")),
		jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("t"), id("i").Op("++")).Block(
			id("xr").Op(":=").Id("x").Index(id("i").Op("*").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V")),
			id("yr").Op(":=").Id("y").Index(id("i").Op("*").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V"), id("i").Op("*").Id("V").Op("+").Id("V")),
			id("l").Op(":=").Float64().Call(id("lse").Index(id("i"))),
			jen.For(jen.List(id("c"), id("v")).Op(":=").Range().Id("xr")).Block(
				append(expNeg("e", jen.Min(jen.Float64().Call(id("v")).Op("-").Id("l"), jen.Lit(0.0))),
					id("yr").Index(id("c")).Op("=").Float32().Call(id("e")).Op("*").Id("scale"))...,
			),
		),
	)
}
