package x86enc

import (
	"fmt"
	"math"
)

// Inst is one encoded instruction.
type Inst struct {
	// Intel is the instruction in Intel syntax as GNU as reads it after
	// ".intel_syntax noprefix", e.g. "vdpbf16ps zmm1{k1}, zmm2, zmm3".
	Intel string
	// Bytes is the machine encoding.
	Bytes []byte
	// ISA lists the CPUID features the instruction needs, as the Intel
	// manual names them (AVX512_BF16, AVX512VL, AMX_TILE, AMX_BF16): the
	// caller must check them before running it.
	ISA []string
}

// Opcode maps (EVEX.mmm / VEX.m-mmmm).
const (
	map0F38 = 2
)

// Mandatory prefixes (pp).
const (
	ppNone = 0
	pp66   = 1
	ppF3   = 2
	ppF2   = 3
)

// modrmMem appends ModRM, optional SIB and displacement for memory operand
// m with reg3 in ModRM.reg. n is the disp8 scale (EVEX disp8*N; 1 for
// VEX); forceSIB requests a SIB byte even without an index (AMX sibmem).
// The choices follow GNU as: no displacement when it is 0 and the base is
// not BP/R13, disp8 (scaled by n) when it fits, disp32 otherwise.
func modrmMem(out []byte, reg3 byte, m Mem, n int32, forceSIB bool) []byte {
	base := byte(m.Base) & 7
	needSIB := forceSIB || m.hasIndex() || base == 4
	var mod byte
	var disp []byte
	switch {
	case m.Disp == 0 && base != 5:
		mod = 0
	case m.Disp%n == 0 && m.Disp/n >= math.MinInt8 && m.Disp/n <= math.MaxInt8:
		mod = 1
		disp = []byte{byte(int8(m.Disp / n))}
	default:
		mod = 2
		d := uint32(m.Disp)
		disp = []byte{byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24)}
	}
	rm := base
	if needSIB {
		rm = 4
	}
	out = append(out, mod<<6|(reg3&7)<<3|rm)
	if needSIB {
		index := byte(4) // none
		var ss byte
		if m.hasIndex() {
			index = byte(m.Index) & 7
			ss = map[uint8]byte{1: 0, 2: 1, 4: 2, 8: 3}[m.Scale]
		}
		out = append(out, ss<<6|index<<3|base)
	}
	return append(out, disp...)
}

func inv(bit int) byte { return byte(^bit & 1) }

// evex describes one EVEX-encoded instruction; the operand numbers are
// already validated.
type evex struct {
	pp, mmm, w, op byte
	ll             byte // 0: 128, 1: 256, 2: 512
	reg            int  // ModRM.reg operand, 0–31
	vvvv           int  // NDS operand 0–31, or -1 when unused
	rm             Operand
	k              Mask
	n              int32 // disp8*N factor of a full-vector memory operand
}

func (e evex) encode() []byte {
	var x, b, bcst int
	switch rm := e.rm.(type) {
	case Vec:
		b = rm.N >> 3 & 1
		x = rm.N >> 4 & 1
	case Mem:
		b = int(rm.Base) >> 3 & 1
		if rm.hasIndex() {
			x = int(rm.Index) >> 3 & 1
		}
		if rm.Bcst {
			bcst = 1
		}
	}
	p1 := inv(e.reg>>3&1)<<7 | inv(x)<<6 | inv(b)<<5 | inv(e.reg>>4&1)<<4 | e.mmm
	v, vhi := byte(0xF), byte(1)
	if e.vvvv >= 0 {
		v = byte(^e.vvvv) & 0xF
		vhi = inv(e.vvvv >> 4 & 1)
	}
	p2 := e.w<<7 | v<<3 | 1<<2 | e.pp
	var z byte
	if e.k.Zero {
		z = 1
	}
	p3 := z<<7 | e.ll<<5 | byte(bcst)<<4 | vhi<<3 | byte(e.k.K)
	out := []byte{0x62, p1, p2, p3, e.op}
	switch rm := e.rm.(type) {
	case Vec:
		out = append(out, 3<<6|byte(e.reg&7)<<3|byte(rm.N&7))
	case Mem:
		n := e.n
		if rm.Bcst {
			n = 4
		}
		out = modrmMem(out, byte(e.reg), rm, n, false)
	}
	return out
}

// vex describes one VEX-encoded (3-byte C4 form) instruction.
type vex struct {
	pp, mmmmm, w, l, op byte
	reg                 int // ModRM.reg, 0–15
	vvvv                int // -1 when unused
	rm                  any // Tile (register form) or Mem
	sib                 bool
}

func (e vex) encode() []byte {
	var x, b int
	switch rm := e.rm.(type) {
	case Tile:
		b = int(rm) >> 3 & 1
	case Mem:
		b = int(rm.Base) >> 3 & 1
		if rm.hasIndex() {
			x = int(rm.Index) >> 3 & 1
		}
	}
	p1 := inv(e.reg>>3&1)<<7 | inv(x)<<6 | inv(b)<<5 | e.mmmmm
	v := byte(0xF)
	if e.vvvv >= 0 {
		v = byte(^e.vvvv) & 0xF
	}
	p2 := e.w<<7 | v<<3 | e.l<<2 | e.pp
	out := []byte{0xC4, p1, p2, e.op}
	switch rm := e.rm.(type) {
	case Tile:
		out = append(out, 3<<6|byte(e.reg&7)<<3|byte(rm&7))
	case Mem:
		out = modrmMem(out, byte(e.reg), rm, 1, e.sib)
	}
	return out
}

func llOf(bits int) byte {
	switch bits {
	case 256:
		return 1
	case 512:
		return 2
	}
	return 0
}

func sizePtr(bits int) string {
	switch bits {
	case 128:
		return "xmmword ptr "
	case 256:
		return "ymmword ptr "
	case 512:
		return "zmmword ptr "
	}
	return fmt.Sprintf("b%d ptr ", bits)
}

// evexSource validates the vector-or-memory source of a full-vector EVEX
// instruction of width bits and returns its Intel text.
func evexSource(what string, src Operand, bits int) (string, error) {
	switch s := src.(type) {
	case Vec:
		if err := s.check(what + " source"); err != nil {
			return "", err
		}
		if s.Bits != bits {
			return "", fmt.Errorf("%s: source %s is %d bits, want %d", what, s.Intel(), s.Bits, bits)
		}
		return s.Intel(), nil
	case Mem:
		if err := s.check(what + " memory source"); err != nil {
			return "", err
		}
		if s.Bits != 0 && s.Bits != bits {
			return "", fmt.Errorf("%s: memory source of %d bits, want %d", what, s.Bits, bits)
		}
		if s.Bcst {
			return fmt.Sprintf("dword ptr %s{1to%d}", s.Intel(), bits/32), nil
		}
		return sizePtr(bits) + s.Intel(), nil
	case nil:
		return "", fmt.Errorf("%s: missing source operand", what)
	}
	return "", fmt.Errorf("%s: unsupported source operand %T", what, src)
}
