package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// emitExp emits the element-wise exponential (kernels.ExpFunc) over t
// consecutive floats: each clamped to 88, then expNeg's float64 exp
// (valid above 0 too, up to the clamp) rounded to float32.
func emitExp(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	block := append([]jen.Code{}, expNeg("y", id("v"))...)
	block = append(block, id("e").Op("=").Id("y"))
	f.Comment(fmt.Sprintf("%s replaces the t floats of x by e^min(x, 88) (kernels.ExpFunc).", Name(op)))
	f.Func().Id(Name(op)).Params(id("t").Int(), id("x").Index().Float32()).Block(
		jen.For(id("i").Op(":=").Range().Id("x").Index(jen.Empty(), id("t"))).Block(
			id("v").Op(":=").Float64().Call(jen.Min(id("x").Index(id("i")), jen.Lit(88))),
			jen.Var().Id("e").Float64(),
			jen.Block(block...),
			id("x").Index(id("i")).Op("=").Float32().Call(id("e")),
		),
	)
}
