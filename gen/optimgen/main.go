// Command optimgen writes the assembly of package runtime/optim: the
// optimizer's two passes that no spec's kernel set covers, at the AVX
// level. Run by go generate in runtime/optim:
//
//	go run ../../gen/optimgen
//
// sumSquaresAVX is the gradient norm's float64 sum of squares in four
// lanes, element k of the run to lane k mod 4, each lane summed in order:
// bit for bit Go's four running sums (a float32 squared in float64 is
// exact, so the product's rounding never differs).
//
// scaleAVX is p ← p·d in float32: the decay-only update of weights whose
// gradient and moments are zero (a causal R's upper triangle).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/avofile"
)

func main() {
	out := flag.String("dir", ".", "directory of package runtime/optim")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "optimgen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := build.NewContext()
	ctx.ConstraintExpr("!purego")
	sumSquares(ctx)
	scale(ctx)
	return avofile.Write(ctx, dir, "optim", "go", "run", "../../gen/optimgen")
}

// prefetchAhead is how far ahead of the sum sumSquaresAVX prefetches,
// one line per 64 bytes read: 2 KB, about the distance the chain covers
// while a line comes from memory.
const prefetchAhead = 2048

// sumSquares: acc[k mod 4] += x[k]² for k < n (n a multiple of 4), four
// float64 lanes in Y0, 16 floats a pass (four convert-multiply-add steps
// in order), then 4 at a time.
func sumSquares(ctx *build.Context) {
	ctx.Function("sumSquaresAVX")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(x *float32, n int, acc *[4]float64)")
	ctx.Pragma("noescape")
	ctx.Doc("sumSquaresAVX adds x[k]² to acc[k mod 4] for k < n, each lane in order, in float64; n is a multiple of 4 (AVX).")
	ctx.Load(ctx.Param("x"), RSI) // not g: the goroutine register's name in Go assembly
	ctx.Load(ctx.Param("n"), RCX)
	ctx.Load(ctx.Param("acc"), RDI)
	ctx.VMOVUPD(Mem{Base: RDI}, Y0)
	ctx.Label("sq16")
	ctx.CMPQ(RCX, U8(16))
	ctx.JL(LabelRef("sq4"))
	ctx.PREFETCHT0(Mem{Base: RSI, Disp: prefetchAhead})
	for i := 0; i < 4; i++ {
		ctx.VCVTPS2PD(Mem{Base: RSI, Disp: 16 * i}, Y1)
		ctx.VMULPD(Y1, Y1, Y1)
		ctx.VADDPD(Y1, Y0, Y0)
	}
	ctx.ADDQ(U8(64), RSI)
	ctx.SUBQ(U8(16), RCX)
	ctx.JMP(LabelRef("sq16"))
	ctx.Label("sq4")
	ctx.TESTQ(RCX, RCX)
	ctx.JZ(LabelRef("sqdone"))
	ctx.VCVTPS2PD(Mem{Base: RSI}, Y1)
	ctx.VMULPD(Y1, Y1, Y1)
	ctx.VADDPD(Y1, Y0, Y0)
	ctx.ADDQ(U8(16), RSI)
	ctx.SUBQ(U8(4), RCX)
	ctx.JMP(LabelRef("sq4"))
	ctx.Label("sqdone")
	ctx.VMOVUPD(Y0, Mem{Base: RDI})
	ctx.VZEROUPPER()
	ctx.RET()
}

// scale: p[k] ← p[k]·d for k < n (n a multiple of 8), 32 floats a pass,
// then 8 at a time.
func scale(ctx *build.Context) {
	ctx.Function("scaleAVX")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(p *float32, n int, d float32)")
	ctx.Pragma("noescape")
	ctx.Doc("scaleAVX multiplies p[k] by d for k < n in float32; n is a multiple of 8 (AVX).")
	ctx.Load(ctx.Param("p"), RSI)
	ctx.Load(ctx.Param("n"), RCX)
	d, err := ctx.Param("d").Resolve()
	if err != nil {
		panic(err) // the signature above has d
	}
	ctx.VBROADCASTSS(d.Addr, Y0) // from its FP slot, which asmdecl accepts
	ctx.Label("sc32")
	ctx.CMPQ(RCX, U8(32))
	ctx.JL(LabelRef("sc8"))
	for i := 0; i < 4; i++ {
		ctx.VMULPS(Mem{Base: RSI, Disp: 32 * i}, Y0, Y1)
		ctx.VMOVUPS(Y1, Mem{Base: RSI, Disp: 32 * i})
	}
	ctx.ADDQ(U8(128), RSI)
	ctx.SUBQ(U8(32), RCX)
	ctx.JMP(LabelRef("sc32"))
	ctx.Label("sc8")
	ctx.TESTQ(RCX, RCX)
	ctx.JZ(LabelRef("scdone"))
	ctx.VMULPS(Mem{Base: RSI}, Y0, Y1)
	ctx.VMOVUPS(Y1, Mem{Base: RSI})
	ctx.ADDQ(U8(32), RSI)
	ctx.SUBQ(U8(8), RCX)
	ctx.JMP(LabelRef("sc8"))
	ctx.Label("scdone")
	ctx.VZEROUPPER()
	ctx.RET()
}
