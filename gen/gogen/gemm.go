package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// emitGemmTile emits the Go GEMM micro-kernel (kernels.GemmTileFunc) with
// the Go level's tile MR×NR: MR·NR scalar accumulators, one per output,
// summed over p in order and added to c at the end. A is read through its
// strides ai and ap, B's row p at b[p·bp:].
func emitGemmTile(f *jen.File, op catalog.Op, _ catalog.Config) {
	mr, nr := catalog.GemmShape(kernels.Go)
	id := jen.Id
	acc := func(i, j int) string { return fmt.Sprintf("c%d_%d", i, j) }
	var accs []jen.Code
	var fmas []jen.Code
	var rows []jen.Code
	for i := 0; i < mr; i++ {
		var row []jen.Code
		for j := 0; j < nr; j++ {
			accs = append(accs, id(acc(i, j)))
			row = append(row, id(acc(i, j)))
		}
		rows = append(rows, jen.Values(row...))
	}
	var loads []jen.Code
	for i := 0; i < mr; i++ {
		// a[p·ap + i·ai]: the row offsets i·ai are hoisted out of the loop.
		loads = append(loads, id(fmt.Sprintf("a%d", i)).Op(":=").Id("a").Index(id("pa").Op("+").Id(fmt.Sprintf("o%d", i))))
	}
	for j := 0; j < nr; j++ {
		loads = append(loads, id(fmt.Sprintf("b%d", j)).Op(":=").Id("bq").Index(jen.Lit(j)))
	}
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			fmas = append(fmas, id(acc(i, j)).Op("+=").Id(fmt.Sprintf("a%d", i)).Op("*").Id(fmt.Sprintf("b%d", j)))
		}
	}
	var offs []jen.Code
	for i := 0; i < mr; i++ {
		offs = append(offs, id(fmt.Sprintf("o%d", i)).Op(":=").Lit(i).Op("*").Id("ai"))
	}
	body := []jen.Code{
		jen.Const().Defs(
			id("MR").Op("=").Lit(mr).Comment("rows of A read"),
			id("NR").Op("=").Lit(nr).Comment("columns of B read"),
		),
		jen.Var().List(accs...).Float32(),
		jen.If(jen.Len(id("asum")).Op("!=").Lit(0)).Block(
			jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("mr"), id("i").Op("++")).Block(
				id("s").Op(":=").Float32().Call(jen.Lit(0)),
				jen.For(id("p").Op(":=").Lit(0), id("p").Op("<").Id("kc"), id("p").Op("++")).Block(
					id("s").Op("+=").Id("a").Index(id("i").Op("+").Id("p").Op("*").Id("ap")),
				),
				id("asum").Index(id("i")).Op("+=").Id("s"),
			),
		),
	}
	body = append(body, offs...)
	body = append(body,
		jen.For(id("p").Op(":=").Lit(0), id("p").Op("<").Id("kc"), id("p").Op("++")).Block(
			append([]jen.Code{
				id("pa").Op(":=").Id("p").Op("*").Id("ap"),
				id("bq").Op(":=").Id("b").Index(id("p").Op("*").Id("bp"), id("p").Op("*").Id("bp").Op("+").Id("NR"), id("p").Op("*").Id("bp").Op("+").Id("NR")),
			}, append(loads, fmas...)...)...,
		),
		jen.If(jen.Len(id("apack")).Op("!=").Lit(0)).Block(
			jen.For(id("p").Op(":=").Lit(0), id("p").Op("<").Id("kc"), id("p").Op("++")).Block(
				jen.Copy(id("apack").Index(id("p").Op("*").Id("MR"), id("p").Op("*").Id("MR").Op("+").Id("MR")), id("a").Index(id("p").Op("*").Id("ap"), id("p").Op("*").Id("ap").Op("+").Id("MR"))),
			),
		),
		jen.If(jen.Len(id("bpack")).Op("!=").Lit(0)).Block(
			jen.For(id("p").Op(":=").Lit(0), id("p").Op("<").Id("kc"), id("p").Op("++")).Block(
				jen.Copy(id("bpack").Index(id("p").Op("*").Id("NR"), id("p").Op("*").Id("NR").Op("+").Id("NR")), id("b").Index(id("p").Op("*").Id("bp"), id("p").Op("*").Id("bp").Op("+").Id("NR"))),
			),
		),
		id("tile").Op(":=").Index(id("MR")).Index(id("NR")).Float32().Values(rows...),
		jen.If(jen.Len(id("bias")).Op("!=").Lit(0)).Block(
			jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("mr"), id("i").Op("++")).Block(
				jen.For(jen.List(id("j"), id("v")).Op(":=").Range().Id("bias").Index(jen.Empty(), id("nr"))).Block(
					id("tile").Index(id("i")).Index(id("j")).Op("+=").Id("v"),
				),
			),
		),
		jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("mr"), id("i").Op("++")).Block(
			id("row").Op(":=").Id("c").Index(id("i").Op("*").Id("ldc"), id("i").Op("*").Id("ldc").Op("+").Id("nr")),
			jen.If(id("overwrite")).Block(
				jen.Copy(id("row"), id("tile").Index(id("i")).Index(jen.Empty(), id("nr"))),
				jen.Continue(),
			),
			jen.For(jen.List(id("j"), id("v")).Op(":=").Range().Id("tile").Index(id("i")).Index(jen.Empty(), id("nr"))).Block(
				id("row").Index(id("j")).Op("+=").Id("v"),
			),
		),
	)
	params := func() *jen.Statement {
		return jen.Params(
			id("kc").Int(), id("a").Index().Float32(), jen.List(id("ai"), id("ap"), id("at")).Int(),
			id("b").Index().Float32(), id("bp").Int(), id("c").Index().Float32(), jen.List(id("ldc"), id("mr"), id("nr")).Int(),
			jen.List(id("bias"), id("asum"), id("apack"), id("bpack")).Index().Float32(), id("overwrite").Bool(),
		)
	}
	one := Name(op) + "One"
	f.Comment(fmt.Sprintf(`%s is the GEMM micro-kernel (kernels.GemmTileFunc) with an %d×%d tile:
it runs %s on each tile of %d rows in turn (one, if mr is 0), moving A
on by at, and c, asum and apack by a tile; a B copied by the first tile is
read from its copy by the others.`, Name(op), mr, nr, one, mr))
	f.Func().Id(Name(op)).Add(params()).Block(
		jen.Const().Defs(
			id("MR").Op("=").Lit(mr),
			id("NR").Op("=").Lit(nr),
		),
		jen.For(id("r").Op(":=").Lit(0), id("r").Op("==").Lit(0).Op("||").Id("r").Op("<").Id("mr"), id("r").Op("+=").Id("MR")).Block(
			jen.Var().List(id("ta"), id("ct"), id("as"), id("apk")).Index().Float32(),
			jen.If(id("kc").Op(">").Lit(0)).Block(id("ta").Op("=").Id("a").Index(id("r").Op("/").Id("MR").Op("*").Id("at"), jen.Empty())),
			id("rows").Op(":=").Min(id("MR"), id("mr").Op("-").Id("r")),
			jen.If(id("rows").Op(">").Lit(0)).Block(id("ct").Op("=").Id("c").Index(id("r").Op("*").Id("ldc"), jen.Empty())),
			jen.If(jen.Len(id("asum")).Op("!=").Lit(0)).Block(id("as").Op("=").Id("asum").Index(id("r"), jen.Empty())),
			jen.If(jen.Len(id("apack")).Op("!=").Lit(0)).Block(id("apk").Op("=").Id("apack").Index(id("r").Op("*").Id("kc"), jen.Empty())),
			id(one).Call(id("kc"), id("ta"), id("ai"), id("ap"), id("at"), id("b"), id("bp"), id("ct"), id("ldc"), id("rows"), id("nr"),
				id("bias"), id("as"), id("apk"), id("bpack"), id("overwrite")),
			jen.If(jen.Len(id("bpack")).Op("!=").Lit(0)).Block(
				jen.List(id("b"), id("bp"), id("bpack")).Op("=").List(id("bpack"), id("NR"), jen.Nil()),
			),
		),
	)
	f.Comment(fmt.Sprintf(`%s is one tile of %s: for i < mr ≤ %d and j < nr ≤ %d,
s = Σ_{p<kc} a[i·ai + p·ap] · b[p·bp + j] (+ bias[j])

	c[i·ldc+j] = s (overwrite) or c[i·ldc+j] += s

and, when asum is not empty (ai = 1), asum[i] += Σ_{p<kc} a[i + p·ap]; when
apack (ai = 1) or bpack is not empty, it also copies A's or B's block
into it as a packed panel (ap MR, bp NR).`, one, Name(op), mr, nr))
	f.Func().Id(one).Add(params()).Block(body...)
}
