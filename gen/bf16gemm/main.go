// Command bf16gemm writes the assembly of package runtime/bf16: the bf16
// GEMM micro-kernels of the linear layers' mixed-precision products, one
// per level, whose bf16 instructions (VDPBF16PS, and AMX's LDTILECFG,
// TILELOADD, TILEZERO, TDPBF16PS, TILESTORED, TILERELEASE) are encoded by
// gen/x86enc as BYTE directives. Run by go generate in runtime/bf16:
//
//	go run ../../gen/bf16gemm
//
// Both kernels read the same packed B panel (see runtime/bf16's PackB):
// 32 columns, and per 32-deep step of the inner dimension two halves of
// 16 columns, each 16 rows (pairs p = 2q, 2q+1) of 16 pairs, 1024 bytes
// per half: the layout of an AMX B tile, and for VDPBF16PS one ZMM of
// pairs per half and q. They differ in how A is packed: AMX reads tiles of
// 16 rows × 32 bf16 from a row-major block of 32 rows; VDPBF16PS
// broadcasts one pair of a row at a time from a block of 8 rows whose
// pairs are interleaved (8 rows × 2 bf16 per q, 32 bytes).
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	. "github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/avofile"
	"github.com/synthgen/synthgen/gen/x86enc"
)

func main() {
	out := flag.String("dir", ".", "directory of package runtime/bf16")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "bf16gemm:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	ctx := build.NewContext()
	pairIndexMem = nil // a new context defines its own index data
	ctx.ConstraintExpr("!purego")
	cfg := tileConfig(ctx)
	for _, k := range []func(*build.Context, *x86enc.Emitter, Mem) string{gemmAMX, gemmAVX512, toBF16, pairs, pairsPanels, transposeAT, packBHalf, scale} {
		e := &x86enc.Emitter{Ctx: ctx}
		doc := k(ctx, e, cfg)
		if err := e.Err(); err != nil {
			return fmt.Errorf("encoding: %w", err)
		}
		if isa := e.ISA(); len(isa) > 0 {
			ctx.Doc(doc, "", "Requires (encoded by x86enc, checked by the caller): "+strings.Join(isa, ", ")+".")
		} else {
			ctx.Doc(doc)
		}
	}
	return avofile.Write(ctx, dir, "bf16", "go", "run", "../../gen/bf16gemm")
}

