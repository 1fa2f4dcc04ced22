package x86enc

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
)

// TestTable checks every recorded encoding byte for byte, and its Intel
// text, with no assembler needed.
func TestTable(t *testing.T) {
	for _, c := range cases {
		in, err := c.enc()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := fmt.Sprintf("% x", in.Bytes); got != c.hex {
			t.Errorf("%s: %s\n got  %s\n want %s", c.name, in.Intel, got, c.hex)
		}
		if in.Intel != c.intel {
			t.Errorf("%s: Intel text %q, want %q", c.name, in.Intel, c.intel)
		}
	}
}

// TestTableAgainstGNUAs re-derives the recorded bytes with GNU as.
func TestTableAgainstGNUAs(t *testing.T) {
	var insts []Inst
	for _, c := range cases {
		in, err := c.enc()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		insts = append(insts, in)
	}
	compareWithAs(t, insts)
}

// TestErrors checks that invalid operands give an error naming the
// instruction and the rule, never a panic or silent bytes.
func TestErrors(t *testing.T) {
	for _, c := range []struct {
		enc  func() (Inst, error)
		want string
	}{
		{func() (Inst, error) { return VDPBF16PS(Z(32), NoMask, Z(1), Z(2)) }, "vdpbf16ps destination: zmm register number 32 out of range"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(-1), Z(2)) }, "vdpbf16ps first source: zmm register number -1"},
		{func() (Inst, error) { return VDPBF16PS(Vec{Bits: 64}, NoMask, Z(1), Z(2)) }, "vector width 64 bits"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Y(1), Z(2)) }, "differ in width"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), Y(2)) }, "source ymm2 is 256 bits, want 512"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), nil) }, "missing source"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), KZ(0), Z(1), Z(2)) }, "{z} needs an opmask"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), K(8), Z(1), Z(2)) }, "opmask k8 out of range"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), MI(AX, SP, 1, 0)) }, "SP cannot be an index"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), MI(AX, CX, 3, 0)) }, "scale 3"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), Mem{Base: AX, Index: CX}) }, "scale 0 means no index"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), M(16, 0)) }, "base register 16"},
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), Mem{Base: AX, Bits: 256}) }, "memory source of 256 bits, want 512"},
		{func() (Inst, error) { return VCVTNEPS2BF16(Y(0), NoMask, M(AX, 0)) }, "needs its width in Bits"},
		{func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Mem{Base: AX, Bits: 100}) }, "width in Bits (128, 256 or 512), not 100"},
		{func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Vec{Bits: 64, N: 1}) }, "vector width 64 bits"},
		{func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, nil) }, "missing source"},
		{func() (Inst, error) { return STTILECFG(Mem{Base: AX, Bits: 512}) }, "take no width"},
		{func() (Inst, error) { return TILELOADDT1(T(1), Mem{Base: GPR(16), Scale: 1}) }, "base register 16"},
		{func() (Inst, error) { return VCVTNEPS2BF16(Z(0), NoMask, Z(1)) }, "512-bit source converts into a 256-bit destination"},
		{func() (Inst, error) { return VCVTNEPS2BF16(Y(0), NoMask, Y(1)) }, "256-bit source converts into a 128-bit destination"},
		{func() (Inst, error) { return LDTILECFG(M(AX, 0).Broadcast()) }, "ldtilecfg: AMX memory operands have no broadcast"},
		{func() (Inst, error) { return TILELOADD(T(8), M(AX, 0)) }, "tmm8 out of range"},
		{func() (Inst, error) { return TILESTORED(MI(AX, SP, 2, 0), T(0)) }, "SP cannot be an index"},
		{func() (Inst, error) { return TDPBF16PS(T(0), T(0), T(1)) }, "must all differ"},
		{func() (Inst, error) { return TILEZERO(T(-1)) }, "tmm-1 out of range"},
	} {
		in, err := c.enc()
		if err == nil {
			t.Errorf("want error %q, got bytes % x (%s)", c.want, in.Bytes, in.Intel)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %q does not say %q", err, c.want)
		}
	}
}

