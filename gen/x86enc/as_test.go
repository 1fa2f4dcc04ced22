package x86enc

import (
	"bytes"
	"debug/elf"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// assemble assembles the Intel-syntax lines with GNU as and returns the
// bytes of .text; it skips the test, saying why, when as is missing or too
// old to know the instructions.
func assemble(t *testing.T, lines []string) []byte {
	t.Helper()
	as, err := exec.LookPath("as")
	if err != nil {
		t.Skipf("GNU as not found (%v): install binutils ≥ 2.34 to compare the encodings with a reference assembler", err)
	}
	ver, err := exec.Command(as, "--version").Output()
	if err != nil || !bytes.Contains(ver, []byte("GNU assembler")) {
		t.Skipf("%s is not GNU as (%v): cannot compare encodings", as, err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "x.s")
	obj := filepath.Join(dir, "x.o")
	text := ".intel_syntax noprefix\n.text\n" + strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(as, "--64", "-o", obj, src).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("no such instruction")) {
			t.Skipf("%s does not know AMX/AVX512-BF16 (binutils ≥ 2.34 needed): %s", strings.SplitN(string(ver), "\n", 2)[0], firstLine(out))
		}
		t.Fatalf("as failed: %v\n%s", err, out)
	}
	f, err := elf.Open(obj)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".text")
	if sec == nil {
		t.Fatal("no .text in as output")
	}
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func firstLine(b []byte) string {
	s := string(b)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// compareWithAs assembles the Intel text of insts and checks that GNU as
// produced exactly the encoder's bytes, instruction by instruction.
func compareWithAs(t *testing.T, insts []Inst) {
	t.Helper()
	lines := make([]string, len(insts))
	for i, in := range insts {
		// {evex} keeps as from picking a VEX form (AVX-NE-CONVERT) where
		// one exists; AMX is VEX-only.
		if strings.HasPrefix(in.Intel, "v") {
			lines[i] = "{evex} " + in.Intel
		} else {
			lines[i] = in.Intel
		}
	}
	got := assemble(t, lines)
	off := 0
	for _, in := range insts {
		end := off + len(in.Bytes)
		if end > len(got) || !bytes.Equal(got[off:end], in.Bytes) {
			ref := got[off:min(off+len(in.Bytes)+4, len(got))]
			t.Fatalf("%s:\n encoder % x\n as      % x… (at offset %d)", in.Intel, in.Bytes, ref, off)
		}
		off = end
	}
	if off != len(got) {
		t.Fatalf("as produced %d bytes, the encoder %d", len(got), off)
	}
	t.Logf("%d instructions (%d bytes) identical to %s's", len(insts), off, "GNU as")
}

// randomMem returns a memory operand over all bases and indexes, with
// displacements that land on every encoding: none, disp8 (scaled by n or
// not), disp32.
func randomMem(r *rand.Rand, n int32) Mem {
	m := Mem{Base: GPR(r.IntN(16))}
	if r.IntN(3) > 0 {
		m.Scale = []uint8{1, 2, 4, 8}[r.IntN(4)]
		for {
			m.Index = GPR(r.IntN(16))
			if m.Index != SP {
				break
			}
		}
	}
	switch r.IntN(8) {
	case 0:
		m.Disp = 0
	case 1:
		m.Disp = n * int32(r.IntN(256)-128) // compressed disp8
	case 2:
		m.Disp = n * []int32{-129, -128, 127, 128}[r.IntN(4)]
	case 3:
		m.Disp = int32(r.IntN(256) - 128) // fits disp8 only if n divides
	case 4:
		m.Disp = int32(r.Uint32())
	case 5:
		m.Disp = []int32{1, -1, 4, 64, -64, 8128, -8192, 8192, 0x7fffffff, -0x80000000}[r.IntN(10)]
	default:
		m.Disp = n * int32(r.IntN(64))
	}
	return m
}

func randomVec(r *rand.Rand, bits int) Vec {
	return Vec{Bits: bits, N: r.IntN(32)}
}

func randomMask(r *rand.Rand) Mask {
	k := Mask{K: r.IntN(8)}
	if k.K != 0 && r.IntN(2) == 0 {
		k.Zero = true
	}
	return k
}

func must(t *testing.T) func(Inst, error) Inst {
	return func(in Inst, err error) Inst {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
}

// TestAgainstGNUAs encodes thousands of random operand combinations of
// every instruction, plus every base×index pair, and compares with as.
func TestAgainstGNUAs(t *testing.T) {
	ok := must(t)
	r := rand.New(rand.NewPCG(26, 1))
	var insts []Inst
	widths := []int{128, 256, 512}
	for i := 0; i < 1500; i++ {
		bits := widths[r.IntN(3)]
		var src Operand = randomVec(r, bits)
		if r.IntN(2) == 0 {
			m := randomMem(r, int32(bits/8))
			if r.IntN(3) == 0 {
				m = randomMem(r, 4).Broadcast()
			}
			src = m
		}
		switch i % 3 {
		case 0:
			insts = append(insts, ok(VDPBF16PS(randomVec(r, bits), randomMask(r), randomVec(r, bits), src)))
		case 1:
			insts = append(insts, ok(VCVTNE2PS2BF16(randomVec(r, bits), randomMask(r), randomVec(r, bits), src)))
		case 2:
			dst := 128
			if bits == 512 {
				dst = 256
			}
			if m, isMem := src.(Mem); isMem {
				m.Bits = bits
				src = m
			}
			insts = append(insts, ok(VCVTNEPS2BF16(randomVec(r, dst), randomMask(r), src)))
		}
	}
	for i := 0; i < 600; i++ {
		m := randomMem(r, 1)
		t1, t2, t3 := T(r.IntN(8)), T(r.IntN(8)), T(r.IntN(8))
		switch i % 6 {
		case 0:
			insts = append(insts, ok(LDTILECFG(m)), ok(STTILECFG(randomMem(r, 1))))
		case 1:
			insts = append(insts, ok(TILELOADD(t1, m)))
		case 2:
			insts = append(insts, ok(TILELOADDT1(t1, m)))
		case 3:
			insts = append(insts, ok(TILESTORED(m, t1)))
		case 4:
			if t1 != t2 && t1 != t3 && t2 != t3 {
				insts = append(insts, ok(TDPBF16PS(t1, t2, t3)))
			}
			insts = append(insts, ok(TILEZERO(t1)))
		case 5:
			insts = append(insts, TILERELEASE())
		}
	}
	// Every base with no index and with every index, at displacements 0,
	// 8-bit, compressed 8-bit and 32-bit, in an EVEX and a VEX instruction.
	for base := AX; base <= R15; base++ {
		for index := GPR(0); index <= R15+1; index++ {
			if index == SP {
				continue
			}
			for _, d := range []int32{0, 8, 64 * 3, -64 * 128, 1 << 20} {
				m := Mem{Base: base, Disp: d}
				if index <= R15 {
					m.Index, m.Scale = index, 1<<(index%4)
				}
				insts = append(insts,
					ok(VDPBF16PS(Z(int(index)), NoMask, Z(int(base)+16), m)),
					ok(TILELOADD(T(int(base)%8), m)),
					ok(TILESTORED(m, T(int(index)%8))))
			}
		}
	}
	var tdp int
	for a := 0; a < 8; a++ {
		for b := 0; b < 8; b++ {
			for c := 0; c < 8; c++ {
				if a != b && b != c && a != c {
					insts = append(insts, ok(TDPBF16PS(T(a), T(b), T(c))))
					tdp++
				}
			}
		}
	}
	compareWithAs(t, insts)
}
