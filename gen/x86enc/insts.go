package x86enc

import (
	"fmt"
	"slices"
)

// ---- AVX512-BF16 (EVEX) ----

// bf16ISA is the feature list of an AVX512-BF16 instruction of vector
// length bits: below 512 bits it also needs AVX512VL.
func bf16ISA(bits int) []string {
	if bits < 512 {
		return []string{"AVX512_BF16", "AVX512VL"}
	}
	return []string{"AVX512_BF16"}
}

var (
	isaTile = []string{"AMX_TILE"}
	isaBF16 = []string{"AMX_TILE", "AMX_BF16"}
)

// evexNDS encodes the common form "op dst{k}{z}, src1, src2/mem/bcst" with
// a full-vector tuple (disp8*N with N the vector bytes, 4 when broadcast).
func evexNDS(name string, pp, op byte, dst Vec, k Mask, src1 Vec, src2 Operand) (Inst, error) {
	if err := dst.check(name + " destination"); err != nil {
		return Inst{}, err
	}
	if err := src1.check(name + " first source"); err != nil {
		return Inst{}, err
	}
	if src1.Bits != dst.Bits {
		return Inst{}, fmt.Errorf("%s: first source %s and destination %s differ in width", name, src1.Intel(), dst.Intel())
	}
	if err := k.check(name); err != nil {
		return Inst{}, err
	}
	s2, err := evexSource(name, src2, dst.Bits)
	if err != nil {
		return Inst{}, err
	}
	e := evex{pp: pp, mmm: map0F38, w: 0, op: op, ll: llOf(dst.Bits),
		reg: dst.N, vvvv: src1.N, rm: src2, k: k, n: int32(dst.Bits / 8)}
	return Inst{
		Intel: fmt.Sprintf("%s %s%s, %s, %s", name, dst.Intel(), k.Intel(), src1.Intel(), s2),
		Bytes: e.encode(),
		ISA:   bf16ISA(dst.Bits),
	}, nil
}

// VDPBF16PS encodes "vdpbf16ps dst{k}{z}, src1, src2" (EVEX.F3.0F38.W0 52):
// for each float32 lane i, dst[i] += src1.bf16[2i]·src2.bf16[2i] +
// src1.bf16[2i+1]·src2.bf16[2i+1]. dst and src1 are XMM, YMM or ZMM of the
// same width; src2 is a register of that width or memory (optionally a
// 32-bit broadcast). Needs AVX512_BF16 (and AVX512VL below 512 bits).
func VDPBF16PS(dst Vec, k Mask, src1 Vec, src2 Operand) (Inst, error) {
	return evexNDS("vdpbf16ps", ppF3, 0x52, dst, k, src1, src2)
}

// VCVTNE2PS2BF16 encodes "vcvtne2ps2bf16 dst{k}{z}, src1, src2"
// (EVEX.F2.0F38.W0 72): the float32 elements of src2 rounded to bf16
// (nearest even) fill the low half of dst, those of src1 the high half.
// Widths and memory forms as VDPBF16PS.
func VCVTNE2PS2BF16(dst Vec, k Mask, src1 Vec, src2 Operand) (Inst, error) {
	return evexNDS("vcvtne2ps2bf16", ppF2, 0x72, dst, k, src1, src2)
}

// VCVTNEPS2BF16 encodes "vcvtneps2bf16 dst{k}{z}, src" (EVEX.F3.0F38.W0
// 72): the float32 elements of src rounded to bf16 (nearest even). A 512-bit
// source writes a YMM destination; 128- and 256-bit sources write an XMM.
// A memory source must state its width in src.Bits (128, 256 or 512).
func VCVTNEPS2BF16(dst Vec, k Mask, src Operand) (Inst, error) {
	const name = "vcvtneps2bf16"
	if err := dst.check(name + " destination"); err != nil {
		return Inst{}, err
	}
	if err := k.check(name); err != nil {
		return Inst{}, err
	}
	var bits int
	switch s := src.(type) {
	case Vec:
		bits = s.Bits
	case Mem:
		bits = s.Bits
		if bits != 128 && bits != 256 && bits != 512 {
			return Inst{}, fmt.Errorf("%s: memory source needs its width in Bits (128, 256 or 512), not %d", name, bits)
		}
	}
	want := 128
	if bits == 512 {
		want = 256
	}
	if bits != 0 && dst.Bits != want {
		return Inst{}, fmt.Errorf("%s: a %d-bit source converts into a %d-bit destination, not %s", name, bits, want, dst.Intel())
	}
	s, err := evexSource(name, src, bits)
	if err != nil {
		return Inst{}, err
	}
	e := evex{pp: ppF3, mmm: map0F38, w: 0, op: 0x72, ll: llOf(bits),
		reg: dst.N, vvvv: -1, rm: src, k: k, n: int32(bits / 8)}
	return Inst{
		Intel: fmt.Sprintf("%s %s%s, %s", name, dst.Intel(), k.Intel(), s),
		Bytes: e.encode(),
		ISA:   bf16ISA(bits),
	}, nil
}

// ---- AMX (VEX) ----

func amxMem(name string, m Mem) error {
	if m.Bcst {
		return fmt.Errorf("%s: AMX memory operands have no broadcast", name)
	}
	if m.Bits != 0 {
		return fmt.Errorf("%s: AMX memory operands take no width (Bits %d)", name, m.Bits)
	}
	return m.check(name + " memory operand")
}

