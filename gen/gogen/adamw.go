package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// emitAdamW emits the optimizer's update (kernels.AdamWFunc) over t
// consecutive floats, in float32.
func emitAdamW(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	f.Comment(fmt.Sprintf(`%s is the AdamW update of t parameters (kernels.AdamWFunc), in float32:
with g' = g·gscale, m ← b1·m + c1·g', v ← b2·v + c2·g'², p ← p·decay − step·m/(√v·rbc2 + eps).`, Name(op)))
	f.Func().Id(Name(op)).Params(
		id("t").Int(), jen.List(id("p"), id("g"), id("m"), id("v")).Index().Float32(),
		jen.List(id("decay"), id("gscale"), id("b1"), id("c1"), id("b2"), id("c2"), id("eps"), id("step"), id("rbc2")).Float32(),
	).Block(
		id("p").Op(",").Id("g").Op(",").Id("m").Op(",").Id("v").Op("=").
			Id("p").Index(jen.Empty(), id("t")).Op(",").Id("g").Index(jen.Empty(), id("t")).Op(",").
			Id("m").Index(jen.Empty(), id("t")).Op(",").Id("v").Index(jen.Empty(), id("t")),
		jen.For(id("i").Op(":=").Range().Id("p")).Block(
			id("gi").Op(":=").Id("g").Index(id("i")).Op("*").Id("gscale"),
			id("mi").Op(":=").Id("b1").Op("*").Id("m").Index(id("i")).Op("+").Id("c1").Op("*").Id("gi"),
			id("vi").Op(":=").Id("b2").Op("*").Id("v").Index(id("i")).Op("+").Id("c2").Op("*").Parens(id("gi").Op("*").Id("gi")),
			id("m").Index(id("i")).Op(",").Id("v").Index(id("i")).Op("=").Id("mi").Op(",").Id("vi"),
			id("den").Op(":=").Float32().Call(jen.Qual("math", "Sqrt").Call(jen.Float64().Call(id("vi")))).Op("*").Id("rbc2").Op("+").Id("eps"),
			id("p").Index(id("i")).Op("=").Id("p").Index(id("i")).Op("*").Id("decay").Op("-").Id("step").Op("*").Id("mi").Op("/").Id("den"),
		),
	)
}
