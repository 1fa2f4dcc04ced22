package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// productSizes are the local constants of the product kinds.
func productSizes(op catalog.Op, cfg catalog.Config) jen.Code {
	return constBlock(
		size{"N", cfg.N, "row stride of the logits"},
		size{"W", op.W, "width of the product"},
		size{"LX", op.LX, "row stride of x"},
		size{"LW", op.LW, "row stride of w"},
	)
}

// emitProduct emits c = scale·x·wᵀ + bias on the causal triangle: per row
// of c, dot products of x_i with a chunk of rows of w at a time.
func emitProduct(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s synthesizes logits as a causal product (kernels.ProductFunc)
for N = %d, W = %d, LX = %d, LW = %d: for j ≤ i < t (overwrite)

	c[i·N+j] = scale · Σ_{p<W} x[i·LX+p] · w[j·LW+p] + bias[j]

bias may be empty (no bias).`, Name(op), cfg.N, op.W, op.LX, op.LW)
	funcDecl(f, op, maskDoc(cfg, doc),
		productSizes(op, cfg),
		jen.Id("hasBias").Op(":=").Len(jen.Id("bias")).Op("!=").Lit(0),
		forRows(
			jen.Id("xr").Op(":=").Add(win("x", rowOff("i", "LX"), jen.Id("W"))),
			jen.Id("cr").Op(":=").Add(triRow("c", rowLen(cfg))),
			jen.Comment("c_ij = scale · x_i·w_j, a chunk of rows of w at a time."),
			jen.Block(rowDots("cr", "xr", "w", "LW", "W", op.W, func(s jen.Code) jen.Code {
				return jen.Id("scale").Op("*").Add(s)
			})...),
			jen.If(jen.Id("hasBias")).Block(
				jen.Id("br").Op(":=").Id("bias").Index(jen.Empty(), jen.Len(jen.Id("cr")), jen.Len(jen.Id("cr"))),
				jen.For(jen.List(jen.Id("j"), jen.Id("bj")).Op(":=").Range().Id("br")).Block(
					jen.Id("cr").Index(jen.Id("j")).Op("+=").Id("bj"),
				),
			),
		),
	)
}

// emitProductBackX emits dx = scale·dc·w (overwrite): row i of dx is the
// combination of the rows of w weighted by row i of dc.
func emitProductBackX(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the gradient of the causal product with respect to x
(kernels.ProductBackXFunc) for N = %d, W = %d, LX = %d, LW = %d (overwrite):

	dx[i·LX+p] = scale · Σ_{j≤i} dc[i·N+j] · w[j·LW+p],  p < W`, Name(op), cfg.N, op.W, op.LX, op.LW)
	row := []jen.Code{
		jen.Id("dcr").Op(":=").Add(triRow("dc", rowLen(cfg))),
		jen.Id("dxr").Op(":=").Add(win("dx", rowOff("i", "LX"), jen.Id("W"))),
	}
	row = append(row, combineRows("dcr", "w", "LW", "dxr", op.W, "scale")...)
	funcDecl(f, op, maskDoc(cfg, doc), productSizes(op, cfg), forRows(row...))
}