// LDTILECFG encodes "ldtilecfg [m]" (VEX.128.NP.0F38.W0 49 /0): loads the
// 64-byte tile configuration. Needs AMX-TILE.
func LDTILECFG(m Mem) (Inst, error) {
	if err := amxMem("ldtilecfg", m); err != nil {
		return Inst{}, err
	}
	e := vex{pp: ppNone, mmmmm: map0F38, op: 0x49, reg: 0, vvvv: -1, rm: m}
	return Inst{Intel: "ldtilecfg " + m.Intel(), Bytes: e.encode(), ISA: slices.Clone(isaTile)}, nil
}

// STTILECFG encodes "sttilecfg [m]" (VEX.128.66.0F38.W0 49 /0): stores the
// 64-byte tile configuration. Needs AMX-TILE.
func STTILECFG(m Mem) (Inst, error) {
	if err := amxMem("sttilecfg", m); err != nil {
		return Inst{}, err
	}
	e := vex{pp: pp66, mmmmm: map0F38, op: 0x49, reg: 0, vvvv: -1, rm: m}
	return Inst{Intel: "sttilecfg " + m.Intel(), Bytes: e.encode(), ISA: slices.Clone(isaTile)}, nil
}

func tileLoad(name string, pp byte, t Tile, m Mem) (Inst, error) {
	if err := t.check(name); err != nil {
		return Inst{}, err
	}
	if err := amxMem(name, m); err != nil {
		return Inst{}, err
	}
	e := vex{pp: pp, mmmmm: map0F38, op: 0x4B, reg: int(t), vvvv: -1, rm: m, sib: true}
	return Inst{Intel: fmt.Sprintf("%s %s, %s", name, t.Intel(), m.Intel()), Bytes: e.encode(), ISA: slices.Clone(isaTile)}, nil
}

// TILELOADD encodes "tileloadd tmm, [base+index*scale+disp]"
// (VEX.128.F2.0F38.W0 4B, SIB addressing): loads the tile's rows from base
// + disp with a row stride of index*scale bytes (no index: stride 0).
// Needs AMX-TILE.
func TILELOADD(t Tile, m Mem) (Inst, error) { return tileLoad("tileloadd", ppF2, t, m) }

// TILELOADDT1 is TILELOADD with a hint that the data will not be reused
// (VEX.128.66.0F38.W0 4B). Needs AMX-TILE.
func TILELOADDT1(t Tile, m Mem) (Inst, error) { return tileLoad("tileloaddt1", pp66, t, m) }

// TILESTORED encodes "tilestored [base+index*scale+disp], tmm"
// (VEX.128.F3.0F38.W0 4B): stores the tile's rows with a row stride of
// index*scale bytes. Needs AMX-TILE.
func TILESTORED(m Mem, t Tile) (Inst, error) {
	const name = "tilestored"
	if err := t.check(name); err != nil {
		return Inst{}, err
	}
	if err := amxMem(name, m); err != nil {
		return Inst{}, err
	}
	e := vex{pp: ppF3, mmmmm: map0F38, op: 0x4B, reg: int(t), vvvv: -1, rm: m, sib: true}
	return Inst{Intel: fmt.Sprintf("%s %s, %s", name, m.Intel(), t.Intel()), Bytes: e.encode(), ISA: slices.Clone(isaTile)}, nil
}

// TDPBF16PS encodes "tdpbf16ps dst, a, b" (VEX.128.F3.0F38.W0 5C): dst
// (float32, M×N) += a (bf16, M×K) · b (bf16 in pairs, K/2 × 2N). The three
// tiles must differ. Needs AMX-BF16.
func TDPBF16PS(dst, a, b Tile) (Inst, error) {
	const name = "tdpbf16ps"
	for _, t := range []Tile{dst, a, b} {
		if err := t.check(name); err != nil {
			return Inst{}, err
		}
	}
	if dst == a || dst == b || a == b {
		return Inst{}, fmt.Errorf("%s: tiles %s, %s, %s must all differ", name, dst.Intel(), a.Intel(), b.Intel())
	}
	e := vex{pp: ppF3, mmmmm: map0F38, op: 0x5C, reg: int(dst), vvvv: int(b), rm: a}
	return Inst{Intel: fmt.Sprintf("%s %s, %s, %s", name, dst.Intel(), a.Intel(), b.Intel()), Bytes: e.encode(), ISA: slices.Clone(isaBF16)}, nil
}

// TILEZERO encodes "tilezero tmm" (VEX.128.F2.0F38.W0 49 /r, mod 11).
// Needs AMX-TILE.
func TILEZERO(t Tile) (Inst, error) {
	if err := t.check("tilezero"); err != nil {
		return Inst{}, err
	}
	e := vex{pp: ppF2, mmmmm: map0F38, op: 0x49, reg: int(t), vvvv: -1, rm: Tile(0)}
	return Inst{Intel: "tilezero " + t.Intel(), Bytes: e.encode(), ISA: slices.Clone(isaTile)}, nil
}

// TILERELEASE encodes "tilerelease" (VEX.128.NP.0F38.W0 49 C0): returns the
// tile state to its initial (unconfigured) state. Needs AMX-TILE.
func TILERELEASE() Inst {
	e := vex{pp: ppNone, mmmmm: map0F38, op: 0x49, reg: 0, vvvv: -1, rm: Tile(0)}
	return Inst{Intel: "tilerelease", Bytes: e.encode(), ISA: slices.Clone(isaTile)}
}
