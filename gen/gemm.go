package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The GEMM micro-kernel (catalog.GemmTile) has run-time sizes and a tile
// shape that depends on the level, so its length checks and wrappers are
// written here rather than from catalog shapes.

// gemmShapeName is the function returning the GEMM tile shape at level isa.
func gemmShapeName(isa kernels.ISA) string { return "gemmShape" + isaConst(isa) }

// gemmCheck emits checkGemmTile: it panics unless the arguments fit the
// contract of kernels.GemmTileFunc for tiles of mrMax×nrMax: every
// element the kernel reads (the whole mrMax×kc block of A of each of the
// ⌈mr/mrMax⌉ tiles, at least one, at steps of at, and the kc×nrMax block
// of B) and writes (the mr×nr corner of c, and the copies of A's and B's
// blocks when asked for) is inside its slice.
func gemmCheck(f *jen.File, specName string, op catalog.Op) {
	id := jen.Id
	msg := func(format string, args ...jen.Code) jen.Code {
		return jen.Panic(jen.Qual("fmt", "Sprintf").Call(append([]jen.Code{jen.Lit(specName + "." + op.Field + ": " + format)}, args...)...))
	}
	f.Commentf("%s panics unless the arguments fit %s's contract for tiles of mrMax×nrMax.", checkName(op), op.Field)
	f.Func().Id(checkName(op)).Params(
		jen.List(id("mrMax"), id("nrMax"), id("kc")).Int(), id("a").Index().Float32(), jen.List(id("ai"), id("ap"), id("at")).Int(),
		id("b").Index().Float32(), id("bp").Int(), id("c").Index().Float32(), jen.List(id("ldc"), id("mr"), id("nr")).Int(),
		jen.List(id("bias"), id("asum"), id("apack"), id("bpack")).Index().Float32(),
	).Block(
		jen.If(id("kc").Op("<").Lit(0).Op("||").Id("mr").Op("<").Lit(0).
			Op("||").Id("nr").Op("<").Lit(0).Op("||").Id("nr").Op(">").Id("nrMax").Op("||").Id("ldc").Op("<").Id("nr")).Block(
			msg("kc = %d, mr = %d, nr = %d, ldc = %d, want kc ≥ 0, mr ≥ 0, 0 ≤ nr ≤ %d, ldc ≥ nr", id("kc"), id("mr"), id("nr"), id("ldc"), id("nrMax")),
		),
		jen.If(id("ai").Op("<").Lit(0).Op("||").Id("ap").Op("<").Lit(0).Op("||").Id("at").Op("<").Lit(0).Op("||").Id("bp").Op("<").Lit(0)).Block(
			msg("strides ai = %d, ap = %d, at = %d, bp = %d, want ≥ 0", id("ai"), id("ap"), id("at"), id("bp"))),
		jen.Comment("The tiles of mrMax rows the kernel runs (one, for copies, if mr is 0)."),
		id("tiles").Op(":=").Max(jen.Lit(1), jen.Parens(id("mr").Op("+").Id("mrMax").Op("-").Lit(1)).Op("/").Id("mrMax")),
		id("aNeed").Op(":=").Parens(id("tiles").Op("-").Lit(1)).Op("*").Id("at").Op("+").Parens(id("mrMax").Op("-").Lit(1)).Op("*").Id("ai").Op("+").Parens(id("kc").Op("-").Lit(1)).Op("*").Id("ap").Op("+").Lit(1),
		jen.If(id("kc").Op(">").Lit(0).Op("&&").Len(id("a")).Op("<").Id("aNeed")).Block(
			msg("len(a) = %d, need %d", jen.Len(id("a")), id("aNeed"))),
		jen.If(id("kc").Op(">").Lit(0).Op("&&").Len(id("b")).Op("<").Parens(id("kc").Op("-").Lit(1)).Op("*").Id("bp").Op("+").Id("nrMax")).Block(
			msg("len(b) = %d, need %d", jen.Len(id("b")), jen.Parens(id("kc").Op("-").Lit(1)).Op("*").Id("bp").Op("+").Id("nrMax"))),
		jen.If(jen.Len(id("asum")).Op("!=").Lit(0).Op("&&").Parens(id("ai").Op("!=").Lit(1).Op("||").Len(id("asum")).Op("<").Id("mr"))).Block(
			msg("len(asum) = %d with ai = %d, want 0, or ≥ mr = %d with ai = 1", jen.Len(id("asum")), id("ai"), id("mr"))),
		jen.If(jen.Len(id("apack")).Op("!=").Lit(0).Op("&&").Parens(id("ai").Op("!=").Lit(1).Op("||").Len(id("apack")).Op("<").Id("tiles").Op("*").Id("kc").Op("*").Id("mrMax"))).Block(
			msg("len(apack) = %d with ai = %d, want 0, or ≥ kc·MR per tile = %d with ai = 1", jen.Len(id("apack")), id("ai"), id("tiles").Op("*").Id("kc").Op("*").Id("mrMax"))),
		jen.If(jen.Len(id("bpack")).Op("!=").Lit(0).Op("&&").Len(id("bpack")).Op("<").Id("kc").Op("*").Id("nrMax")).Block(
			msg("len(bpack) = %d, want 0 or ≥ kc·NR = %d", jen.Len(id("bpack")), id("kc").Op("*").Id("nrMax"))),
		jen.If(jen.Len(id("bias")).Op("!=").Lit(0).Op("&&").Len(id("bias")).Op("<").Id("nr")).Block(
			msg("len(bias) = %d, want 0 or ≥ nr = %d", jen.Len(id("bias")), id("nr"))),
		jen.If(id("mr").Op(">").Lit(0).Op("&&").Len(id("c")).Op("<").Parens(id("mr").Op("-").Lit(1)).Op("*").Id("ldc").Op("+").Id("nr")).Block(
			msg("len(c) = %d, need %d", jen.Len(id("c")), jen.Parens(id("mr").Op("-").Lit(1)).Op("*").Id("ldc").Op("+").Id("nr"))),
	)
}