// emitProductBackW emits dw += scale·dcᵀ·x and dbias += column sums of dc.
func emitProductBackW(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the gradient of the causal product with respect to w and
the bias (kernels.ProductBackWFunc) for N = %d, W = %d, LX = %d, LW = %d
(accumulate):

	dw[j·LW+p] += scale · Σ_{j≤i<t} dc[i·N+j] · x[i·LX+p],  p < W
	dbias[j]   += Σ_{j≤i<t} dc[i·N+j]  (skipped when dbias is empty)`, Name(op), cfg.N, op.W, op.LX, op.LW)
	funcDecl(f, op, maskDoc(cfg, doc),
		productSizes(op, cfg),
		jen.Comment("dw_j += scale · Σ_{i≥j} dc_ij · x_i, walking column j of dc."),
		combineCols(cfg, "dc", "x", "LX", "dw", "LW", "W", op.W, "+=", "scale"),
		jen.If(jen.Len(jen.Id("dbias")).Op("==").Lit(0)).Block(jen.Return()),
		jen.Comment("dbias_j += Σ_{i≥j} dc_ij: column sums gathered row by row in a scratch row."),
		jen.Var().Id("sb").Index(jen.Id("N")).Float32(),
		forRows(
			jen.Id("dcr").Op(":=").Add(triRow("dc", rowLen(cfg))),
			jen.Id("sr").Op(":=").Id("sb").Index(jen.Empty(), jen.Len(jen.Id("dcr"))),
			jen.For(jen.List(jen.Id("j"), jen.Id("dij")).Op(":=").Range().Id("dcr")).Block(
				jen.Id("sr").Index(jen.Id("j")).Op("+=").Id("dij"),
			),
		),
		jen.Id("dbr").Op(":=").Id("dbias").Index(jen.Empty(), jen.Id("t"), jen.Id("t")),
		jen.For(jen.List(jen.Id("j"), jen.Id("sj")).Op(":=").Range().Id("sb").Index(jen.Empty(), jen.Id("t"))).Block(
			jen.Id("dbr").Index(jen.Id("j")).Op("+=").Id("sj"),
		),
	)
}

// tileSizes are the local constants of the tile kinds.
func tileSizes(op catalog.Op, cfg catalog.Config) jen.Code {
	return constBlock(
		size{"N", cfg.N, "row stride of the logits"},
		size{"FA", op.FA, "columns of fa"},
		size{"FB", op.FB, "columns of fb"},
		size{"LA", op.LA, "row stride of fa"},
		size{"LB", op.LB, "row stride of fb"},
	)
}

// unrollFB emits body(q) for q < FB: unrolled when FB is small, else as a
// loop over q.
func unrollFB(fb int, body func(q jen.Code) jen.Code) []jen.Code {
	if fb <= fullUnroll {
		out := make([]jen.Code, fb)
		for q := range out {
			out[q] = body(jen.Lit(q))
		}
		return out
	}
	return []jen.Code{jen.For(jen.Id("q").Op(":=").Range().Id("FB")).Block(body(jen.Id("q")))}
}

// emitTile emits the factorized-dense tiling: row i of c is, block by
// block of FB columns, fa[i, p]·fb[i, :].
func emitTile(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s synthesizes factorized-dense logits (kernels.TileFunc) for
N = %d, FA = %d, FB = %d, LA = %d, LB = %d: for j ≤ i < t (overwrite)

	c[i·N+j] = fa[i·LA + j/FB] · fb[i·LB + j%%FB]`, Name(op), cfg.N, op.FA, op.FB, op.LA, op.LB)
	full := unrollFB(op.FB, func(q jen.Code) jen.Code {
		return jen.Id("cq").Index(q).Op("=").Id("ap").Op("*").Id("fbr").Index(q)
	})
	funcDecl(f, op, maskDoc(cfg, doc),
		tileSizes(op, cfg),
		forRows(
			jen.Id("cr").Op(":=").Add(triRow("c", rowLen(cfg))),
			jen.Id("far").Op(":=").Add(win("fa", rowOff("i", "LA"), jen.Id("FA"))),
			jen.Id("fbr").Op(":=").Add(win("fb", rowOff("i", "LB"), jen.Id("FB"))),
			jen.Comment("Whole blocks of FB columns p·FB … p·FB+FB−1 ≤ i."),
			jen.Id("p").Op(":=").Lit(0),
			jen.For(jen.Empty(), jen.Parens(jen.Id("p").Op("+").Lit(1)).Op("*").Id("FB").Op("<=").Len(jen.Id("cr")), jen.Id("p").Op("++")).Block(
				append([]jen.Code{
					jen.Id("cq").Op(":=").Add(win("cr", rowOff("p", "FB"), jen.Id("FB"))),
					jen.Id("ap").Op(":=").Id("far").Index(jen.Id("p")),
				}, full...)...,
			),
			jen.Comment("The last, partial block."),
			jen.If(jen.Id("p").Op("<").Id("FA")).Block(
				jen.Id("cq").Op(":=").Id("cr").Index(jen.Id("p").Op("*").Id("FB"), jen.Empty()),
				jen.Id("ap").Op(":=").Id("far").Index(jen.Id("p")),
				jen.For(jen.Id("q").Op(":=").Range().Id("cq")).Block(
					jen.Id("cq").Index(jen.Id("q")).Op("=").Id("ap").Op("*").Id("fbr").Index(jen.Id("q")),
				),
			),
		),
	)
}