// tileConfig emits the 64-byte tile configuration: palette 1, all eight
// tiles 16 rows × 64 bytes.
func tileConfig(ctx *build.Context) Mem {
	m := ctx.StaticGlobal("bf16tilecfg")
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

// gemmAMX: C (32×32 float32 tiles, row stride ldc bytes) = src + A·Bᵀ
// over 32·steps of the inner dimension, A a row-major block of 32 rows of
// bf16 (row stride lda bytes), B a packed panel (2048 bytes per step), for
// tiles ≥ 1 tiles: tile t reads A at a + t·as and B at b + t·bs and
// writes C at c + t·cs (bytes): down a panel (bs 0), or across panels
// along a row block (as 0). C starts from src (C's layout; src may be c; it
// moves on by cs too) or, when src is nil, from the row bias (32 floats,
// each tile row the same), or from zero when bias is nil as well. Four accumulator tiles tmm0–3 (the 2×2 16×16
// quarters of C), A in tmm4–5, B in tmm6–7. The tile state is configured
// once and released inside the call; between tiles the call moves its
// arguments on in their frame slots, keeping nothing in registers.
func gemmAMX(ctx *build.Context, e *x86enc.Emitter, cfg Mem) string {
	ctx.Function("gemmAMX")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(steps int, a *uint16, lda int, b *uint16, c *float32, ldc int, src *float32, tiles, as, bs, cs int, bias *float32)")
	ctx.Pragma("noescape")
	doc := "gemmAMX computes C = src + A·Bᵀ (src nil: bias or zero) for tiles 32×32 tiles of C, down a B panel or across panels, over 32·steps of the inner dimension, steps ≥ 1, tiles ≥ 1 (AMX-TILE, AMX-BF16)."
	ctx.LEAQ(cfg, RAX)
	e.Add(x86enc.LDTILECFG(x86enc.M(x86enc.AX, 0)))
	ctx.Label("amx_tile")
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("b"), R13)
	ctx.Load(ctx.Param("steps"), R8)
	ctx.Load(ctx.Param("lda"), RCX)
	ctx.Load(ctx.Param("ldc"), RBX)
	ctx.Load(ctx.Param("src"), R9)
	ctx.MOVQ(RCX, R12)
	ctx.SHLQ(U8(4), R12)
	ctx.ADDQ(RSI, R12) // A rows 16–31
	ctx.MOVQ(RBX, R10)
	ctx.SHLQ(U8(4), R10)
	ctx.ADDQ(RDI, R10)     // C rows 16–31
	ctx.MOVQ(U32(64), RDX) // B tile row stride: one half is 16 rows of 64 bytes
	mi := x86enc.MI
	ctx.TESTQ(R9, R9)
	ctx.JZ(LabelRef("amx_zero"))
	ctx.MOVQ(RBX, R11)
	ctx.SHLQ(U8(4), R11)
	ctx.ADDQ(R9, R11) // src rows 16–31
	e.Add(x86enc.TILELOADD(x86enc.T(0), mi(x86enc.R9, x86enc.BX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(1), mi(x86enc.R9, x86enc.BX, 1, 64)))
	e.Add(x86enc.TILELOADD(x86enc.T(2), mi(x86enc.R11, x86enc.BX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(3), mi(x86enc.R11, x86enc.BX, 1, 64)))
	ctx.JMP(LabelRef("amx_loop"))
	ctx.Label("amx_zero")
	ctx.Comment("Not loading C: start from the bias row (a tile load of stride 0), or zero.")
	ctx.Load(ctx.Param("bias"), R11)
	ctx.TESTQ(R11, R11)
	ctx.JZ(LabelRef("amx_tilezero"))
	ctx.XORL(EAX, EAX)
	e.Add(x86enc.TILELOADD(x86enc.T(0), mi(x86enc.R11, x86enc.AX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(1), mi(x86enc.R11, x86enc.AX, 1, 64)))
	e.Add(x86enc.TILELOADD(x86enc.T(2), mi(x86enc.R11, x86enc.AX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(3), mi(x86enc.R11, x86enc.AX, 1, 64)))
	ctx.JMP(LabelRef("amx_loop"))
	ctx.Label("amx_tilezero")
	for t := 0; t < 4; t++ {
		e.Add(x86enc.TILEZERO(x86enc.T(t)))
	}
	ctx.Label("amx_loop")
	e.Add(x86enc.TILELOADD(x86enc.T(4), mi(x86enc.SI, x86enc.CX, 1, 0)))
	e.Add(x86enc.TILELOADD(x86enc.T(6), mi(x86enc.R13, x86enc.DX, 1, 0)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(0), x86enc.T(4), x86enc.T(6)))
	e.Add(x86enc.TILELOADD(x86enc.T(7), mi(x86enc.R13, x86enc.DX, 1, 1024)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(1), x86enc.T(4), x86enc.T(7)))
	e.Add(x86enc.TILELOADD(x86enc.T(5), mi(x86enc.R12, x86enc.CX, 1, 0)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(2), x86enc.T(5), x86enc.T(6)))
	e.Add(x86enc.TDPBF16PS(x86enc.T(3), x86enc.T(5), x86enc.T(7)))
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), R12)
	ctx.ADDQ(U32(2048), R13)
	ctx.DECQ(R8)
	ctx.JNZ(LabelRef("amx_loop"))
	e.Add(x86enc.TILESTORED(mi(x86enc.DI, x86enc.BX, 1, 0), x86enc.T(0)))
	e.Add(x86enc.TILESTORED(mi(x86enc.DI, x86enc.BX, 1, 64), x86enc.T(1)))
	e.Add(x86enc.TILESTORED(mi(x86enc.R10, x86enc.BX, 1, 0), x86enc.T(2)))
	e.Add(x86enc.TILESTORED(mi(x86enc.R10, x86enc.BX, 1, 64), x86enc.T(3)))
	ctx.Comment("Next tile: move a on by as, b by bs, and c (and src, unless nil) by cs, in their frame slots.")
	ctx.Load(ctx.Param("tiles"), R11)
	ctx.DECQ(R11)
	ctx.JZ(LabelRef("amx_done"))
	ctx.Store(R11, ctx.Param("tiles"))
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("as"), RAX)
	ctx.ADDQ(RAX, RSI)
	ctx.Store(RSI, ctx.Param("a"))
	ctx.Load(ctx.Param("b"), RSI)
	ctx.Load(ctx.Param("bs"), RAX)
	ctx.ADDQ(RAX, RSI)
	ctx.Store(RSI, ctx.Param("b"))
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("cs"), RAX)
	ctx.ADDQ(RAX, RDI)
	ctx.Store(RDI, ctx.Param("c"))
	ctx.Load(ctx.Param("src"), RDI)
	ctx.TESTQ(RDI, RDI)
	ctx.JZ(LabelRef("amx_tile"))
	ctx.ADDQ(RAX, RDI)
	ctx.Store(RDI, ctx.Param("src"))
	ctx.JMP(LabelRef("amx_tile"))
	ctx.Label("amx_done")
	e.Add(x86enc.TILERELEASE(), nil)
	ctx.RET()
	return doc
}

