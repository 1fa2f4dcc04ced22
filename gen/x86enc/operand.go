// Package x86enc encodes the x86-64 instructions that Go's assembler (and
// avo) cannot spell: AVX512-BF16 (VDPBF16PS, VCVTNE2PS2BF16, VCVTNEPS2BF16,
// EVEX-encoded) and AMX-TILE/AMX-BF16 (LDTILECFG, STTILECFG, TILELOADD,
// TILELOADDT1, TILESTORED, TDPBF16PS, TILEZERO, TILERELEASE, VEX-encoded).
//
// Each encoder takes its operands in Intel order (destination first) and
// returns an Inst: the exact machine bytes and the Intel-syntax text of the
// instruction. GoAsm renders an Inst as BYTE directives for a Go assembly
// TEXT block; Emitter adds them to an avo build.Context. The bytes are the
// ones GNU as chooses for the same Intel text (shortest displacement,
// EVEX disp8*N compression, SIB only where needed), which the tests check
// byte for byte.
//
// The encoded instructions use fixed physical registers that avo's register
// allocator cannot see, and avo's "Requires:" header does not list their
// ISA: callers must use physical registers around them and check the CPU
// features themselves.
package x86enc

import (
	"fmt"
	"strings"
)

// GPR is a 64-bit general-purpose register numbered as Go's assembler (and
// the hardware) numbers them: AX=0, CX=1, DX=2, BX=3, SP=4, BP=5, SI=6,
// DI=7, R8=8 … R15=15.
type GPR uint8

// The general-purpose registers.
const (
	AX GPR = iota
	CX
	DX
	BX
	SP
	BP
	SI
	DI
	R8
	R9
	R10
	R11
	R12
	R13
	R14
	R15
)

var gprIntel = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
	"r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
var gprGo = [16]string{"AX", "CX", "DX", "BX", "SP", "BP", "SI", "DI",
	"R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"}

func (r GPR) valid() bool { return r < 16 }

// Intel returns the register's Intel name (rax … r15).
func (r GPR) Intel() string {
	if !r.valid() {
		return fmt.Sprintf("gpr%d?", uint8(r))
	}
	return gprIntel[r]
}

// String returns the register's Go assembler name (AX … R15).
func (r GPR) String() string {
	if !r.valid() {
		return fmt.Sprintf("GPR(%d)", uint8(r))
	}
	return gprGo[r]
}

// Operand is a vector register (Vec) or a memory operand (Mem).
type Operand interface {
	isOperand()
	// Intel returns the operand in Intel syntax (memory without its size).
	Intel() string
}

// Vec is a vector register: Bits is 128 (XMM), 256 (YMM) or 512 (ZMM) and
// N its number, 0–31 (16–31 need EVEX).
type Vec struct {
	Bits int
	N    int
}

// X returns XMM register n.
func X(n int) Vec { return Vec{Bits: 128, N: n} }

// Y returns YMM register n.
func Y(n int) Vec { return Vec{Bits: 256, N: n} }

// Z returns ZMM register n.
func Z(n int) Vec { return Vec{Bits: 512, N: n} }

func (Vec) isOperand() {}

func (v Vec) prefix() string {
	switch v.Bits {
	case 128:
		return "xmm"
	case 256:
		return "ymm"
	case 512:
		return "zmm"
	}
	return fmt.Sprintf("vec%d_", v.Bits)
}

// Intel returns the register's Intel name, e.g. zmm17.
func (v Vec) Intel() string { return fmt.Sprintf("%s%d", v.prefix(), v.N) }

// String returns the register's Go assembler name, e.g. Z17.
func (v Vec) String() string {
	return fmt.Sprintf("%s%d", strings.ToUpper(v.prefix()[:1]), v.N)
}

func (v Vec) check(what string) error {
	if v.Bits != 128 && v.Bits != 256 && v.Bits != 512 {
		return fmt.Errorf("%s: vector width %d bits, want 128, 256 or 512", what, v.Bits)
	}
	if v.N < 0 || v.N > 31 {
		return fmt.Errorf("%s: %s register number %d out of range 0–31", what, v.prefix(), v.N)
	}
	return nil
}

