package asmgen

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/printer"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// svConfigs are the sizes TestSoftmaxValueAsm generates kernels for: the
// shipped specs' head widths (12, 32, 64) and awkward ones (1, 5, 20, 40,
// 128), with row strides N that are not multiples of the vector width, and
// two with long rows (N ≥ svLongN), whose kernels take other paths.
var svConfigs = []catalog.Config{
	{N: 1024, D: 256, Heads: 4}, // long1024_*.json: DH 64
	{N: 1030, D: 40, Heads: 2},  // long rows, DH 20, N no multiple of 16
	{N: 60, D: 36, Heads: 3},    // odd.json: DH 12
	{N: 64, D: 64, Heads: 2},    // small.json: DH 32
	{N: 256, D: 256, Heads: 4},  // mid.json: DH 64
	{N: 512, D: 512, Heads: 8},  // big.json: DH 64, a 2 KiB gradient buffer
	{N: 40, D: 60, Heads: 3},    // DH 20
	{N: 33, D: 256, Heads: 2},   // DH 128: several column chunks
	{N: 17, D: 5, Heads: 5},     // DH 1
	{N: 24, D: 10, Heads: 2},    // DH 5
	{N: 20, D: 40, Heads: 1},    // DH 40
	// The unmasked kernels of bidirectional specs.
	{N: 1030, D: 40, Heads: 2, Bidirectional: true}, // long rows, DH 20
	{N: 60, D: 36, Heads: 3, Bidirectional: true},   // enc_odd.json: DH 12
	{N: 128, D: 64, Heads: 4, Bidirectional: true},  // enc_*.json: DH 16
	{N: 33, D: 256, Heads: 2, Bidirectional: true},  // DH 128
	{N: 17, D: 5, Heads: 5, Bidirectional: true},    // DH 1
	{N: 24, D: 10, Heads: 2, Bidirectional: true},   // DH 5
}

func svName(cfg catalog.Config) string {
	if cfg.Bidirectional {
		return fmt.Sprintf("n%d_d%d_h%d_bidi", cfg.N, cfg.D, cfg.Heads)
	}
	return fmt.Sprintf("n%d_d%d_h%d", cfg.N, cfg.D, cfg.Heads)
}

// svOps are the two softmax-value ops of cfg, named after it.
func svOps(cfg catalog.Config) []catalog.Op {
	tri := catalog.Shape{Rows: -1, Stride: cfg.N, Width: -1, Square: cfg.Bidirectional}
	head := catalog.Shape{Rows: -1, Stride: cfg.D, Width: cfg.DH}
	n := svName(cfg)
	return []catalog.Op{
		{Field: "SoftmaxValue", Func: "fwd_" + n, Kind: catalog.SoftmaxValue,
			Slices: []catalog.Param{{Name: "b", Shape: tri}, {Name: "a", Shape: tri}, {Name: "v", Shape: head}, {Name: "y", Shape: head}}},
		{Field: "SoftmaxValueBack", Func: "back_" + n, Kind: catalog.SoftmaxValueBack,
			Slices: []catalog.Param{{Name: "a", Shape: tri}, {Name: "v", Shape: head}, {Name: "dy", Shape: head}, {Name: "db", Shape: tri}, {Name: "dv", Shape: head}}},
	}
}

// compile runs avo's passes over f and prints the assembly and stubs.
func compile(f *File, pkg string) (asm, stubs []byte, err error) {
	r, err := f.Ctx.Result()
	if err != nil {
		if el, ok := err.(build.ErrorList); ok {
			var msgs []string
			for _, e := range el {
				msgs = append(msgs, e.Error())
			}
			err = fmt.Errorf("%s", strings.Join(msgs, "; "))
		}
		return nil, nil, fmt.Errorf("build: %w", err)
	}
	if err := Compile(r); err != nil {
		return nil, nil, fmt.Errorf("compile: %w", err)
	}
	pc := printer.Config{Argv: []string{"asmgen-test"}, Pkg: pkg}
	if asm, err = printer.NewGoAsm(pc).Print(r); err != nil {
		return nil, nil, fmt.Errorf("print assembly: %w", err)
	}
	if stubs, err = printer.NewStubs(pc).Print(r); err != nil {
		return nil, nil, fmt.Errorf("print stubs: %w", err)
	}
	return asm, stubs, nil
}

