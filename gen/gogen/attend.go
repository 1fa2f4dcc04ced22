package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// emitAttend emits the decoder's attention row (kernels.AttendFunc): the
// logits' maximum, e_j = e^(b[j] − max) in place (expNeg, the softmax
// kernels' exponential) and their sum s, then Σ e_j·v_j over the t rows in
// an accumulator array (j in increasing order), scaled by 1/s into y.
func emitAttend(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	doc := fmt.Sprintf(`%s is the decoder's attention row over t cached rows %d wide (kernels.AttendFunc):
b[j] = e^(b[j] − max b), y = Σ_j b[j]·v_j / Σ_j b[j]; it returns Σ_j b[j].`, Name(op), op.AW)
	exp := append([]jen.Code{}, expNeg("y", jen.Float64().Call(id("b").Index(id("j")).Op("-").Id("m")))...)
	exp = append(exp, id("e").Op("=").Id("y"))
	funcDecl(f, op, doc,
		constBlock(size{"W", op.AW, "row width and stride of v"}),
		jen.If(id("t").Op("==").Lit(0)).Block(jen.Return(jen.Lit(0))),
		id("b").Op("=").Id("b").Index(jen.Empty(), id("t")),
		id("v").Op("=").Id("v").Index(jen.Empty(), id("t").Op("*").Id("W")),
		id("y").Op("=").Id("y").Index(jen.Empty(), id("W")),
		id("m").Op(":=").Id("b").Index(jen.Lit(0)),
		jen.For(jen.List(jen.Id("_"), id("x")).Op(":=").Range().Id("b")).Block(
			id("m").Op("=").Max(id("m"), id("x")),
		),
		jen.Var().Id("s").Float32(),
		jen.For(id("j").Op(":=").Range().Id("b")).Block(
			jen.Var().Id("e").Float64(),
			jen.Block(exp...),
			id("b").Index(id("j")).Op("=").Float32().Call(id("e")),
			id("s").Op("+=").Id("b").Index(id("j")),
		),
		jen.Var().Id("acc").Index(id("W")).Float32(),
		jen.For(jen.List(id("j"), id("e")).Op(":=").Range().Id("b")).Block(
			id("vr").Op(":=").Id("v").Index(id("j").Op("*").Id("W"), id("j").Op("*").Id("W").Op("+").Id("W")),
			jen.For(jen.List(id("c"), id("x")).Op(":=").Range().Id("vr")).Block(
				id("acc").Index(id("c")).Op("+=").Id("e").Op("*").Id("x"),
			),
		),
		id("inv").Op(":=").Lit(1).Op("/").Id("s"),
		jen.For(id("c").Op(":=").Range().Id("y")).Block(
			id("y").Index(id("c")).Op("=").Id("acc").Index(id("c")).Op("*").Id("inv"),
		),
		jen.Return(id("s")),
	)
}

// emitScores emits vanilla's logits of one query against t cached keys
// (kernels.ScoresFunc): per key row, the dot product with q (p in
// increasing order), scaled.
func emitScores(f *jen.File, op catalog.Op, cfg catalog.Config) {
	id := jen.Id
	doc := fmt.Sprintf(`%s is vanilla's logits of one query against t cached keys (kernels.ScoresFunc):
b[j] = scale·Σ_p q[p]·k[j·DH+p], DH = %d.`, Name(op), cfg.DH)
	funcDecl(f, op, doc,
		constBlock(size{"DH", cfg.DH, "head width"}),
		jen.If(id("t").Op("==").Lit(0)).Block(jen.Return()),
		id("q").Op("=").Id("q").Index(jen.Empty(), id("DH")),
		id("b").Op("=").Id("b").Index(jen.Empty(), id("t")),
		id("k").Op("=").Id("k").Index(jen.Empty(), id("t").Op("*").Id("DH")),
		jen.For(id("j").Op(":=").Range().Id("b")).Block(
			id("kr").Op(":=").Id("k").Index(id("j").Op("*").Id("DH"), id("j").Op("*").Id("DH").Op("+").Id("DH")),
			jen.Var().Id("s").Float32(),
			jen.For(jen.List(id("p"), id("x")).Op(":=").Range().Id("kr")).Block(
				id("s").Op("+=").Id("q").Index(id("p")).Op("*").Id("x"),
			),
			id("b").Index(id("j")).Op("=").Id("s").Op("*").Id("scale"),
		),
	)
}
