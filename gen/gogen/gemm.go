package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// emitGemmTile emits the Go GEMM micro-kernel (kernels.GemmTileFunc) with
// the Go level's tile MR×NR: MR·NR scalar accumulators, one per output,
// summed over p in order and added to c at the end.
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
		loads = append(loads, id(fmt.Sprintf("a%d", i)).Op(":=").Id("ap").Index(jen.Lit(i)))
	}
	for j := 0; j < nr; j++ {
		loads = append(loads, id(fmt.Sprintf("b%d", j)).Op(":=").Id("bp").Index(jen.Lit(j)))
	}
	for i := 0; i < mr; i++ {
		for j := 0; j < nr; j++ {
			fmas = append(fmas, id(acc(i, j)).Op("+=").Id(fmt.Sprintf("a%d", i)).Op("*").Id(fmt.Sprintf("b%d", j)))
		}
	}
	body := []jen.Code{
		jen.Const().Defs(
			id("MR").Op("=").Lit(mr).Comment("rows of an A panel"),
			id("NR").Op("=").Lit(nr).Comment("columns of a B panel"),
		),
		jen.Var().List(accs...).Float32(),
		id("a").Op("=").Id("a").Index(jen.Empty(), id("kc").Op("*").Id("MR")),
		id("b").Op("=").Id("b").Index(jen.Empty(), id("kc").Op("*").Id("NR")),
		jen.For(id("p").Op(":=").Lit(0), id("p").Op("<").Id("kc"), id("p").Op("++")).Block(
			append([]jen.Code{
				id("ap").Op(":=").Id("a").Index(id("p").Op("*").Id("MR"), id("p").Op("*").Id("MR").Op("+").Id("MR"), id("p").Op("*").Id("MR").Op("+").Id("MR")),
				id("bp").Op(":=").Id("b").Index(id("p").Op("*").Id("NR"), id("p").Op("*").Id("NR").Op("+").Id("NR"), id("p").Op("*").Id("NR").Op("+").Id("NR")),
			}, append(loads, fmas...)...)...,
		),
		id("tile").Op(":=").Index(id("MR")).Index(id("NR")).Float32().Values(rows...),
		jen.For(id("i").Op(":=").Lit(0), id("i").Op("<").Id("mr"), id("i").Op("++")).Block(
			id("row").Op(":=").Id("c").Index(id("i").Op("*").Id("ldc"), id("i").Op("*").Id("ldc").Op("+").Id("nr")),
			jen.For(jen.List(id("j"), id("v")).Op(":=").Range().Id("tile").Index(id("i")).Index(jen.Empty(), id("nr"))).Block(
				id("row").Index(id("j")).Op("+=").Id("v"),
			),
		),
	}
	f.Comment(fmt.Sprintf(`%s is the GEMM micro-kernel (kernels.GemmTileFunc) with an %d×%d tile:
for i < mr ≤ %d and j < nr ≤ %d (accumulate)

	c[i·ldc+j] += Σ_{p<kc} a[p·%d+i] · b[p·%d+j]`, Name(op), mr, nr, mr, nr, mr, nr))
	f.Func().Id(Name(op)).Params(
		id("kc").Int(), jen.List(id("a"), id("b"), id("c")).Index().Float32(), jen.List(id("ldc"), id("mr"), id("nr")).Int(),
	).Block(body...)
}