// emitExpKernel adds func name(x, y []float32): y = exp(x) for len(x) a
// multiple of the level's width, the test kernel of exp's accuracy.
func emitExpKernel(f *File, isa kernels.ISA, name string) {
	s := newSIMD(f, name, isa)
	c := s.c
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.SignatureExpr("func(x, y []float32)")
	c.Pragma("noescape")
	xp, yp, n := s.param("x"), s.param("y"), c.GP64()
	c.Load(c.Param("x").Len(), n)
	loop, done := s.lbl("loop"), s.lbl("done")
	c.Label(loop)
	c.CMPQ(n, imm(s.W))
	c.JL(operand.LabelRef(done))
	x := s.vec()
	c.VMOVUPS(operand.Mem{Base: xp}, x)
	e := s.exp(x)
	c.VMOVUPS(e, operand.Mem{Base: yp})
	c.ADDQ(imm(4*s.W), xp)
	c.ADDQ(imm(4*s.W), yp)
	c.SUBQ(imm(s.W), n)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}

// svLevels are the levels this CPU can run.
func svLevels() []kernels.ISA {
	var out []kernels.ISA
	for _, l := range []kernels.ISA{kernels.AVX2, kernels.AVX512} {
		if kernels.Supported(l) {
			out = append(out, l)
		}
	}
	return out
}

// buildSVPackage writes a throwaway package to dir: the softmax-value
// kernels of every svConfig at both levels, the exp test kernels, and the
// harness (svHarness) that checks them against float64 references.
func buildSVPackage(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"go.mod":          []byte("module svtest\n\ngo 1.26\n"),
		"harness_test.go": []byte(svHarness),
	}
	var cases bytes.Buffer
	cases.WriteString("package svtest\n\nvar cases = []kcase{\n")
	for _, cfg := range svConfigs {
		cfg.DH = cfg.D / cfg.Heads
		f := NewFile(cfg)
		for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
			ops := svOps(cfg)
			for _, op := range ops {
				if err := Emit(f, op, isa); err != nil {
					t.Fatalf("%s %s: %v", op.Func, isa, err)
				}
			}
			fmt.Fprintf(&cases, "\t{name: %q, N: %d, D: %d, Heads: %d, bidi: %v, isa: %q, fwd: %s, back: %s},\n",
				svName(cfg), cfg.N, cfg.D, cfg.Heads, cfg.Bidirectional, isa, Name(ops[0], isa), Name(ops[1], isa))
		}
		asm, stubs, err := compile(f, "svtest")
		if err != nil {
			t.Fatalf("%s: %v", svName(cfg), err)
		}
		files["sv_"+svName(cfg)+"_amd64.s"] = asm
		files["sv_"+svName(cfg)+"_amd64.go"] = stubs
	}
	cases.WriteString("}\n\nvar exps = []struct {\n\tisa string\n\tfn  func(x, y []float32)\n}{\n")
	ef := NewFile(catalog.Config{N: 1, D: 1, DH: 1, Heads: 1})
	for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
		name := "exp" + strings.ToUpper(isa.String())
		emitExpKernel(ef, isa, name)
		fmt.Fprintf(&cases, "\t{%q, %s},\n", isa, name)
	}
	cases.WriteString("}\n")
	asm, stubs, err := compile(ef, "svtest")
	if err != nil {
		t.Fatalf("exp kernels: %v", err)
	}
	files["exp_amd64.s"] = asm
	files["exp_amd64.go"] = stubs
	files["cases_test.go"] = cases.Bytes()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestSoftmaxValueAsm generates the softmax-value kernels for several
// sizes, builds them into a throwaway package and runs its harness: both
// kernels against float64 references at t ∈ {1, 2, 3, 7, 15, 16, 17, 31,
// 33, N−1, N}, with ±1e4 and −Inf logits, an all −Inf row, a aliasing b
// and db aliasing a, every slice ending at an inaccessible page (so a read
// past the end faults) and NaN sentinels in the entries kernels must not
// read (j > i, other heads' columns) or write; and the exp kernels'
// accuracy. SVTEST_DIR keeps the package in that directory (for
// benchmarking: go test -bench . there).
func TestSoftmaxValueAsm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a generated package")
	}
	if runtime.GOARCH != "amd64" {
		t.Skip("amd64 assembly")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := os.Getenv("SVTEST_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := buildSVPackage(t, dir)
	for name, b := range files {
		if strings.HasSuffix(name, ".s") {
			for _, p := range checkAsmText(string(b), true) {
				t.Errorf("%s: %s", name, p)
			}
		}
	}
	var levels []string
	for _, l := range svLevels() {
		levels = append(levels, l.String())
	}
	if len(levels) == 0 {
		t.Skip("CPU has neither AVX2 nor AVX-512")
	}
	cmd := exec.Command(goBin, "test", "-count=1", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "SV_ISAS="+strings.Join(levels, ","))
	out, err := cmd.CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "exp ") {
			t.Log(sc.Text())
		}
	}
	if err != nil {
		t.Fatalf("harness in %s failed: %v\n%s", dir, err, out)
	}
}

