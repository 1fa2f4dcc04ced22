package asmgen

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// PeakChains is the number of independent FMA chains the peak kernels run:
// enough to cover the FMA latency on both pipes of current x86 cores.
const PeakChains = 12

// PeakFile builds the FMA-throughput kernels the benchmarks use to measure
// this core's peak: fmaPeakAVX512(iters int) and fmaPeakAVX2(iters int)
// each run iters iterations of PeakChains independent VFMADD231PS on ZMM
// (16 lanes) or YMM (8 lanes) registers.
func PeakFile() *build.Context {
	ctx := build.NewContext()
	ctx.ConstraintExpr("!purego")
	one := ctx.ConstData("peak_one", operand.U32(0x3f800000))
	for _, l := range []struct {
		name string
		vec  func() reg.VecVirtual
	}{{"fmaPeakAVX512", ctx.ZMM}, {"fmaPeakAVX2", ctx.YMM}} {
		ctx.Function(l.name)
		ctx.Attributes(attr.NOSPLIT)
		ctx.SignatureExpr("func(iters int)")
		ctx.Doc(l.name + " runs iters iterations of independent FMA chains, for measuring peak throughput.")
		n := ctx.Load(ctx.Param("iters"), ctx.GP64())
		x, y := l.vec(), l.vec()
		ctx.VBROADCASTSS(one, x)
		ctx.VBROADCASTSS(one, y)
		acc := make([]reg.VecVirtual, PeakChains)
		for i := range acc {
			acc[i] = l.vec()
			ctx.VBROADCASTSS(one, acc[i])
		}
		ctx.Label("loop")
		ctx.TESTQ(n, n)
		ctx.JZ(operand.LabelRef("done"))
		for i := range acc {
			ctx.VFMADD231PS(x, y, acc[i])
		}
		ctx.DECQ(n)
		ctx.JMP(operand.LabelRef("loop"))
		ctx.Label("done")
		// Keep the chains live: fold them into one register.
		for i := 1; i < len(acc); i++ {
			ctx.VADDPS(acc[i], acc[0], acc[0])
		}
		ctx.VZEROUPPER()
		ctx.RET()
	}
	return ctx
}
