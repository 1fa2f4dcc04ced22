package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// emitGemv emits the decoder's linear layer on t rows (kernels.GemvFunc):
// per row of x, per column block of the packed weight, the block's sums
// over each GemvKC run of the inner index in an accumulator array (one
// entry per column, p in increasing order), added into the row of y.
func emitGemv(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	doc := fmt.Sprintf(`%s is a linear layer on t rows (kernels.GemvFunc) for K = %d, N = %d:
y[r·N+j] = Σ_p x[r·K+p]·W(j, p) (+ bias[j]), W packed in column blocks of %d.`, Name(op), op.GK, op.GN, kernels.GemvCols)
	funcDecl(f, op, doc,
		constBlock(
			size{"K", op.GK, "inner size"},
			size{"N", op.GN, "output width"},
			size{"C", kernels.GemvCols, "columns of a block of w"},
			size{"KC", kernels.GemvKC, "inner indices summed in one accumulator"},
		),
		id("w").Op("=").Id("w").Index(jen.Empty(), id("K").Op("*").Id("N")),
		id("hasBias").Op(":=").Len(id("bias")).Op("!=").Lit(0),
		jen.Var().Id("acc").Index(id("C")).Float32(),
		jen.For(id("r").Op(":=").Lit(0), id("r").Op("<").Id("t"), id("r").Op("++")).Block(
			id("xr").Op(":=").Id("x").Index(id("r").Op("*").Id("K"), id("r").Op("*").Id("K").Op("+").Id("K")),
			id("yr").Op(":=").Id("y").Index(id("r").Op("*").Id("N"), id("r").Op("*").Id("N").Op("+").Id("N")),
			jen.For(id("j0").Op(":=").Lit(0), id("j0").Op("<").Id("N"), id("j0").Op("+=").Id("C")).Block(
				id("cols").Op(":=").Min(id("C"), id("N").Op("-").Id("j0")),
				id("blk").Op(":=").Id("w").Index(id("j0").Op("*").Id("K"), id("j0").Op("*").Id("K").Op("+").Id("cols").Op("*").Id("K")),
				id("yb").Op(":=").Id("yr").Index(id("j0"), id("j0").Op("+").Id("cols")),
				id("a").Op(":=").Id("acc").Index(jen.Empty(), id("cols")),
				jen.For(id("p0").Op(":=").Lit(0), id("p0").Op("<").Id("K"), id("p0").Op("+=").Id("KC")).Block(
					jen.Clear(id("a")),
					jen.For(id("p").Op(":=").Id("p0"), id("p").Op("<").Min(id("p0").Op("+").Id("KC"), id("K")), id("p").Op("++")).Block(
						id("xp").Op(":=").Id("xr").Index(id("p")),
						id("wr").Op(":=").Id("blk").Index(id("p").Op("*").Id("cols"), id("p").Op("*").Id("cols").Op("+").Id("cols")),
						id("wr").Op("=").Id("wr").Index(jen.Empty(), jen.Len(id("a"))),
						jen.For(jen.List(id("j"), id("wv")).Op(":=").Range().Id("wr")).Block(
							id("a").Index(id("j")).Op("+=").Id("xp").Op("*").Id("wv"),
						),
					),
					jen.If(id("p0").Op("==").Lit(0)).Block(
						jen.Copy(id("yb"), id("a")),
					).Else().Block(
						jen.For(jen.List(id("j"), id("s")).Op(":=").Range().Id("a")).Block(
							id("yb").Index(id("j")).Op("+=").Id("s"),
						),
					),
				),
				jen.If(id("hasBias")).Block(
					id("bb").Op(":=").Id("bias").Index(id("j0"), id("j0").Op("+").Len(id("yb"))),
					jen.For(jen.List(id("j"), id("b")).Op(":=").Range().Id("bb")).Block(
						id("yb").Index(id("j")).Op("+=").Id("b"),
					),
				),
			),
		),
	)
}