// emitTileBack emits the gradient of the tiling: per row, a dot product per
// whole block for dfa and an axpy per block into dfb.
func emitTileBack(f *jen.File, op catalog.Op, cfg catalog.Config) {
	doc := fmt.Sprintf(`%s is the gradient of the factorized-dense tiling
(kernels.TileBackFunc) for N = %d, FA = %d, FB = %d, LA = %d, LB = %d; for
i < t, p < FA, q < FB (overwrite)

	dfa[i·LA+p] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fb[i·LB+q]
	dfb[i·LB+q] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fa[i·LA+p]`, Name(op), cfg.N, op.FA, op.FB, op.LA, op.LB)
	block := []jen.Code{
		jen.Id("dq").Op(":=").Add(win("dcr", rowOff("p", "FB"), jen.Id("FB"))),
		jen.Id("ap").Op(":=").Id("far").Index(jen.Id("p")),
	}
	block = append(block, dotInto("s", "dq", "fbr", op.FB)...)
	block = append(block, jen.Id("dfar").Index(jen.Id("p")).Op("=").Id("s"))
	block = append(block, unrollFB(op.FB, func(q jen.Code) jen.Code {
		return jen.Id("dfbr").Index(q).Op("+=").Id("dq").Index(q).Op("*").Id("ap")
	})...)
	funcDecl(f, op, maskDoc(cfg, doc),
		tileSizes(op, cfg),
		forRows(
			jen.Id("dcr").Op(":=").Add(triRow("dc", rowLen(cfg))),
			jen.Id("far").Op(":=").Add(win("fa", rowOff("i", "LA"), jen.Id("FA"))),
			jen.Id("fbr").Op(":=").Add(win("fb", rowOff("i", "LB"), jen.Id("FB"))),
			jen.Id("dfar").Op(":=").Add(win("dfa", rowOff("i", "LA"), jen.Id("FA"))),
			jen.Id("dfbr").Op(":=").Add(win("dfb", rowOff("i", "LB"), jen.Id("FB"))),
			jen.Clear(jen.Id("dfbr")),
			jen.Comment("Whole blocks of FB columns p·FB … p·FB+FB−1 ≤ i."),
			jen.Id("p").Op(":=").Lit(0),
			jen.For(jen.Empty(), jen.Parens(jen.Id("p").Op("+").Lit(1)).Op("*").Id("FB").Op("<=").Len(jen.Id("dcr")), jen.Id("p").Op("++")).Block(block...),
			jen.Comment("The last, partial block; blocks past the diagonal get dfa = 0."),
			jen.If(jen.Id("p").Op("<").Id("FA")).Block(
				jen.Id("dq").Op(":=").Id("dcr").Index(jen.Id("p").Op("*").Id("FB"), jen.Empty()),
				jen.Id("ap").Op(":=").Id("far").Index(jen.Id("p")),
				jen.Var().Id("s").Float32(),
				jen.For(jen.List(jen.Id("q"), jen.Id("dj")).Op(":=").Range().Id("dq")).Block(
					jen.Id("s").Op("+=").Id("dj").Op("*").Id("fbr").Index(jen.Id("q")),
					jen.Id("dfbr").Index(jen.Id("q")).Op("+=").Id("dj").Op("*").Id("ap"),
				),
				jen.Id("dfar").Index(jen.Id("p")).Op("=").Id("s"),
				jen.Clear(jen.Id("dfar").Index(jen.Id("p").Op("+").Lit(1), jen.Empty())),
			),
		),
	)
}