var (
	textLine = regexp.MustCompile(`^TEXT\s+·(\w+)\(SB\)`)
	// Registers AVX2 code must not use: EVEX-only vector registers, ZMM, K.
	avx512Reg = regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z([0-9]|[12][0-9]|3[01])|K[0-7])\b`)
	requires  = regexp.MustCompile(`^// Requires: (.*)$`)
)

// baseline are the features every amd64 CPU has (GOAMD64=v1).
var baseline = map[string]bool{"CMOV": true, "SSE": true, "SSE2": true, "MMX+": true}

// checkAsmText checks avo output: AVX2 functions use only X/Y0–15 and no
// Z or K registers, and (with features) every function's "Requires:"
// features are baseline amd64 or in its level's Features() (by the
// name's suffix).
func checkAsmText(asm string, features bool) []string {
	var problems []string
	var fn string
	var req []string
	lines := strings.Split(asm, "\n")
	for n, line := range lines {
		if m := requires.FindStringSubmatch(line); m != nil {
			req = strings.Split(m[1], ", ")
			continue
		}
		if m := textLine.FindStringSubmatch(line); m != nil {
			fn = m[1]
			level := kernels.Go
			switch {
			case strings.HasSuffix(fn, "AVX512"):
				level = kernels.AVX512
			case strings.HasSuffix(fn, "AVX2"):
				level = kernels.AVX2
			}
			have := map[string]bool{}
			for _, f := range level.Features() {
				have[f] = true
			}
			for _, r := range req {
				if features && !have[r] && !baseline[r] && level != kernels.Go {
					problems = append(problems, fmt.Sprintf("%s requires %s, not in kernels.Features[%s]", fn, r, level))
				}
			}
			req = nil
			continue
		}
		if strings.HasSuffix(fn, "AVX2") && !strings.HasPrefix(strings.TrimSpace(line), "//") {
			if m := avx512Reg.FindString(line); m != "" {
				problems = append(problems, fmt.Sprintf("line %d: AVX2 function %s uses %s: %s", n+1, fn, m, strings.TrimSpace(line)))
			}
		}
	}
	return problems
}

// TestGeneratedAVX2Registers greps the generated packages' assembly: AVX2
// TEXT blocks must not use Y16–Y31, X16–X31, Z or K registers (they
// would fault on AVX2-only CPUs).
func TestGeneratedAVX2Registers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "generated", "*", "*.s"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no generated assembly; run go run ./internal/cmd/repogen -all")
	}
	sort.Strings(files)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkAsmText(string(b), false) {
			t.Errorf("%s: %s", name, p)
		}
	}
}

// TestCheckAsmText makes sure the register check can fail.
func TestCheckAsmText(t *testing.T) {
	bad := "// func fAVX2()\n// Requires: AVX\nTEXT ·fAVX2(SB), NOSPLIT, $0\n\tVADDPS Y16, Y1, Y2\n\tRET\n"
	if len(checkAsmText(bad, false)) == 0 {
		t.Error("Y16 in an AVX2 function not reported")
	}
	bad = "// func fAVX2()\n// Requires: AVX512F\nTEXT ·fAVX2(SB), NOSPLIT, $0\n\tRET\n"
	if len(checkAsmText(bad, true)) == 0 {
		t.Error("AVX512F requirement of an AVX2 function not reported")
	}
	good := "// func fAVX2()\n// Requires: AVX, FMA3\nTEXT ·fAVX2(SB), NOSPLIT, $0\n\tVADDPS Y15, Y1, Y2\n\tRET\n" +
		"// func fAVX512()\n// Requires: AVX512F\nTEXT ·fAVX512(SB), NOSPLIT, $0\n\tVADDPS Z16, Z1, K1, Z2\n\tRET\n"
	if p := checkAsmText(good, true); len(p) != 0 {
		t.Errorf("false positives: %v", p)
	}
}

// TestBlocking checks the register budgets of the blocked products.
func TestBlocking(t *testing.T) {
	for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
		for dh := 1; dh <= 512; dh++ {
			s := newSVKit(&File{Config: catalog.Config{N: 64, D: dh, DH: dh, Heads: 1}}, "blocking", isa)
			r, cv := s.blocking()
			reserve := 1
			if isa == kernels.AVX2 {
				reserve = 2
			}
			if r < 1 || cv < 1 || r*cv+cv+reserve > s.regs {
				t.Errorf("%s dh=%d: R=%d cv=%d exceeds %d registers", isa, dh, r, cv, s.regs)
			}
		}
	}
}