// gemmAVX512: C (mr×32 float32, row stride ldc bytes, columns masked by
// k0 and k1, the lane masks of its two halves) = src + A·Bᵀ over 32·steps
// of the inner dimension, A row-major bf16 (row stride lda bytes), B a
// packed panel, 8 rows of C at a time: the loop over the row blocks is in
// the kernel, so a call covers every row of a Tile. Per block, sixteen
// accumulators zmm8–23 (row i's halves in 8+2i and 9+2i), starting from
// src (C's layout, masked alike; src may be c), or when src is nil from
// the row bias (masked; nil: zero); per q the two halves of B's pairs in
// zmm0–1 and each row's pair broadcast into a register (VPBROADCASTD) for
// its two VDPBF16PS. Row i of A is addressed from three bases (rows 0, 3
// and 6) and the row stride as an index with scale 1, 2 or 4. Rows of the
// last block at or past mr are neither read nor written.
func gemmAVX512(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("gemmAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(steps int, a *uint16, lda int, b *uint16, c *float32, ldc int, mr int, k0, k1 uint16, src, bias *float32)")
	ctx.Pragma("noescape")
	doc := "gemmAVX512 computes C = src + A·Bᵀ (src nil: bias or zero) for mr ≥ 1 rows of C, 8 at a time, columns masked by k0 and k1, over 32·steps of the inner dimension, steps ≥ 1 (AVX512-BF16, AVX512F)."
	acc := func(i, h int) VecPhysical {
		return []VecPhysical{Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23}[2*i+h]
	}
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("a"), RSI)
	ctx.Load(ctx.Param("lda"), RCX)
	ctx.Load(ctx.Param("ldc"), RBX)
	ctx.Load(ctx.Param("mr"), R9)
	ctx.Load(ctx.Param("k0"), AX)
	ctx.KMOVW(EAX, K1)
	ctx.Load(ctx.Param("k1"), AX)
	ctx.KMOVW(EAX, K2)
	ctx.Load(ctx.Param("src"), R11)
	ctx.Label("avx_block")
	ctx.Comment("A block of 8 rows of C (fewer in the last): RSI its first row of A, RDI of C, R11 of src (or 0), R9 the rows left.")
	ctx.Load(ctx.Param("b"), R13)
	ctx.Load(ctx.Param("steps"), R8)
	ctx.LEAQ(Mem{Base: RCX, Index: RCX, Scale: 2}, RDX)
	ctx.ADDQ(RSI, RDX) // A row 3
	ctx.LEAQ(Mem{Base: RCX, Index: RCX, Scale: 2}, R12)
	ctx.ADDQ(RDX, R12) // A row 6
	for i := 0; i < 8; i++ {
		for h := 0; h < 2; h++ {
			ctx.VPXORD(acc(i, h), acc(i, h), acc(i, h))
		}
	}
	ctx.TESTQ(R11, R11)
	ctx.JNZ(LabelRef("avx_loadc"))
	ctx.Comment("Not loading C: start every row from the bias row, if any (masked).")
	ctx.Load(ctx.Param("bias"), R10)
	ctx.TESTQ(R10, R10)
	ctx.JZ(LabelRef("avx_loop"))
	ctx.VMOVUPS_Z(Mem{Base: R10}, K1, acc(0, 0))
	ctx.VMOVUPS_Z(Mem{Base: R10, Disp: 64}, K2, acc(0, 1))
	for i := 1; i < 8; i++ {
		ctx.VMOVAPS(acc(0, 0), acc(i, 0))
		ctx.VMOVAPS(acc(0, 1), acc(i, 1))
	}
	ctx.JMP(LabelRef("avx_loop"))
	ctx.Label("avx_loadc")
	ctx.MOVQ(R11, R10)
	for i := 0; i < 8; i++ {
		ctx.CMPQ(R9, U8(i))
		ctx.JLE(LabelRef("avx_loop"))
		ctx.VMOVUPS_Z(Mem{Base: R10}, K1, acc(i, 0))
		ctx.VMOVUPS_Z(Mem{Base: R10, Disp: 64}, K2, acc(i, 1))
		if i < 7 {
			ctx.ADDQ(RBX, R10)
		}
	}
	ctx.Label("avx_loop")
	rows := []Mem{
		{Base: RSI},
		{Base: RSI, Index: RCX, Scale: 1},
		{Base: RSI, Index: RCX, Scale: 2},
		{Base: RDX},
		{Base: RSI, Index: RCX, Scale: 4},
		{Base: RDX, Index: RCX, Scale: 2},
		{Base: R12},
		{Base: R12, Index: RCX, Scale: 1},
	}
	for q := 0; q < 16; q++ {
		ctx.VMOVUPS(Mem{Base: R13, Disp: 64 * q}, Z0)
		ctx.VMOVUPS(Mem{Base: R13, Disp: 1024 + 64*q}, Z1)
		for i, row := range rows {
			// Row i's pair, broadcast once into one of zmm2–7 (in turn, so
			// consecutive rows do not wait on one register) for both halves.
			m := row
			m.Disp = 4 * q
			bc := 2 + (8*q+i)%6
			ctx.VPBROADCASTD(m, []VecPhysical{Z2, Z3, Z4, Z5, Z6, Z7}[bc-2])
			e.Add(x86enc.VDPBF16PS(x86enc.Z(8+2*i), x86enc.NoMask, x86enc.Z(0), x86enc.Z(bc)))
			e.Add(x86enc.VDPBF16PS(x86enc.Z(9+2*i), x86enc.NoMask, x86enc.Z(1), x86enc.Z(bc)))
		}
	}
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), RDX)
	ctx.ADDQ(U8(64), R12)
	ctx.ADDQ(U32(2048), R13)
	ctx.DECQ(R8)
	ctx.JNZ(LabelRef("avx_loop"))
	ctx.MOVQ(RDI, R10)
	for i := 0; i < 8; i++ {
		ctx.CMPQ(R9, U8(i))
		ctx.JLE(LabelRef("avx_next"))
		ctx.VMOVUPS(acc(i, 0), K1, Mem{Base: R10})
		ctx.VMOVUPS(acc(i, 1), K2, Mem{Base: R10, Disp: 64})
		if i < 7 {
			ctx.ADDQ(RBX, R10)
		}
	}
	ctx.Label("avx_next")
	ctx.Comment("The next block: 8 rows down in A (back over the steps' 64 bytes each), C and src.")
	ctx.SUBQ(U8(8), R9)
	ctx.JLE(LabelRef("avx_done"))
	ctx.Load(ctx.Param("steps"), R8)
	ctx.SHLQ(U8(6), R8)
	ctx.SUBQ(R8, RSI)
	ctx.LEAQ(Mem{Base: RSI, Index: RCX, Scale: 8}, RSI)
	ctx.LEAQ(Mem{Base: RDI, Index: RBX, Scale: 8}, RDI)
	ctx.TESTQ(R11, R11)
	ctx.JZ(LabelRef("avx_block"))
	ctx.LEAQ(Mem{Base: R11, Index: RBX, Scale: 8}, R11)
	ctx.JMP(LabelRef("avx_block"))
	ctx.Label("avx_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// toBF16: dst[i] = bf16(src[i]) rounded to nearest even, 16 at a time by
// VCVTNEPS2BF16, then the rest under a zeroing mask (masked-out elements
// are neither read nor written).
func toBF16(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("toBF16AVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, src *float32, n int)")
	ctx.Pragma("noescape")
	doc := "toBF16AVX512 rounds n float32 to bf16, nearest even (AVX512-BF16, AVX512BW)."
	ctx.Load(ctx.Param("dst"), RDI)
	ctx.Load(ctx.Param("src"), RSI)
	ctx.Load(ctx.Param("n"), RCX)
	ctx.Label("cvt_loop")
	ctx.CMPQ(RCX, U8(16))
	ctx.JB(LabelRef("cvt_tail"))
	e.Add(x86enc.VCVTNEPS2BF16(x86enc.Y(19), x86enc.NoMask, x86enc.Mem{Base: x86enc.SI, Bits: 512}))
	ctx.VMOVDQU16(Y19, Mem{Base: RDI})
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(32), RDI)
	ctx.SUBQ(U8(16), RCX)
	ctx.JMP(LabelRef("cvt_loop"))
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

// pairs: dst[2j] = bf16(r0[j]) and dst[2j+1] = bf16(r1[j]) for j < n,
// rounded to nearest even: two rows of the inner dimension interleaved
// into the pairs VDPBF16PS and TDPBF16PS multiply. Per 16 columns one
// VCVTNE2PS2BF16 (row 0 into the low half, row 1 into the high) and one
// VPERMW interleaving the halves; the last n mod 16 under masks (elements
// past n are neither read nor written).
func pairs(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	idx := pairIndex(ctx)
	ctx.Function("pairsAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, r0, r1 *float32, n int)")
	ctx.Pragma("noescape")
	doc := "pairsAVX512 interleaves two float32 rows of n into n bf16 pairs, nearest even (AVX512-BF16, AVX512BW)."
	ctx.Load(ctx.Param("dst"), RDI)
	ctx.Load(ctx.Param("r0"), RSI)
	ctx.Load(ctx.Param("r1"), RDX)
	ctx.Load(ctx.Param("n"), RCX)
	ctx.VMOVDQU16(idx, Z30)
	ctx.Label("pairs_loop")
	ctx.CMPQ(RCX, U8(16))
	ctx.JB(LabelRef("pairs_tail"))
	ctx.VMOVUPS(Mem{Base: RDX}, Z1)
	e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(2), x86enc.NoMask, x86enc.Z(1), x86enc.M(x86enc.SI, 0)))
	ctx.VPERMW(Z2, Z30, Z3)
	ctx.VMOVDQU16(Z3, Mem{Base: RDI})
	ctx.ADDQ(U8(64), RSI)
	ctx.ADDQ(U8(64), RDX)
	ctx.ADDQ(U8(64), RDI)
	ctx.SUBQ(U8(16), RCX)
	ctx.JMP(LabelRef("pairs_loop"))
	ctx.Label("pairs_tail")
	ctx.TESTQ(RCX, RCX)
	ctx.JZ(LabelRef("pairs_done"))
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVW(EAX, K1)
	ctx.ADDQ(RCX, RCX)
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVD(EAX, K2)
	ctx.VMOVUPS_Z(Mem{Base: RSI}, K1, Z4)
	ctx.VMOVUPS_Z(Mem{Base: RDX}, K1, Z1)
	e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(2), x86enc.NoMask, x86enc.Z(1), x86enc.Z(4)))
	ctx.VPERMW(Z2, Z30, Z3)
	ctx.VMOVDQU16(Z3, K2, Mem{Base: RDI})
	ctx.Label("pairs_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// pairsPanels interleaves two float32 rows into bf16 pairs straight into
// B's packed panels, the layout PackBTSeg writes: the pairs of columns
// 16c…16c+15 (64 bytes) go to dst + (c/2)·pl + (c%2)·512 bf16, for every
// c < 2·panels; columns at or past n are zero (masked loads, which read
// nothing there). It replaces a row of pairs in scratch copied out 64
// bytes at a time, a call to memmove each.
func pairsPanels(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	idx := pairIndex(ctx)
	ctx.Function("pairsPanelsAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, pl int, r0, r1 *float32, n, panels int)")
	ctx.Pragma("noescape")
	doc := "pairsPanelsAVX512 interleaves two float32 rows of n into bf16 pairs in B's packed panels (pl bf16 apart), columns past n zero, nearest even (AVX512-BF16, AVX512BW)."
	ctx.Load(ctx.Param("dst"), RDI)
	ctx.Load(ctx.Param("pl"), RBX)
	ctx.SHLQ(U8(1), RBX) // bytes
	ctx.Load(ctx.Param("r0"), RSI)
	ctx.Load(ctx.Param("r1"), RDX)
	ctx.Load(ctx.Param("n"), R8)
	ctx.Load(ctx.Param("panels"), R9)
	ctx.VMOVDQU16(idx, Z30)
	ctx.Label("pp_panel")
	ctx.TESTQ(R9, R9)
	ctx.JZ(LabelRef("pp_done"))
	ctx.CMPQ(R8, U8(32))
	ctx.JL(LabelRef("pp_edge"))
	for h := 0; h < 2; h++ { // a whole panel: both halves' 16 columns
		ctx.VMOVUPS(Mem{Base: RDX, Disp: 64 * h}, Z1)
		e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(2), x86enc.NoMask, x86enc.Z(1), x86enc.M(x86enc.SI, int32(64*h))))
		ctx.VPERMW(Z2, Z30, Z3)
		ctx.VMOVDQU16(Z3, Mem{Base: RDI, Disp: 1024 * h})
	}
	ctx.JMP(LabelRef("pp_next"))
	ctx.Label("pp_edge")
	ctx.Comment("The panel at the edge: each half's columns < n (none when n ≤ 0) loaded under a mask, the rest zero.")
	for h := 0; h < 2; h++ {
		ctx.MOVQ(R8, RCX)
		if h == 1 {
			ctx.SUBQ(U8(16), RCX)
		}
		clampLo, clampHi := fmt.Sprintf("pp_lo%d", h), fmt.Sprintf("pp_hi%d", h)
		ctx.CMPQ(RCX, U8(16))
		ctx.JLE(LabelRef(clampHi))
		ctx.MOVQ(U32(16), RCX)
		ctx.Label(clampHi)
		ctx.TESTQ(RCX, RCX)
		ctx.JGE(LabelRef(clampLo))
		ctx.XORQ(RCX, RCX)
		ctx.Label(clampLo)
		ctx.MOVL(U32(1), EAX)
		ctx.SHLL(CL, EAX)
		ctx.DECL(EAX)
		ctx.KMOVW(EAX, K1)
		ctx.VMOVUPS_Z(Mem{Base: RSI, Disp: 64 * h}, K1, Z4)
		ctx.VMOVUPS_Z(Mem{Base: RDX, Disp: 64 * h}, K1, Z1)
		e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(2), x86enc.NoMask, x86enc.Z(1), x86enc.Z(4)))
		ctx.VPERMW(Z2, Z30, Z3)
		ctx.VMOVDQU16(Z3, Mem{Base: RDI, Disp: 1024 * h})
	}
	ctx.Label("pp_next")
	ctx.ADDQ(U32(128), RSI)
	ctx.ADDQ(U32(128), RDX)
	ctx.ADDQ(RBX, RDI)
	ctx.SUBQ(U8(32), R8)
	ctx.DECQ(R9)
	ctx.JMP(LabelRef("pp_panel"))
	ctx.Label("pp_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// pairIndexMem is the VPERMW index of pairs and transposeAT, emitted once.
var pairIndexMem *Mem

// pairIndex returns the VPERMW index interleaving the low and high 16
// words of a register: word 2j from word j, word 2j+1 from word 16+j.
func pairIndex(ctx *build.Context) Mem {
	if pairIndexMem != nil {
		return *pairIndexMem
	}
	idx := ctx.StaticGlobal("bf16pairidx")
	ctx.DataAttributes(attr.RODATA | attr.NOPTR)
	for w := 0; w < 32; w += 4 {
		var q uint64
		for k := 3; k >= 0; k-- {
			x := w + k
			v := uint64(x / 2) // even words from row 0 (the low half)
			if x%2 == 1 {
				v = uint64(16 + x/2) // odd words from row 1 (the high half)
			}
			q = q<<16 | v
		}
		ctx.AddDatum(2*w, U64(q))
	}
	pairIndexMem = &idx
	return idx
}

// transposeAT packs one 32-deep step of 16 columns of a transposed A:
// rows r < rows (of 32) of src (row stride ld bytes; 16 float32 each,
// columns past cols zero) are paired (rows 2q and 2q+1: VCVTNE2PS2BF16,
// VPERMW) into 16 registers of 16 pairs, transposed as a 16×16 matrix of
// dwords (unpacks of dwords and qwords, then two rounds of VSHUFI32X4),
// and column c's 16 pairs — 32 bf16, row c of the A block for this step —
// stored at dst + c·ldd for c < store. Rows r ≥ rows are zero and are
// not read. With sums, each row read is also added, in order, to
// sums[c] for c < cols (float32, from the unrounded values).
func transposeAT(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	idx := pairIndex(ctx)
	ctx.Function("transposeATAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, ldd int, src *float32, ld int, rows, cols, store int, sums *float32)")
	ctx.Pragma("noescape")
	doc := "transposeATAVX512 packs a 32-deep step of 16 columns of a transposed A into 16 rows of 32 bf16 pairs, nearest even (AVX512-BF16, AVX512BW)."
	z := []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
	// K1: the columns < cols (cols ≤ 16).
	ctx.Load(ctx.Param("cols"), RCX)
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVW(EAX, K1)
	ctx.Load(ctx.Param("src"), RSI)
	ctx.Load(ctx.Param("ld"), RCX)
	ctx.Load(ctx.Param("rows"), R8)
	ctx.Load(ctx.Param("store"), R9)
	ctx.Load(ctx.Param("dst"), RDI)
	ctx.Load(ctx.Param("ldd"), RBX)
	ctx.VMOVDQU16(idx, Z31)
	// The columns' sums so far (sums not nil) in zmm27, each row added in
	// turn.
	ctx.Load(ctx.Param("sums"), R10)
	ctx.VPXORD(Z27, Z27, Z27)
	ctx.TESTQ(R10, R10)
	ctx.JZ(LabelRef("tr_rows"))
	ctx.VMOVUPS_Z(Mem{Base: R10}, K1, Z27)
	ctx.Label("tr_rows")
	// Row pairs into z[0..15]: rows 2q, 2q+1 in zmm24, zmm25.
	for q := 0; q < 16; q++ {
		for h := 0; h < 2; h++ {
			r := 2*q + h
			reg := z[24+h]
			zero, next := fmt.Sprintf("tr_zero%d", r), fmt.Sprintf("tr_next%d", r)
			ctx.CMPQ(R8, U8(r))
			ctx.JLE(LabelRef(zero))
			ctx.VMOVUPS_Z(Mem{Base: RSI}, K1, reg)
			ctx.VADDPS(reg, Z27, Z27)
			ctx.ADDQ(RCX, RSI)
			ctx.JMP(LabelRef(next))
			ctx.Label(zero)
			ctx.VPXORD(reg, reg, reg)
			ctx.Label(next)
		}
		e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(26), x86enc.NoMask, x86enc.Z(25), x86enc.Z(24)))
		ctx.VPERMW(Z26, Z31, z[q])
	}
	ctx.TESTQ(R10, R10)
	ctx.JZ(LabelRef("tr_transpose"))
	ctx.VMOVUPS(Z27, K1, Mem{Base: R10})
	ctx.Label("tr_transpose")
	w := transpose16(ctx, z)
	for c := 0; c < 16; c++ {
		ctx.CMPQ(R9, U8(c))
		ctx.JLE(LabelRef("tr_done"))
		ctx.VMOVDQU32(w[c], Mem{Base: RDI})
		if c < 15 {
			ctx.ADDQ(RBX, RDI)
		}
	}
	ctx.Label("tr_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// transpose16 transposes the 16×16 dwords in z[0:16] (row r in z[r]),
// z[16:32] its scratch: r (z0–15) → t (z16–31) → u (z0–15) → v (z16–31) →
// w (z0–15), returned, w[c] holding column c.
func transpose16(ctx *build.Context, z []VecPhysical) []VecPhysical {
	r, t := z[:16], z[16:]
	for k := 0; k < 8; k++ {
		ctx.VPUNPCKLDQ(r[2*k+1], r[2*k], t[2*k])
		ctx.VPUNPCKHDQ(r[2*k+1], r[2*k], t[2*k+1])
	}
	u := z[:16]
	for k := 0; k < 4; k++ {
		ctx.VPUNPCKLQDQ(t[4*k+2], t[4*k], u[4*k])
		ctx.VPUNPCKHQDQ(t[4*k+2], t[4*k], u[4*k+1])
		ctx.VPUNPCKLQDQ(t[4*k+3], t[4*k+1], u[4*k+2])
		ctx.VPUNPCKHQDQ(t[4*k+3], t[4*k+1], u[4*k+3])
	}
	v := z[16:]
	for _, h := range []int{0, 8} {
		for j := 0; j < 4; j++ {
			ctx.VSHUFI32X4(U8(0x88), u[h+j+4], u[h+j], v[h+j])
			ctx.VSHUFI32X4(U8(0xdd), u[h+j+4], u[h+j], v[h+j+4])
		}
	}
	w := z[:16]
	for j := 0; j < 8; j++ {
		ctx.VSHUFI32X4(U8(0x88), v[j+8], v[j], w[j])
		ctx.VSHUFI32X4(U8(0xdd), v[j+8], v[j], w[j+8])
	}
	return w
}

// packBHalf: one 32-deep step of half a B panel (16 columns) from B's rows
// (PackB with B's rows contiguous, as K's and V's rows are): row r < rows
// (a column of B) is 32 floats, k of them read (k ≤ 32, the rest 0),
// converted by one VCVTNE2PS2BF16 into 16 pairs (channels 2q, 2q+1 as a
// dword, the lower channel in the low half), and the 16×16 dwords are
// transposed (as in transposeAT) so that dst's 16 rows q, 64 bytes apart,
// hold pair q of the 16 columns: the panel's layout. Rows r ≥ rows are 0.
func packBHalf(ctx *build.Context, e *x86enc.Emitter, _ Mem) string {
	ctx.Function("packBHalfAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(dst *uint16, src *float32, ld int, rows, k int)")
	ctx.Pragma("noescape")
	doc := "packBHalfAVX512 packs a 32-deep step of 16 of B's rows (k floats each, ld apart) into half a B panel, nearest even (AVX512-BF16, AVX512F)."
	z := []VecPhysical{Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15,
		Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31}
	// K1: channels [0, min(k, 16)); K2: channels [16, 16 + max(k−16, 0)).
	ctx.Load(ctx.Param("k"), RCX)
	ctx.MOVQ(RCX, RDX)
	ctx.CMPQ(RCX, U8(16))
	ctx.JBE(LabelRef("pb_lo"))
	ctx.MOVQ(U32(16), RCX)
	ctx.Label("pb_lo")
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVW(EAX, K1)
	ctx.SUBQ(RCX, RDX) // max(k−16, 0)
	ctx.MOVQ(RDX, RCX)
	ctx.MOVL(U32(1), EAX)
	ctx.SHLL(CL, EAX)
	ctx.DECL(EAX)
	ctx.KMOVW(EAX, K2)
	ctx.Load(ctx.Param("src"), RSI)
	ctx.Load(ctx.Param("ld"), RBX)
	ctx.SHLQ(U8(2), RBX) // bytes
	ctx.Load(ctx.Param("rows"), R8)
	ctx.Load(ctx.Param("dst"), RDI)
	for r := 0; r < 16; r++ {
		zero, next := fmt.Sprintf("pb_zero%d", r), fmt.Sprintf("pb_next%d", r)
		ctx.CMPQ(R8, U8(r))
		ctx.JLE(LabelRef(zero))
		ctx.VMOVUPS_Z(Mem{Base: RSI}, K1, Z16)
		ctx.VMOVUPS_Z(Mem{Base: RSI, Disp: 64}, K2, Z17)
		e.Add(x86enc.VCVTNE2PS2BF16(x86enc.Z(r), x86enc.NoMask, x86enc.Z(17), x86enc.Z(16)))
		ctx.ADDQ(RBX, RSI)
		ctx.JMP(LabelRef(next))
		ctx.Label(zero)
		ctx.VPXORD(z[r], z[r], z[r])
		ctx.Label(next)
	}
	w := transpose16(ctx, z) // w[q] holds pair q of the 16 rows
	for q := 0; q < 16; q++ {
		ctx.VMOVDQU32(w[q], Mem{Base: RDI, Disp: 64 * q})
	}
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}

// scaleAdd: c[j] = s·c[j] + u·b[j] for j < n (b nil: c[j] = s·c[j]),
// float32 products and a float32 sum each, never fused, so that the Go
// level's bits are the same: the logits' scale, the dense logits' bias and
// a mixture's random logits on a strip just computed, and the bias
// gradient's column sums. 32 floats a step in two ZMMs, then 16, then the
// last n mod 16 under a mask (elements past n are neither read nor
// written). AVX-512F only: it runs at both bf16 levels, whose CPUs have it.
func scale(ctx *build.Context, _ *x86enc.Emitter, _ Mem) string {
	ctx.Function("scaleAddAVX512")
	ctx.Attributes(attr.NOSPLIT)
	ctx.SignatureExpr("func(c *float32, n int, s float32, b *float32, u float32)")
	ctx.Pragma("noescape")
	doc := "scaleAddAVX512 sets c[j] = s·c[j] + u·b[j] for j < n, or c[j] = s·c[j] when b is nil (AVX512F)."
	ctx.Load(ctx.Param("c"), RDI)
	ctx.Load(ctx.Param("n"), RCX)
	ctx.Load(ctx.Param("s"), X0)
	ctx.Load(ctx.Param("b"), RSI)
	ctx.Load(ctx.Param("u"), X4)
	ctx.VBROADCASTSS(X0, Z0)
	ctx.VBROADCASTSS(X4, Z4)
	loops := func(pre string, add bool) {
		step := func(disp int, z VecPhysical, k ...Op) {
			if len(k) > 0 {
				ctx.VMOVUPS_Z(Mem{Base: RDI, Disp: disp}, K1, z)
				ctx.VMULPS(z, Z0, z)
			} else {
				ctx.VMULPS(Mem{Base: RDI, Disp: disp}, Z0, z)
			}
			if add {
				if len(k) > 0 {
					ctx.VMOVUPS_Z(Mem{Base: RSI, Disp: disp}, K1, Z3)
					ctx.VMULPS(Z3, Z4, Z3)
				} else {
					ctx.VMULPS(Mem{Base: RSI, Disp: disp}, Z4, Z3)
				}
				ctx.VADDPS(Z3, z, z)
			}
		}
		adv := func(bytes int) {
			ctx.ADDQ(U8(bytes), RDI)
			if add {
				ctx.ADDQ(U8(bytes), RSI)
			}
		}
		ctx.Label(pre + "loop")
		ctx.CMPQ(RCX, U8(32))
		ctx.JB(LabelRef(pre + "16"))
		step(0, Z1)
		step(64, Z2)
		ctx.VMOVUPS(Z1, Mem{Base: RDI})
		ctx.VMOVUPS(Z2, Mem{Base: RDI, Disp: 64})
		adv(128)
		ctx.SUBQ(U8(32), RCX)
		ctx.JMP(LabelRef(pre + "loop"))
		ctx.Label(pre + "16")
		ctx.CMPQ(RCX, U8(16))
		ctx.JB(LabelRef(pre + "tail"))
		step(0, Z1)
		ctx.VMOVUPS(Z1, Mem{Base: RDI})
		adv(64)
		ctx.SUBQ(U8(16), RCX)
		ctx.Label(pre + "tail")
		ctx.TESTQ(RCX, RCX)
		ctx.JZ(LabelRef("scale_done"))
		ctx.MOVL(U32(1), EAX)
		ctx.SHLL(CL, EAX)
		ctx.DECL(EAX)
		ctx.KMOVW(EAX, K1)
		step(0, Z1, K1)
		ctx.VMOVUPS(Z1, K1, Mem{Base: RDI})
		ctx.JMP(LabelRef("scale_done"))
	}
	ctx.TESTQ(RSI, RSI)
	ctx.JZ(LabelRef("scale_loop"))
	loops("scale_add_", true)
	loops("scale_", false)
	ctx.Label("scale_done")
	ctx.VZEROUPPER()
	ctx.RET()
	return doc
}
