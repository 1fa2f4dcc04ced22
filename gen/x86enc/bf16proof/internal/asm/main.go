// Command asm writes the assembly of package bf16proof: AVX512-BF16 and
// AMX kernels whose bf16 instructions are encoded by gen/x86enc as BYTE
// directives. Run by go generate in the package directory:
//
//	go run ./internal/asm
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/x86enc"
)

func main() {
	out := flag.String("dir", ".", "directory of package bf16proof")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "asm:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := build.NewContext()
	ctx.ConstraintExpr("!purego")
	cfg := tileConfig(ctx)
	for _, k := range []func(*build.Context, *x86enc.Emitter, Mem) string{dot, toBF16, tileMatmul, gemm32, gemm4x32} {
		e := &x86enc.Emitter{Ctx: ctx}
		doc := k(ctx, e, cfg)
		if err := e.Err(); err != nil {
			return fmt.Errorf("encoding: %w", err)
		}
		ctx.Doc(doc, "", "Requires (encoded by x86enc, checked by the caller): "+strings.Join(e.ISA(), ", ")+".")
	}
	asmFile, err := os.Create(filepath.Join(dir, "kernels_amd64.s"))
	if err != nil {
		return err
	}
	stubFile, err := os.Create(filepath.Join(dir, "kernels_amd64.go"))
	if err != nil {
		asmFile.Close()
		return err
	}
	pc := printer.Config{Argv: []string{"go", "run", "./internal/asm"}, Pkg: "bf16proof"}
	bc := &build.Config{ErrOut: os.Stderr, MaxErrors: 10, Passes: []pass.Interface{
		pass.Compile,
		&pass.Output{Writer: asmFile, Printer: printer.NewGoAsm(pc)},
		&pass.Output{Writer: stubFile, Printer: printer.NewStubs(pc)},
	}}
	if build.Main(bc, ctx) != 0 {
		return fmt.Errorf("avo build failed")
	}
	return nil
}

// dot: the sum over n blocks of 32 bf16 pairs of a[i]·b[i], accumulated in
// float32 by VDPBF16PS (register source, high registers, then a memory
// source).
func dot(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("dotBF16AVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(a, b *uint16, blocks int) float32")
	ctx.Pragma("noescape")
	doc := "dotBF16AVX512 returns Σ a[i]·b[i] over 32·blocks bf16 elements (AVX512-BF16)."
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("b"), R12)
	ctx.Load(ctx.Param("blocks"), RCX)
	ctx.VPXORD(Z24, Z24, Z24)
	ctx.VPXORD(Z0, Z0, Z0)
	ctx.TESTQ(RCX, RCX)
	ctx.JZ(LabelRef("dot_reduce"))
	ctx.Label("dot_loop")
	ctx.VMOVUPS(Mem{Base: RSI}, Z25)
	ctx.VMOVUPS(Mem{Base: R12}, Z9)
	// Even blocks: register form, ZMM 16–31 and 8–15.
	e.Add(x86enc.VDPBF16PS(x86enc.Z(24), x86enc.NoMask, x86enc.Z(25), x86enc.Z(9)))
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), R12)
	ctx.DECQ(RCX)
	ctx.JZ(LabelRef("dot_reduce"))
	// Odd blocks: memory form [rsi] and [r12] (SIB base).
	ctx.VMOVUPS(Mem{Base: RSI}, Z1)
	e.Add(x86enc.VDPBF16PS(x86enc.Z(0), x86enc.NoMask, x86enc.Z(1), x86enc.M(x86enc.R12, 0)))
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), R12)
	ctx.DECQ(RCX)
	ctx.JNZ(LabelRef("dot_loop"))
	ctx.Label("dot_reduce")
	ctx.VADDPS(Z24, Z0, Z0)
	ctx.VEXTRACTF64X4(U8(1), Z0, Y1)
	ctx.VADDPS(Y1, Y0, Y0)
	ctx.VEXTRACTF128(U8(1), Y0, X1)
	ctx.VADDPS(X1, X0, X0)
	ctx.VMOVHLPS(X0, X0, X1)
	ctx.VADDPS(X1, X0, X0)
	ctx.VMOVSHDUP(X0, X1)
	ctx.VADDSS(X1, X0, X0)
	ctx.VZEROUPPER()
	ctx.Store(X0, ctx.ReturnIndex(0))
	ctx.RET()
	return doc
}