// Mem is a memory operand [Base + Index*Scale + Disp]. Scale 0 means no
// index (Index must then be left 0); otherwise Scale is 1, 2, 4 or 8 and
// Index may be any register but SP. Bcst requests EVEX embedded broadcast
// of a 32-bit element ({1toN}) where the instruction allows it. Bits is the
// operand's width, needed only where the other operands do not fix it
// (the memory source of VCVTNEPS2BF16); 0 means inferred.
type Mem struct {
	Base  GPR
	Index GPR
	Scale uint8
	Disp  int32
	Bcst  bool
	Bits  int
}

// M returns the memory operand [base + disp].
func M(base GPR, disp int32) Mem { return Mem{Base: base, Disp: disp} }

// MI returns the memory operand [base + index*scale + disp].
func MI(base, index GPR, scale uint8, disp int32) Mem {
	return Mem{Base: base, Index: index, Scale: scale, Disp: disp}
}

// Broadcast returns m with embedded broadcast ({1toN}) requested.
func (m Mem) Broadcast() Mem { m.Bcst = true; return m }

func (Mem) isOperand() {}

func (m Mem) hasIndex() bool { return m.Scale != 0 }

func (m Mem) check(what string) error {
	if !m.Base.valid() {
		return fmt.Errorf("%s: base register %d out of range 0–15", what, m.Base)
	}
	switch m.Scale {
	case 0:
		if m.Index != 0 {
			return fmt.Errorf("%s: index %s given with scale 0 (scale 0 means no index)", what, m.Index)
		}
	case 1, 2, 4, 8:
		if !m.Index.valid() {
			return fmt.Errorf("%s: index register %d out of range 0–15", what, m.Index)
		}
		if m.Index == SP {
			return fmt.Errorf("%s: SP cannot be an index register", what)
		}
	default:
		return fmt.Errorf("%s: scale %d, want 1, 2, 4 or 8 (or 0 for no index)", what, m.Scale)
	}
	return nil
}

// Intel returns the address in Intel syntax, e.g. [rax+r12*4+64].
func (m Mem) Intel() string {
	var b strings.Builder
	b.WriteString("[")
	b.WriteString(m.Base.Intel())
	if m.hasIndex() {
		fmt.Fprintf(&b, "+%s*%d", m.Index.Intel(), m.Scale)
	}
	if m.Disp > 0 {
		fmt.Fprintf(&b, "+%d", m.Disp)
	} else if m.Disp < 0 {
		fmt.Fprintf(&b, "%d", m.Disp)
	}
	b.WriteString("]")
	return b.String()
}

// Mask is an EVEX opmask: K 0 means no masking, 1–7 selects k1–k7; Zero
// asks for zeroing-masking ({z}) instead of merging and needs K ≠ 0.
type Mask struct {
	K    int
	Zero bool
}

// NoMask is the absence of masking.
var NoMask = Mask{}

// K returns merge-masking with opmask k (1–7).
func K(k int) Mask { return Mask{K: k} }

// KZ returns zeroing-masking with opmask k (1–7).
func KZ(k int) Mask { return Mask{K: k, Zero: true} }

func (k Mask) check(what string) error {
	if k.K < 0 || k.K > 7 {
		return fmt.Errorf("%s: opmask k%d out of range 0–7", what, k.K)
	}
	if k.Zero && k.K == 0 {
		return fmt.Errorf("%s: zeroing-masking {z} needs an opmask k1–k7", what)
	}
	return nil
}

// Intel returns the mask decoration, e.g. {k1}{z}, or "".
func (k Mask) Intel() string {
	s := ""
	if k.K != 0 {
		s = fmt.Sprintf("{k%d}", k.K)
	}
	if k.Zero {
		s += "{z}"
	}
	return s
}

// Tile is an AMX tile register tmm0–tmm7.
type Tile int

// T returns tile register tmm n.
func T(n int) Tile { return Tile(n) }

// Intel returns the tile's name, e.g. tmm3.
func (t Tile) Intel() string { return fmt.Sprintf("tmm%d", int(t)) }

func (t Tile) check(what string) error {
	if t < 0 || t > 7 {
		return fmt.Errorf("%s: tile register tmm%d out of range 0–7", what, int(t))
	}
	return nil
}