func TestGoAsm(t *testing.T) {
	in, err := VDPBF16PS(Z(0), NoMask, Z(1), Z(2))
	if err != nil {
		t.Fatal(err)
	}
	want := "BYTE $0x62; BYTE $0xf2; BYTE $0x76; BYTE $0x48; BYTE $0x52; BYTE $0xc2 // vdpbf16ps zmm0, zmm1, zmm2 (AVX512_BF16)"
	if got := in.GoAsm(); got != want {
		t.Errorf("GoAsm:\n got  %s\n want %s", got, want)
	}
}

// TestEmitter builds a function with avo and checks the printed assembly
// carries the Intel comment and the bytes, and that the first error sticks.
func TestEmitter(t *testing.T) {
	ctx := build.NewContext()
	ctx.Function("f")
	ctx.SignatureExpr("func()")
	e := &Emitter{Ctx: ctx}
	e.Add(TILERELEASE(), nil)
	e.Add(TDPBF16PS(T(0), T(0), T(1)))
	e.Add(TILEZERO(T(1))) // dropped: an error is pending
	ctx.RET()
	if got := strings.Join(e.ISA(), ","); got != "AMX_TILE" {
		t.Errorf("ISA() = %s, want AMX_TILE (the failed TDPBF16PS adds nothing)", got)
	}
	if e.Err() == nil || !strings.Contains(e.Err().Error(), "must all differ") {
		t.Fatalf("Err() = %v, want the TDPBF16PS error", e.Err())
	}
	f, err := ctx.Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := pass.Compile.Execute(f); err != nil {
		t.Fatal(err)
	}
	b, err := printer.NewGoAsm(printer.Config{Name: "test", Pkg: "p"}).Print(f)
	if err != nil {
		t.Fatal(err)
	}
	want := "\t// tilerelease (AMX_TILE)\n\tBYTE $0xc4\n\tBYTE $0xe2\n\tBYTE $0x78\n\tBYTE $0x49\n\tBYTE $0xc0\n\tRET\n"
	if !bytes.Contains(b, []byte(want)) {
		t.Errorf("printed assembly lacks\n%s\ngot\n%s", want, b)
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{Z(17).String(), "Z17"}, {Y(3).String(), "Y3"}, {X(31).String(), "X31"},
		{Z(17).Intel(), "zmm17"}, {R12.String(), "R12"}, {R12.Intel(), "r12"},
		{SP.String(), "SP"}, {BP.Intel(), "rbp"}, {T(5).Intel(), "tmm5"},
		{KZ(3).Intel(), "{k3}{z}"}, {NoMask.Intel(), ""},
		{MI(R13, R9, 8, -16).Intel(), "[r13+r9*8-16]"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestISA(t *testing.T) {
	for _, c := range []struct {
		enc  func() (Inst, error)
		want string
	}{
		{func() (Inst, error) { return VDPBF16PS(Z(0), NoMask, Z(1), Z(2)) }, "AVX512_BF16"},
		{func() (Inst, error) { return VDPBF16PS(Y(0), NoMask, Y(1), Y(2)) }, "AVX512_BF16,AVX512VL"},
		{func() (Inst, error) { return VCVTNEPS2BF16(Y(0), NoMask, Z(1)) }, "AVX512_BF16"},
		{func() (Inst, error) { return VCVTNEPS2BF16(X(0), NoMask, Y(1)) }, "AVX512_BF16,AVX512VL"},
		{func() (Inst, error) { return VCVTNE2PS2BF16(X(0), NoMask, X(1), X(2)) }, "AVX512_BF16,AVX512VL"},
		{func() (Inst, error) { return TILELOADD(T(0), M(AX, 0)) }, "AMX_TILE"},
		{func() (Inst, error) { return TDPBF16PS(T(0), T(1), T(2)) }, "AMX_TILE,AMX_BF16"},
		{func() (Inst, error) { return TILERELEASE(), nil }, "AMX_TILE"},
	} {
		in, err := c.enc()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(in.ISA, ","); got != c.want {
			t.Errorf("%s: ISA %s, want %s", in.Intel, got, c.want)
		}
	}
}