// toBF16: dst[i] = bf16(src[i]) rounded to nearest even, 32 at a time by
// VCVTNE2PS2BF16, then 16 by VCVTNEPS2BF16, then the rest under a
// zeroing mask (masked-out elements are neither read nor written).
func toBF16(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("toBF16AVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, src *float32, n int)")
	ctx.Pragma("noescape")
	doc := "toBF16AVX512 rounds n float32 to bf16, nearest even (AVX512-BF16, AVX512BW)."
	ctx.Load(ctx.Param("dst"), RDI)
	ctx.Load(ctx.Param("src"), RSI)
	ctx.Load(ctx.Param("n"), RCX)
	ctx.Label("cvt_loop32")
	ctx.CMPQ(RCX, U8(32))
	ctx.JB(LabelRef("cvt_16"))
	ctx.VMOVUPS(Mem{Base: RSI, Disp: 64}, Z17)
	// low half from [rsi] (elements 0–15), high half from zmm17 (16–31)
	e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(18), x86enc.NoMask, x86enc.Z(17), x86enc.M(x86enc.SI, 0)))
	ctx.VMOVDQU16(Z18, Mem{Base: RDI})
	ctx.ADDQ(U32(128), RSI)
	ctx.ADDQ(U8(64), RDI)
	ctx.SUBQ(U8(32), RCX)
	ctx.JMP(LabelRef("cvt_loop32"))
	ctx.Label("cvt_16")
	ctx.CMPQ(RCX, U8(16))
	ctx.JB(LabelRef("cvt_tail"))
	// [rsi+rcx*4-64] with rcx in 16..31: the last 16 of the remaining
	// elements, through a SIB index and a compressed disp8.
	e.Add(x86enc.VCVTNEPS2BF16(x86enc.Y(19), x86enc.NoMask, x86enc.Mem{Base: x86enc.SI, Index: x86enc.CX, Scale: 4, Disp: -64, Bits: 512}))
	ctx.VMOVDQU16(Y19, Mem{Base: RDI, Index: RCX, Scale: 2, Disp: -32})
	ctx.SUBQ(U8(16), RCX)
	ctx.Label("cvt_tail")
	ctx.TESTQ(RCX, RCX)
	ctx.JZ(LabelRef("cvt_done"))
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVW(EAX, K1)
	e.Add(x86enc.VCVTNEPS2BF16(x86enc.Y(20), x86enc.KZ(1), x86enc.Mem{Base: x86enc.SI, Bits: 512}))
	ctx.VMOVDQU16(Y20, K1, Mem{Base: RDI})
	ctx.Label("cvt_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// tileConfig emits the 64-byte tile configuration: palette 1, all eight
// tiles 16 rows × 64 bytes.
func tileConfig(ctx *build.Context) Mem {
	m := ctx.StaticGlobal("tilecfg16x64")
	ctx.DataAttributes(attr.RODATA | attr.NOPTR)
	var b [64]byte
	b[0] = 1 // palette
	for t := 0; t < 8; t++ {
		b[16+2*t] = 64 // colsb (uint16, little endian)
		b[48+t] = 16   // rows
	}
	for i := 0; i < 64; i += 8 {
		var q uint64
		for j := 7; j >= 0; j-- {
			q = q<<8 | uint64(b[i+j])
		}
		ctx.AddDatum(i, U64(q))
	}
	return m
}

// tileMatmul: C (16×16 float32, rows of 64 bytes) += A (16×32 bf16) · B
// (32×16 bf16 packed in pairs: 16 rows of 32), one TDPBF16PS, with the
// tile state configured and released inside the call.
func tileMatmul(ctx *build.Context, e *x86enc.Emitter, cfg Mem) string {
	ctx.Function("tileMatmulAMX")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(c *float32, a, b *uint16)")
	ctx.Pragma("noescape")
	doc := "tileMatmulAMX computes C += A·B on one 16×16 tile (AMX-TILE, AMX-BF16)."
	ctx.Load(ctx.Param("c"), R13)
	ctx.Load(ctx.Param("a"), R12)
	ctx.Load(ctx.Param("b"), RDX)
	ctx.LEAQ(cfg, RAX)
	ctx.MOVQ(U32(64), RCX)
	e.Add(x86enc.LDTILECFG(x86enc.M(x86enc.AX, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(3), x86enc.MI(x86enc.R13, x86enc.CX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(1), x86enc.MI(x86enc.R12, x86enc.CX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(6), x86enc.MI(x86enc.DX, x86enc.CX, 1, 0)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(3), x86enc.T(1), x86enc.T(6)))
	e.Add(x86enc.TILESTORED(x86enc.MI(x86enc.R13, x86enc.CX, 1, 0), x86enc.T(3)))
	e.Add(x86enc.TILERELEASE(), nil)
	ctx.RET()
	return doc
}

// gemm32: C (32×32 float32, row stride 128 bytes) += A (32×k bf16, row
// stride 2k bytes) · B (k×32 bf16 packed by PackB: per 32-deep block two
// 16×32 tiles of pairs, 2048 bytes), k a positive multiple of 32. Four
// accumulators tmm0–3, A in tmm4–5, B in tmm6–7.
func gemm32(ctx *build.Context, e *x86enc.Emitter, cfg Mem) string {
	ctx.Function("gemm32x32AMX")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(c *float32, a, b *uint16, k int)")
	ctx.Pragma("noescape")
	doc := "gemm32x32AMX computes C += A·B for a 32×32 C and a depth k, multiple of 32 (AMX-TILE, AMX-BF16)."
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("b"), R13)
	ctx.Load(ctx.Param("k"), R8)
	ctx.LEAQ(Mem{Base: R8, Index: R8, Scale: 1}, RCX) // A row stride 2k
	ctx.MOVQ(RCX, R12)
	ctx.SHLQ(U8(4), R12)
	ctx.ADDQ(RSI, R12) // A rows 16–31
	ctx.SHRQ(U8(5), R8)
	ctx.MOVQ(U32(128), RBX)
	ctx.MOVQ(U32(64), RDX)
	ctx.LEAQ(cfg, RAX)
	enc := x86enc.MI
	e.Add(x86enc.LDTILECFG(x86enc.M(x86enc.AX, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(0), enc(x86enc.DI, x86enc.BX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(1), enc(x86enc.DI, x86enc.BX, 1, 64)))
	e.Add(x86enc.TILELOADD(x86enc.T(2), enc(x86enc.DI, x86enc.BX, 1, 16*128)))
	e.Add(x86enc.TILELOADD(x86enc.T(3), enc(x86enc.DI, x86enc.BX, 1, 16*128+64)))
	ctx.Label("gemm_loop")
	e.Add(x86enc.TILELOADD(x86enc.T(4), enc(x86enc.SI, x86enc.CX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(5), enc(x86enc.R12, x86enc.CX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(6), enc(x86enc.R13, x86enc.DX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(7), enc(x86enc.R13, x86enc.DX, 1, 1024)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(0), x86enc.T(4), x86enc.T(6)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(1), x86enc.T(4), x86enc.T(7)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(2), x86enc.T(5), x86enc.T(6)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(3), x86enc.T(5), x86enc.T(7)))
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), R12)
	ctx.ADDQ(U32(2048), R13)
	ctx.DECQ(R8)
	ctx.JNZ(LabelRef("gemm_loop"))
	e.Add(x86enc.TILESTORED(enc(x86enc.DI, x86enc.BX, 1, 0), x86enc.T(0)))
	e.Add(x86enc.TILESTORED(enc(x86enc.DI, x86enc.BX, 1, 64), x86enc.T(1)))
	e.Add(x86enc.TILESTORED(enc(x86enc.DI, x86enc.BX, 1, 16*128), x86enc.T(2)))
	e.Add(x86enc.TILESTORED(enc(x86enc.DI, x86enc.BX, 1, 16*128+64), x86enc.T(3)))
	e.Add(x86enc.TILERELEASE(), nil)
	ctx.RET()
	return doc
}

// gemm4x32: C (4×32 float32, row stride 128 bytes) += A (4×k bf16, row
// stride 2k bytes) · B (k×32 bf16 packed by PackB), k a positive multiple
// of 32, with VDPBF16PS: B pairs in zmm0/zmm1, each A pair broadcast from
// memory ({1to16}, through SIB indexes and compressed disp8), eight
// accumulators zmm16–23.
func gemm4x32(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("gemm4x32AVX512BF16")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(c *float32, a, b *uint16, k int)")
	ctx.Pragma("noescape")
	doc := "gemm4x32AVX512BF16 computes C += A·B for a 4×32 C and a depth k, multiple of 32 (AVX512-BF16)."
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("b"), R13)
	ctx.Load(ctx.Param("k"), R8)
	ctx.LEAQ(Mem{Base: R8, Index: R8, Scale: 1}, RCX) // A row stride 2k
	ctx.LEAQ(Mem{Base: RCX, Index: RCX, Scale: 2}, R10)
	ctx.ADDQ(RSI, R10) // A row 3
	ctx.SHRQ(U8(5), R8)
	acc := func(i, j int) VecPhysical { return []VecPhysical{Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23}[2*i+j] }
	for i := 0; i < 4; i++ {
		for j := 0; j < 2; j++ {
			ctx.VMOVUPS(Mem{Base: RDI, Disp: 128*i + 64*j}, acc(i, j))
		}
	}
	ctx.Label("gemm4_loop")
	rows := []x86enc.Mem{
		x86enc.M(x86enc.SI, 0),
		x86enc.MI(x86enc.SI, x86enc.CX, 1, 0),
		x86enc.MI(x86enc.SI, x86enc.CX, 2, 0),
		x86enc.M(x86enc.R10, 0),
	}
	for r := 0; r < 16; r++ {
		ctx.VMOVUPS(Mem{Base: R13, Disp: 64 * r}, Z0)
		ctx.VMOVUPS(Mem{Base: R13, Disp: 1024 + 64*r}, Z1)
		for i, row := range rows {
			m := row
			m.Disp += int32(4 * r)
			m = m.Broadcast()
			e.Add(x86enc.VDPBF16PS(x86enc.Z(16+2*i), x86enc.NoMask, x86enc.Z(0), m))
			e.Add(x86enc.VDPBF16PS(x86enc.Z(17+2*i), x86enc.NoMask, x86enc.Z(1), m))
		}
	}
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), R10)
	ctx.ADDQ(U32(2048), R13)
	ctx.DECQ(R8)
	ctx.JNZ(LabelRef("gemm4_loop"))
	for i := 0; i < 4; i++ {
		for j := 0; j < 2; j++ {
			ctx.VMOVUPS(acc(i, j), Mem{Base: RDI, Disp: 128*i + 64*j})
		}
	}
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}
