package x86enc

// cases are recorded encodings: the bytes GNU as 2.40 produced for the
// Intel text. TestTable checks the encoder against them without any
// assembler; TestTableAgainstGNUAs re-assembles them where as exists.
var cases = []struct {
	name  string
	enc   func() (Inst, error)
	hex   string // the bytes, as GNU as 2.40 emits them
	intel string
}{
	{"zmm", func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), Z(2)) }, "62 f2 76 48 52 c2", "vdpbf16ps zmm0, zmm1, zmm2"},
	{"ymm 9,17,30 merge k3", func() (Inst, error) { return VDPBF16PS(Y(9), K(3), Y(17), Y(30)) }, "62 12 76 23 52 ce", "vdpbf16ps ymm9{k3}, ymm17, ymm30"},
	{"xmm 31,15,8 zero k7", func() (Inst, error) { return VDPBF16PS(X(31), KZ(7), X(15), X(8)) }, "62 42 06 8f 52 f8", "vdpbf16ps xmm31{k7}{z}, xmm15, xmm8"},
	{"[rsp] needs SIB", func() (Inst, error) { return VDPBF16PS(Z(16), NoMask, Z(5), M(SP, 0)) }, "62 e2 56 48 52 04 24", "vdpbf16ps zmm16, zmm5, zmmword ptr [rsp]"},
	{"[r12+64] SIB, disp8*64=1", func() (Inst, error) { return VDPBF16PS(Z(1), NoMask, Z(2), M(R12, 64)) }, "62 d2 6e 48 52 4c 24 01", "vdpbf16ps zmm1, zmm2, zmmword ptr [r12+64]"},
	{"[rbp] disp8 0", func() (Inst, error) { return VDPBF16PS(Z(1), NoMask, Z(2), M(BP, 0)) }, "62 f2 6e 48 52 4d 00", "vdpbf16ps zmm1, zmm2, zmmword ptr [rbp]"},
	{"[r13] disp8 0", func() (Inst, error) { return VDPBF16PS(Y(1), K(1), Y(2), M(R13, 0)) }, "62 d2 6e 29 52 4d 00", "vdpbf16ps ymm1{k1}, ymm2, ymmword ptr [r13]"},
	{"[rax+r12*8-8192] disp8*64=-128", func() (Inst, error) { return VDPBF16PS(Z(8), NoMask, Z(24), MI(AX, R12, 8, -8192)) }, "62 32 3e 40 52 44 e0 80", "vdpbf16ps zmm8, zmm24, zmmword ptr [rax+r12*8-8192]"},
	{"[rax+8] disp32 (not a multiple of 64)", func() (Inst, error) { return VDPBF16PS(Z(8), NoMask, Z(9), M(AX, 8)) }, "62 72 36 48 52 80 08 00 00 00", "vdpbf16ps zmm8, zmm9, zmmword ptr [rax+8]"},
	{"[rax+8192] disp32 (128·64)", func() (Inst, error) { return VDPBF16PS(Z(8), NoMask, Z(9), M(AX, 8192)) }, "62 72 36 48 52 80 00 20 00 00", "vdpbf16ps zmm8, zmm9, zmmword ptr [rax+8192]"},
	{"[r15+4]{1to16} disp8*4=1", func() (Inst, error) { return VDPBF16PS(Z(20), KZ(2), Z(21), M(R15, 4).Broadcast()) }, "62 c2 56 d2 52 67 01", "vdpbf16ps zmm20{k2}{z}, zmm21, dword ptr [r15+4]{1to16}"},
	{"[r13+r9*2+1M] xmm", func() (Inst, error) { return VDPBF16PS(X(3), NoMask, X(4), MI(R13, R9, 2, 1<<20)) }, "62 92 5e 08 52 9c 4d 00 00 10 00", "vdpbf16ps xmm3, xmm4, xmmword ptr [r13+r9*2+1048576]"},
	{"cvtne2 zmm zero k1", func() (Inst, error) { return VCVTNE2PS2BF16(Z(3), KZ(1), Z(20), Z(11)) }, "62 d2 5f c1 72 db", "vcvtne2ps2bf16 zmm3{k1}{z}, zmm20, zmm11"},
	{"cvtne2 xmm [rbx+rsi*4+16]{1to4}", func() (Inst, error) { return VCVTNE2PS2BF16(X(12), NoMask, X(13), MI(BX, SI, 4, 16).Broadcast()) }, "62 72 17 18 72 64 b3 04", "vcvtne2ps2bf16 xmm12, xmm13, dword ptr [rbx+rsi*4+16]{1to4}"},
	{"cvtne2 ymm [rdi+32]", func() (Inst, error) { return VCVTNE2PS2BF16(Y(27), K(5), Y(0), M(DI, 32)) }, "62 62 7f 2d 72 5f 01", "vcvtne2ps2bf16 ymm27{k5}, ymm0, ymmword ptr [rdi+32]"},
	{"cvtne zmm→ymm", func() (Inst, error) { return VCVTNEPS2BF16(Y(1), NoMask, Z(2)) }, "62 f2 7e 48 72 ca", "vcvtneps2bf16 ymm1, zmm2"},
	{"cvtne ymm→xmm k2", func() (Inst, error) { return VCVTNEPS2BF16(X(17), K(2), Y(25)) }, "62 82 7e 2a 72 c9", "vcvtneps2bf16 xmm17{k2}, ymm25"},
	{"cvtne xmm→xmm", func() (Inst, error) { return VCVTNEPS2BF16(X(9), KZ(6), X(10)) }, "62 52 7e 8e 72 ca", "vcvtneps2bf16 xmm9{k6}{z}, xmm10"},
	{"cvtne ymmword [rdi+32]", func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Mem{Base: DI, Disp: 32, Bits: 256}) }, "62 f2 7e 28 72 47 01", "vcvtneps2bf16 xmm0, ymmword ptr [rdi+32]"},
	{"cvtne zmmword [r12+r12*1+128]", func() (Inst, error) {
		return VCVTNEPS2BF16(Y(30), NoMask, Mem{Base: R12, Index: R12, Scale: 1, Disp: 128, Bits: 512})
	}, "62 02 7e 48 72 74 24 02", "vcvtneps2bf16 ymm30, zmmword ptr [r12+r12*1+128]"},
	{"cvtne [rax]{1to4}", func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Mem{Base: AX, Bcst: true, Bits: 128}) }, "62 f2 7e 18 72 00", "vcvtneps2bf16 xmm0, dword ptr [rax]{1to4}"},
	{"cvtne [rax]{1to8}", func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Mem{Base: AX, Bcst: true, Bits: 256}) }, "62 f2 7e 38 72 00", "vcvtneps2bf16 xmm0, dword ptr [rax]{1to8}"},
	{"ldtilecfg [rax]", func() (Inst, error) { return LDTILECFG(M(AX, 0)) }, "c4 e2 78 49 00", "ldtilecfg [rax]"},
	{"ldtilecfg [rsp+8]", func() (Inst, error) { return LDTILECFG(M(SP, 8)) }, "c4 e2 78 49 44 24 08", "ldtilecfg [rsp+8]"},
	{"ldtilecfg [r9+512]", func() (Inst, error) { return LDTILECFG(M(R9, 512)) }, "c4 c2 78 49 81 00 02 00 00", "ldtilecfg [r9+512]"},
	{"sttilecfg [r13]", func() (Inst, error) { return STTILECFG(M(R13, 0)) }, "c4 c2 79 49 45 00", "sttilecfg [r13]"},
	{"tileloadd tmm0, [rsi+rdx*1]", func() (Inst, error) { return TILELOADD(T(0), MI(SI, DX, 1, 0)) }, "c4 e2 7b 4b 04 16", "tileloadd tmm0, [rsi+rdx*1]"},
	{"tileloadd tmm7, [r12+1024] (no index: SIB none)", func() (Inst, error) { return TILELOADD(T(7), M(R12, 1024)) }, "c4 c2 7b 4b bc 24 00 04 00 00", "tileloadd tmm7, [r12+1024]"},
	{"tileloadd tmm2, [rbp+r14*8]", func() (Inst, error) { return TILELOADD(T(2), MI(BP, R14, 8, 0)) }, "c4 a2 7b 4b 54 f5 00", "tileloadd tmm2, [rbp+r14*8]"},
	{"tileloaddt1 tmm3, [r8+r15*4-8]", func() (Inst, error) { return TILELOADDT1(T(3), MI(R8, R15, 4, -8)) }, "c4 82 79 4b 5c b8 f8", "tileloaddt1 tmm3, [r8+r15*4-8]"},
	{"tilestored [rbp+r11*1], tmm5", func() (Inst, error) { return TILESTORED(MI(BP, R11, 1, 0), T(5)) }, "c4 a2 7a 4b 6c 1d 00", "tilestored [rbp+r11*1], tmm5"},
	{"tilestored [rax], tmm1", func() (Inst, error) { return TILESTORED(M(AX, 0), T(1)) }, "c4 e2 7a 4b 0c 20", "tilestored [rax], tmm1"},
	{"tdpbf16ps tmm0, tmm1, tmm2", func() (Inst, error) { return TDPBF16PS(T(0), T(1), T(2)) }, "c4 e2 6a 5c c1", "tdpbf16ps tmm0, tmm1, tmm2"},
	{"tdpbf16ps tmm7, tmm5, tmm6", func() (Inst, error) { return TDPBF16PS(T(7), T(5), T(6)) }, "c4 e2 4a 5c fd", "tdpbf16ps tmm7, tmm5, tmm6"},
	{"tilezero tmm4", func() (Inst, error) { return TILEZERO(T(4)) }, "c4 e2 7b 49 e0", "tilezero tmm4"},
	{"tilerelease", func() (Inst, error) { return TILERELEASE(), nil }, "c4 e2 78 49 c0", "tilerelease"},
}
