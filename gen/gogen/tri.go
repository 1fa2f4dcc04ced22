package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// triUnroll is the unrolling of the causal-triangle vector loops.
const triUnroll = 4

// triLoop emits, per row i < t, rows xr and yr of x and y cut to the causal
// part, and elem(xs, ys, k) for every entry: unrolled by four on windows of
// constant length, then the remainder.
func triLoop(cfg catalog.Config, elem func(xs, ys string, k jen.Code) jen.Code, pre, post []jen.Code) jen.Code {
	quad := []jen.Code{
		jen.Id("xq").Op(":=").Add(win("xr", idx("j"), jen.Lit(triUnroll))),
		jen.Id("yq").Op(":=").Add(win("yr", idx("j"), jen.Lit(triUnroll))),
	}
	for k := 0; k < triUnroll; k++ {
		quad = append(quad, elem("xq", "yq", jen.Lit(k)))
	}
	row := []jen.Code{
		jen.Id("xr").Op(":=").Add(triRow("x", rowLen(cfg))),
		jen.Id("yr").Op(":=").Add(triRow("y", rowLen(cfg))),
	}
	row = append(row, pre...)
	row = append(row,
		jen.Id("j").Op(":=").Lit(0),
		jen.For(jen.Empty(), jen.Id("j").Op("+").Lit(triUnroll).Op("<=").Len(jen.Id("xr")), jen.Id("j").Op("+=").Lit(triUnroll)).Block(quad...),
		jen.For(jen.Empty(), jen.Id("j").Op("<").Len(jen.Id("xr")), jen.Id("j").Op("++")).Block(elem("xr", "yr", jen.Id("j"))),
	)
	row = append(row, post...)
	return forRows(row...)
}

func triDoc(op catalog.Op, cfg catalog.Config, what string) string {
	return maskDoc(cfg, fmt.Sprintf("%s %s.\nN = %d; entries with j > i are never touched.", Name(op), what, cfg.N))
}

func triConst(cfg catalog.Config) jen.Code {
	return constBlock(size{"N", cfg.N, "row stride of x and y"})
}

// emitTriScale emits y = alpha·x on the causal triangle.
func emitTriScale(f *jen.File, op catalog.Op, cfg catalog.Config) {
	funcDecl(f, op, triDoc(op, cfg, "writes y[i·N+j] = alpha·x[i·N+j] for j ≤ i < t\n(kernels.TriScaleFunc, overwrite)"),
		triConst(cfg),
		triLoop(cfg, func(xs, ys string, k jen.Code) jen.Code {
			return jen.Id(ys).Index(k).Op("=").Id("alpha").Op("*").Id(xs).Index(k)
		}, nil, nil),
	)
}

// emitTriAxpy emits y += alpha·x on the causal triangle.
func emitTriAxpy(f *jen.File, op catalog.Op, cfg catalog.Config) {
	funcDecl(f, op, triDoc(op, cfg, "adds alpha·x[i·N+j] to y[i·N+j] for j ≤ i < t\n(kernels.TriAxpyFunc, accumulate)"),
		triConst(cfg),
		triLoop(cfg, func(xs, ys string, k jen.Code) jen.Code {
			return jen.Id(ys).Index(k).Op("+=").Id("alpha").Op("*").Id(xs).Index(k)
		}, nil, nil),
	)
}

// emitTriDot emits Σ x·y over the causal triangle: four float32
// accumulators per row, the row sums added in float64.
func emitTriDot(f *jen.File, op catalog.Op, cfg catalog.Config) {
	k := 0
	elem := func(xs, ys string, kk jen.Code) jen.Code {
		a := acc(k % triUnroll)
		k++
		return a.Op("+=").Id(xs).Index(kk).Op("*").Id(ys).Index(kk)
	}
	funcDecl(f, op, triDoc(op, cfg, "returns Σ_{j≤i<t} x[i·N+j]·y[i·N+j] (kernels.TriDotFunc),\nsumming each row in four float32 accumulators and the rows in float64"),
		triConst(cfg),
		jen.Var().Id("total").Float64(),
		triLoop(cfg, elem,
			[]jen.Code{declAccs(triUnroll)},
			[]jen.Code{jen.Id("total").Op("+=").Float64().Call(sumAccs(triUnroll))},
		),
		jen.Return(jen.Float32().Call(jen.Id("total"))),
	)
}
