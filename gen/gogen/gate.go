package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// emitGate emits the σ(Q) gate (kernels.GateFunc) over t consecutive
// floats: σ = 1/(1 + e^min(−q, 88)) in float64 (expNeg's exp, valid above
// 0 too, up to the clamp) rounded once to float32, then y = σ·z.
func emitGate(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	block := append([]jen.Code{}, expNeg("ev", id("v"))...)
	block = append(block, id("e").Op("=").Id("ev"))
	f.Comment(fmt.Sprintf("%s replaces the t floats of q by σ(q) = 1/(1 + e^min(−q, 88)) and sets y = σ(q)·z (kernels.GateFunc).", Name(op)))
	f.Func().Id(Name(op)).Params(id("t").Int(), id("q"), id("z"), id("y").Index().Float32()).Block(
		id("q").Op(",").Id("z").Op(",").Id("y").Op("=").Id("q").Index(jen.Empty(), id("t")).Op(",").
			Id("z").Index(jen.Empty(), id("t")).Op(",").Id("y").Index(jen.Empty(), id("t")),
		jen.For(id("i").Op(":=").Range().Id("q")).Block(
			id("v").Op(":=").Float64().Call(jen.Min(jen.Op("-").Id("q").Index(id("i")), jen.Lit(88))),
			jen.Var().Id("e").Float64(),
			jen.Block(block...),
			id("s").Op(":=").Float32().Call(jen.Lit(1).Op("/").Parens(jen.Lit(1).Op("+").Id("e"))),
			id("q").Index(id("i")).Op("=").Id("s"),
			id("y").Index(id("i")).Op("=").Id("s").Op("*").Id("z").Index(id("i")),
		),
	)
}

// emitGateBack emits the gate's backward (kernels.GateBackFunc) over t
// consecutive floats, its float32 products in the order the assembly
// repeats: dq = ((dy·z)·σ)·(1 − σ), dy = dy·σ.
func emitGateBack(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	f.Comment(fmt.Sprintf("%s sets dq = dy·z·σ·(1 − σ) and dy = dy·σ over t floats, σ = q (kernels.GateBackFunc).", Name(op)))
	f.Func().Id(Name(op)).Params(id("t").Int(), id("dy"), id("q"), id("z"), id("dq").Index().Float32()).Block(
		id("dy").Op(",").Id("q").Op(",").Id("z").Op(",").Id("dq").Op("=").Id("dy").Index(jen.Empty(), id("t")).Op(",").
			Id("q").Index(jen.Empty(), id("t")).Op(",").Id("z").Index(jen.Empty(), id("t")).Op(",").Id("dq").Index(jen.Empty(), id("t")),
		jen.For(id("i").Op(",").Id("g").Op(":=").Range().Id("dy")).Block(
			id("s").Op(":=").Id("q").Index(id("i")),
			id("dq").Index(id("i")).Op("=").Id("g").Op("*").Id("z").Index(id("i")).Op("*").Id("s").Op("*").Parens(jen.Lit(1).Op("-").Id("s")),
			id("dy").Index(id("i")).Op("=").Id("g").Op("*").Id("s"),
		),
	)
}