// gemmWrapper emits the checked entry point of the GEMM micro-kernel at
// level isa, calling impl, and the level's shape function.
func gemmWrapper(f *jen.File, op catalog.Op, isa kernels.ISA, impl string) {
	mr, nr := catalog.GemmShape(isa)
	id := jen.Id
	args := []jen.Code{id("kc"), id("a"), id("ai"), id("ap"), id("at"), id("b"), id("bp"), id("c"), id("ldc"), id("mr"), id("nr"), id("bias"), id("asum"), id("apack"), id("bpack")}
	f.Func().Id(wrapperName(op, isa)).Params(
		id("kc").Int(), id("a").Index().Float32(), jen.List(id("ai"), id("ap"), id("at")).Int(),
		id("b").Index().Float32(), id("bp").Int(), id("c").Index().Float32(), jen.List(id("ldc"), id("mr"), id("nr")).Int(),
		jen.List(id("bias"), id("asum"), id("apack"), id("bpack")).Index().Float32(), id("overwrite").Bool(),
	).Block(
		id(checkName(op)).Call(append([]jen.Code{jen.Lit(mr), jen.Lit(nr)}, args...)...),
		jen.Comment("Nothing to write: no tile, no row sums, no copies."),
		jen.If(jen.Parens(id("mr").Op("==").Lit(0).Op("||").Id("nr").Op("==").Lit(0).Op("&&").Len(id("asum")).Op("==").Lit(0)).
			Op("&&").Parens(id("kc").Op("==").Lit(0).Op("||").Len(id("apack")).Op("+").Len(id("bpack")).Op("==").Lit(0))).Block(jen.Return()),
		id(impl).Call(append(args, id("overwrite"))...),
	)
	f.Comment(fmt.Sprintf("%s returns the %s GemmTile's tile shape.", gemmShapeName(isa), isa))
	f.Func().Id(gemmShapeName(isa)).Params().Params(jen.List(id("mr"), id("nr")).Int()).Block(
		jen.Return(jen.Lit(mr), jen.Lit(nr)),
	)
}
