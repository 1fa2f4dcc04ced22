package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/synthgen/synthgen/gen/catalog"
)

const (
	kerneltestPkg = "github.com/synthgen/synthgen/kerneltest"
	trainstepPkg  = "github.com/synthgen/synthgen/kerneltest/trainstep"
)

// renderTests writes kernels_test.go: the package's own tests and
// benchmarks, an internal test file (package p.Pkg, since the generator
// does not know the import path a user's module gives the package) whose
// functions call kerneltest (and kerneltest/trainstep) with the package's
// Spec. TestKernels
// checks every kernel on every instruction set the run allows against the
// package's Go level; one Benchmark<Kernel> per kernel, so that
// `go test -bench SoftmaxValue` selects one, and BenchmarkTrainStep
// measure them.
func renderTests(p *Package, header string, ops []catalog.Op) error {
	s := p.Spec
	f := jen.NewFile(p.Pkg)
	f.HeaderComment(header)
	f.ImportName(kerneltestPkg, "kerneltest")
	f.ImportName(trainstepPkg, "trainstep")
	f.ImportName("testing", "testing")
	kt := func(name string) *jen.Statement { return jen.Qual(kerneltestPkg, name) }

	f.Comment(fmt.Sprintf("TestKernels runs every kernel of spec %s on each instruction set this CPU, this build", s.Name))
	f.Comment("and SYNTHGEN_ISA allow, and compares it with the package's portable Go kernels; a")
	f.Comment("level that cannot run is skipped, saying why (see kerneltest.Test).")
	f.Func().Id("TestKernels").Params(jen.Id("t").Op("*").Qual("testing", "T")).Block(
		kt("Test").Call(jen.Id("t"), jen.Id("Spec")),
	)
	for _, op := range ops {
		f.Line()
		f.Comment(fmt.Sprintf("Benchmark%s measures %s on each instruction set, in sub-benchmarks", op.Field, op.Field))
		f.Comment("isa=go|avx2|avx512, in GFLOP/s (Gelem/s for a kernel without a FLOP convention; see")
		f.Comment("kerneltest.Benchmark).")
		f.Func().Id("Benchmark" + op.Field).Params(jen.Id("b").Op("*").Qual("testing", "B")).Block(
			kt("Benchmark").Call(jen.Id("b"), jen.Id("Spec"), jen.Lit(op.Field)),
		)
	}
	f.Line()
	f.Comment("BenchmarkTrainStep measures whole training steps of this spec at batch 16 on each")
	f.Comment("instruction set, in tokens/s (see trainstep.Benchmark).")
	f.Func().Id("BenchmarkTrainStep").Params(jen.Id("b").Op("*").Qual("testing", "B")).Block(
		jen.Qual(trainstepPkg, "Benchmark").Call(jen.Id("b"), jen.Id("Spec")),
	)
	return render(f, "kernels_test.go", p.Files)
}
