package gogen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

// The factorised aft_full's element-wise passes (kernels.AFTMaxFunc,
// AFTFactorsFunc, AFTQuotFunc, AFTQuotBackFunc, AFTKVBackFunc) over t
// consecutive floats. AFTFactors takes Exp's float64 exponential of the
// float32 difference k − kappa; the others are the float32 operations the
// assembly repeats, in its order (AFTMax: MAXPS's comparison).

// flatFunc emits func name(t int, params ... []float32) whose body
// reslices every parameter to t, then loops i over them running body.
func flatFunc(f *jen.File, name, doc string, params []string, body ...jen.Code) {
	id := jen.Id
	f.Comment(doc)
	var ps, lhs, rhs []jen.Code
	for _, p := range params {
		ps = append(ps, id(p))
		lhs = append(lhs, id(p))
		rhs = append(rhs, id(p).Index(jen.Empty(), id("t")))
	}
	ps[len(ps)-1] = id(params[len(params)-1]).Index().Float32()
	f.Func().Id(name).Params(append([]jen.Code{id("t").Int()}, ps...)...).Block(
		jen.List(lhs...).Op("=").List(rhs...),
		jen.For(id("i").Op(":=").Range().Id(params[0])).Block(body...),
	)
}

// elem is p[i].
func elem(p string) *jen.Statement { return jen.Id(p).Index(jen.Id("i")) }

func emitAFTFactors(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	block := append([]jen.Code{}, expNeg("ev", id("x"))...)
	block = append(block, id("e").Op("=").Id("ev"))
	flatFunc(f, Name(op), fmt.Sprintf("%s sets ek = e^min(k − kappa, 88) and kv = ek·v over t floats (kernels.AFTFactorsFunc).", Name(op)),
		[]string{"k", "kappa", "v", "kv", "ek"},
		id("x").Op(":=").Float64().Call(jen.Min(elem("k").Op("-").Add(elem("kappa")), jen.Lit(88))),
		jen.Var().Id("e").Float64(),
		jen.Block(block...),
		elem("ek").Op("=").Float32().Call(id("e")),
		elem("kv").Op("=").Add(elem("ek")).Op("*").Add(elem("v")),
	)
}

func emitAFTMax(f *jen.File, op catalog.Op, _ catalog.Config) {
	flatFunc(f, Name(op), fmt.Sprintf("%s sets kappa = k unless kappa > k over t floats, as MAXPS does (kernels.AFTMaxFunc).", Name(op)),
		[]string{"k", "kappa"},
		jen.If(jen.Op("!").Parens(elem("kappa").Op(">").Add(elem("k")))).Block(
			elem("kappa").Op("=").Add(elem("k")),
		),
	)
}

func emitAFTQuot(f *jen.File, op catalog.Op, _ catalog.Config) {
	flatFunc(f, Name(op), fmt.Sprintf("%s sets z = num/den over t floats (kernels.AFTQuotFunc).", Name(op)),
		[]string{"num", "den", "z"},
		elem("z").Op("=").Add(elem("num")).Op("/").Add(elem("den")),
	)
}

func emitAFTQuotBack(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	flatFunc(f, Name(op), fmt.Sprintf("%s sets dnum = dz/den and dden = −dz·z/den over t floats, through r = 1/den (kernels.AFTQuotBackFunc).", Name(op)),
		[]string{"dz", "z", "den", "dnum", "dden"},
		id("r").Op(":=").Lit(1).Op("/").Add(elem("den")),
		elem("dnum").Op("=").Add(elem("dz")).Op("*").Id("r"),
		elem("dden").Op("=").Op("-").Parens(elem("dz").Op("*").Add(elem("z")).Op("*").Id("r")),
	)
}

func emitAFTKVBack(f *jen.File, op catalog.Op, _ catalog.Config) {
	id := jen.Id
	flatFunc(f, Name(op), fmt.Sprintf("%s sets dv = ek·g1 and dk = ek·(v·g1 + g2) over t floats (kernels.AFTKVBackFunc).", Name(op)),
		[]string{"ek", "v", "g1", "g2", "dk", "dv"},
		id("e").Op(",").Id("g").Op(":=").Add(elem("ek")).Op(",").Add(elem("g1")),
		elem("dv").Op("=").Id("e").Op("*").Id("g"),
		elem("dk").Op("=").Id("e").Op("*").Parens(elem("v").Op("*").Id("g").Op("+").Add(elem("g2"))),
	)
}
