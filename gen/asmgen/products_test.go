package asmgen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/mmcloughlin/avo/printer"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// synTestConfig is one set of sizes the logit-synthesis kernels are built
// and checked at: products of width W (row strides LX, LW), tiles FA×FB
// (row strides LA, LB), all on triangles of row stride N = FA·FB.
type synTestConfig struct {
	name              string
	N                 int
	W, LX, LW         int
	FA, FB, LA, LB    int
	bench             bool // also benchmark it (SYNTH_BENCH_DIR)
	skipTile, skipTri bool
	// bidi builds the unmasked kernels of a bidirectional spec
	// (Config.Bidirectional): the square i, j < t, not the triangle.
	bidi bool
}

var synTestConfigs = []synTestConfig{
	// specs/odd.json: factorized_random k 5, factorized_dense 6×10 of 3 heads.
	{name: "odd_k5", N: 60, W: 5, LX: 5, LW: 5, FA: 6, FB: 10, LA: 18, LB: 30},
	// specs/odd.json: vanilla (dh 12, stride d 36) and dense (w2 stride dh).
	{name: "odd_vanilla", N: 60, W: 12, LX: 36, LW: 36, FA: 4, FB: 15, LA: 4, LB: 15},
	{name: "odd_dense", N: 60, W: 12, LX: 36, LW: 12, FA: 3, FB: 20, LA: 9, LB: 60, skipTri: true},
	// specs/vanilla.json and friends: dh 32, d 128; factorized_dense 16×8.
	{name: "vanilla", N: 128, W: 32, LX: 128, LW: 128, FA: 16, FB: 8, LA: 64, LB: 32, bench: true},
	{name: "dense", N: 128, W: 32, LX: 128, LW: 32, FA: 16, FB: 8, LA: 16, LB: 8, skipTri: true},
	{name: "factrandom", N: 128, W: 8, LX: 8, LW: 8, FA: 2, FB: 64, LA: 2, LB: 64, skipTri: true},
	// specs/big.json: dh 64, d 512.
	{name: "big", N: 128, W: 64, LX: 512, LW: 512, FA: 1, FB: 128, LA: 3, LB: 130, bench: true},
	// Odd widths: three and seven vectors, tails everywhere.
	{name: "w40", N: 60, W: 40, LX: 41, LW: 43, FA: 60, FB: 1, LA: 60, LB: 2, skipTri: true},
	{name: "w100", N: 33, W: 100, LX: 100, LW: 101, FA: 3, FB: 11, LA: 3, LB: 11, skipTri: true},
	{name: "w1", N: 17, W: 1, LX: 3, LW: 1, FA: 17, FB: 1, LA: 17, LB: 1},
	// N ≥ backWRowsN: BackW's row blocks (emitProductBackWRows), at
	// specs/long512_vanilla.json's sizes and with tails (three vectors on
	// AVX-512, five on AVX2; two and three for W 17).
	{name: "long_vanilla", N: 512, W: 64, LX: 256, LW: 256, FA: 16, FB: 32, LA: 64, LB: 128, skipTri: true, skipTile: true},
	{name: "long_w40", N: 520, W: 40, LX: 41, LW: 43, FA: 20, FB: 26, LA: 20, LB: 26, skipTri: true, skipTile: true},
	{name: "long_w17_bidi", N: 512, W: 17, LX: 19, LW: 17, FA: 16, FB: 32, LA: 16, LB: 32, skipTri: true, skipTile: true, bidi: true},
	{name: "long_vanilla_bidi", N: 512, W: 64, LX: 256, LW: 256, FA: 16, FB: 32, LA: 64, LB: 128, skipTri: true, skipTile: true, bidi: true},
	// The unmasked kernels of bidirectional specs, at the same awkward sizes.
	{name: "odd_k5_bidi", N: 60, W: 5, LX: 5, LW: 5, FA: 6, FB: 10, LA: 18, LB: 30, bidi: true},
	{name: "odd_vanilla_bidi", N: 60, W: 12, LX: 36, LW: 36, FA: 4, FB: 15, LA: 4, LB: 15, bidi: true},
	{name: "vanilla_bidi", N: 128, W: 32, LX: 128, LW: 128, FA: 16, FB: 8, LA: 64, LB: 32, bidi: true},
	{name: "big_bidi", N: 128, W: 64, LX: 512, LW: 512, FA: 1, FB: 128, LA: 3, LB: 130, skipTri: true, bidi: true},
	{name: "w100_bidi", N: 33, W: 100, LX: 100, LW: 101, FA: 3, FB: 11, LA: 3, LB: 11, skipTri: true, bidi: true},
	{name: "w1_bidi", N: 17, W: 1, LX: 3, LW: 1, FA: 17, FB: 1, LA: 17, LB: 1, bidi: true},
}

func (cf synTestConfig) ops() []catalog.Op {
	ops := []catalog.Op{
		{Func: "product", Kind: catalog.Product, W: cf.W, LX: cf.LX, LW: cf.LW},
		{Func: "productBackX", Kind: catalog.ProductBackX, W: cf.W, LX: cf.LX, LW: cf.LW},
		{Func: "productBackW", Kind: catalog.ProductBackW, W: cf.W, LX: cf.LX, LW: cf.LW},
	}
	if !cf.skipTile {
		ops = append(ops,
			catalog.Op{Func: "tile", Kind: catalog.Tile, FA: cf.FA, FB: cf.FB, LA: cf.LA, LB: cf.LB},
			catalog.Op{Func: "tileBack", Kind: catalog.TileBack, FA: cf.FA, FB: cf.FB, LA: cf.LA, LB: cf.LB})
	}
	if !cf.skipTri {
		ops = append(ops,
			catalog.Op{Func: "triScale", Kind: catalog.TriScale},
			catalog.Op{Func: "triAxpy", Kind: catalog.TriAxpy},
			catalog.Op{Func: "triDot", Kind: catalog.TriDot})
	}
	return ops
}

// synRender emits cf's kernels at both levels and returns the assembly and
// the stubs.
func synRender(t *testing.T, cf synTestConfig) (asm, stubs []byte) {
	t.Helper()
	if cf.FA*cf.FB != cf.N {
		t.Fatalf("%s: FA·FB = %d, want N = %d", cf.name, cf.FA*cf.FB, cf.N)
	}
	f := NewFile(catalog.Config{N: cf.N, Bidirectional: cf.bidi})
	for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
		for _, op := range cf.ops() {
			if err := Emit(f, op, isa); err != nil {
				t.Fatalf("%s: %v", cf.name, err)
			}
		}
	}
	r, err := f.Ctx.Result()
	if err != nil {
		t.Fatalf("%s: %v", cf.name, err)
	}
	if err := Compile(r); err != nil {
		t.Fatalf("%s: compile: %v", cf.name, err)
	}
	pc := printer.Config{Argv: []string{"synthgen-test"}, Pkg: "k"}
	if asm, err = printer.NewGoAsm(pc).Print(r); err != nil {
		t.Fatalf("%s: %v", cf.name, err)
	}
	if stubs, err = printer.NewStubs(pc).Print(r); err != nil {
		t.Fatalf("%s: %v", cf.name, err)
	}
	return asm, stubs
}

var (
	synTextRe  = regexp.MustCompile(`^TEXT ·(\w+)\(SB\)`)
	synReqRe   = regexp.MustCompile(`^// Requires: (.*)$`)
	synHighReg = regexp.MustCompile(`\b([XY](1[6-9]|2[0-9]|3[01])|Z[0-9]+|K[0-7])\b`)
)

// TestSynAsmShape checks the emitted assembly without running it: AVX2
// functions use only X/Y0–15 and no ZMM or K registers, every RET follows
// a VZEROUPPER, and the features in a function's "Requires:" line are all
// in its level's Features() (no CMOV or legacy SSE either: the
// dispatch does not check for them).
func TestSynAsmShape(t *testing.T) {
	for _, cf := range synTestConfigs {
		asm, _ := synRender(t, cf)
		var fn, req string
		sawZero := false
		lines := strings.Split(string(asm), "\n")
		for i, ln := range lines {
			if m := synReqRe.FindStringSubmatch(ln); m != nil {
				req = m[1]
				continue
			}
			if m := synTextRe.FindStringSubmatch(ln); m != nil {
				fn = m[1]
				isa := kernels.AVX512
				if strings.HasSuffix(fn, "AVX2") {
					isa = kernels.AVX2
				}
				have := map[string]bool{}
				for _, f := range isa.Features() {
					have[f] = true
				}
				for _, f := range strings.Split(req, ", ") {
					if !have[f] {
						t.Errorf("%s: %s requires %s, not in kernels.Features[%s]", cf.name, fn, f, isa)
					}
				}
				req = ""
				continue
			}
			s := strings.TrimSpace(ln)
			if strings.HasSuffix(fn, "AVX2") && synHighReg.MatchString(s) && !strings.HasPrefix(s, "//") {
				t.Errorf("%s: %s line %d uses a register AVX2 does not have: %s", cf.name, fn, i+1, s)
			}
			if s == "RET" && !sawZero {
				t.Errorf("%s: %s line %d: RET without VZEROUPPER", cf.name, fn, i+1)
			}
			sawZero = s == "VZEROUPPER"
		}
	}
}

// TestSynKernels builds a throwaway module with one package per test
// configuration (the kernels at both levels plus a float64 reference
// harness) and runs go vet (asmdecl) and go test on it. Set
// SYNTH_BENCH_DIR to keep the module there and benchmark it by hand:
//
//	cd $SYNTH_BENCH_DIR && go test -run '^$' -bench . ./vanilla ./big
func TestSynKernels(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("assembly kernels are amd64 only")
	}
	if testing.Short() {
		t.Skip("builds and tests a module with the go tool")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go tool: %v", err)
	}
	dir := os.Getenv("SYNTH_BENCH_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "go.mod"), []byte("module synthgentest\n\ngo 1.26\n"))
	var pkgs []string
	for _, cf := range synTestConfigs {
		asm, stubs := synRender(t, cf)
		pd := filepath.Join(dir, cf.name)
		write(filepath.Join(pd, "kernels_amd64.s"), asm)
		write(filepath.Join(pd, "kernels_amd64.go"), stubs)
		var b bytes.Buffer
		fmt.Fprintf(&b, "package k\n\nconst (\n")
		fmt.Fprintf(&b, "\tN, W, LX, LW = %d, %d, %d, %d\n", cf.N, cf.W, cf.LX, cf.LW)
		fmt.Fprintf(&b, "\tFA, FB, LA, LB = %d, %d, %d, %d\n", cf.FA, cf.FB, cf.LA, cf.LB)
		fmt.Fprintf(&b, "\thaveAVX512, haveAVX2 = %v, %v\n", kernels.Supported(kernels.AVX512), kernels.Supported(kernels.AVX2))
		fmt.Fprintf(&b, "\thasTile, hasTri, bench, bidi = %v, %v, %v, %v\n)\n", !cf.skipTile, !cf.skipTri, cf.bench, cf.bidi)
		b.WriteString(synLevels(cf))
		write(filepath.Join(pd, "config_test.go"), b.Bytes())
		write(filepath.Join(pd, "harness_test.go"), []byte(synHarness))
		pkgs = append(pkgs, "./"+cf.name)
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(goTool, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("go %s:\n%s", strings.Join(args, " "), out)
	}
	run(append([]string{"vet"}, pkgs...)...)
	run(append([]string{"test", "-count=1"}, pkgs...)...)
}

// synLevels writes the table of the configuration's kernels per level.
func synLevels(cf synTestConfig) string {
	var b strings.Builder
	b.WriteString("\nvar levels = []level{\n")
	for _, isa := range []string{"AVX512", "AVX2"} {
		fmt.Fprintf(&b, "\t{name: %q, ok: have%s,\n", strings.ToLower(isa), isa)
		fmt.Fprintf(&b, "\t\tproduct: product%s, backX: productBackX%s, backW: productBackW%s,\n", isa, isa, isa)
		if !cf.skipTile {
			fmt.Fprintf(&b, "\t\ttile: tile%s, tileBack: tileBack%s,\n", isa, isa)
		}
		if !cf.skipTri {
			fmt.Fprintf(&b, "\t\ttriScale: triScale%s, triAxpy: triAxpy%s, triDot: triDot%s,\n", isa, isa, isa)
		}
		b.WriteString("\t},\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// synHarness is the test file of each throwaway package: it compares every
// kernel with a float64 reference at several t, with slices that end at a
// PROT_NONE page (any read past the end faults) and slices that start one
// float past an allocation with guard values around them. Never-read
// entries (right of the diagonal, other heads' columns) hold a NaN sentinel
// that poisons any result computed from them; never-written ones are
// checked to still hold it.
const synHarness = `package k

import (
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"
)

type level struct {
	name     string
	ok       bool
	product  func(t int, x, w, bias, c []float32, scale float32)
	backX    func(t int, dc, w, dx []float32, scale float32)
	backW    func(t int, dc, x, dw, dbias []float32, scale float32)
	tile     func(t int, fa, fb, c []float32)
	tileBack func(t int, dc, fa, fb, dfa, dfb []float32)
	triScale func(t int, alpha float32, x, y []float32)
	triAxpy  func(t int, alpha float32, x, y []float32)
	triDot   func(t int, x, y []float32) float32
}

const sentBits = 0x7fc0dead

var sent = math.Float32frombits(sentBits)

func isSent(v float32) bool { return math.Float32bits(v) == sentBits }

// buf is a slice s inside a larger region all; everything in all outside
// s holds the sentinel.
type buf struct {
	all    []float32
	s      []float32
	lo, hi int
}

// newBuf returns a slice of n floats filled with the sentinel. Mode 0 ends
// it at a PROT_NONE page; mode 1 starts it one float into a heap
// allocation with sentinels on both sides.
func newBuf(tb testing.TB, n, mode int) *buf {
	if mode == 0 {
		page := syscall.Getpagesize()
		bytes := (n*4+page-1)/page*page + page
		mem, err := syscall.Mmap(-1, 0, bytes+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { syscall.Munmap(mem) })
		if err := syscall.Mprotect(mem[bytes:], syscall.PROT_NONE); err != nil {
			tb.Fatal(err)
		}
		all := unsafe.Slice((*float32)(unsafe.Pointer(&mem[0])), bytes/4)
		for i := range all {
			all[i] = sent
		}
		lo := len(all) - n
		return &buf{all: all, s: all[lo:len(all):len(all)], lo: lo, hi: len(all)}
	}
	all := make([]float32, n+1+17)
	for i := range all {
		all[i] = sent
	}
	return &buf{all: all, s: all[1 : 1+n : 1+n], lo: 1, hi: 1 + n}
}

func (b *buf) checkOutside(tb testing.TB, what string) {
	tb.Helper()
	for i, v := range b.all {
		if (i < b.lo || i >= b.hi) && !isSent(v) {
			tb.Fatalf("%s: wrote %v at %d outside the slice [%d, %d)", what, v, i-b.lo, 0, b.hi-b.lo)
		}
	}
}

func need(t, rows, stride, width int) int {
	if t == 0 || rows == 0 {
		return 0
	}
	return (rows-1)*stride + width
}

var rng = rand.New(rand.NewPCG(1, 2))

func rnd() float32 { return float32(rng.Float64()*2 - 1) }

// matrix fills rows < t, columns < width of a row-major matrix with random
// values; other entries keep the sentinel.
func matrix(b *buf, t, stride, width int) {
	for i := 0; i < t; i++ {
		for p := 0; p < width && i*stride+p < len(b.s); p++ {
			b.s[i*stride+p] = rnd()
		}
	}
}

// keys is the number of entries row i of a logit matrix has at length t:
// i+1 in the causal triangle, t in the square of a bidirectional spec.
func keys(i, t int) int {
	if bidi {
		return t
	}
	return i + 1
}

// first is the first row that has column j: j, or 0 in the square.
func first(j int) int {
	if bidi {
		return 0
	}
	return j
}

// tri fills the causal triangle j ≤ i < t of a row-stride-N matrix (the
// square i, j < t for a bidirectional spec).
func tri(b *buf, t int) {
	for i := 0; i < t; i++ {
		for j := 0; j < keys(i, t); j++ {
			b.s[i*N+j] = rnd()
		}
	}
}

func near(got float32, want, mag float64) bool {
	return math.Abs(float64(got)-want) <= 2e-6*mag+1e-30
}

func ts() []int {
	var out []int
	seen := map[int]bool{}
	for _, t := range []int{1, 2, 3, 7, 15, 16, 17, 31, 33, 47, N - 1, N} {
		if t >= 1 && t <= N && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

func each(t *testing.T, f func(t *testing.T, l level, n, mode int)) {
	ran := false
	for _, l := range levels {
		if !l.ok {
			continue
		}
		ran = true
		for _, n := range ts() {
			for mode := 0; mode < 2; mode++ {
				f(t, l, n, mode)
			}
		}
	}
	if !ran {
		t.Skip("this CPU runs none of the levels")
	}
}

const scale = float32(0.37)

func TestProduct(t *testing.T) {
	each(t, func(t *testing.T, l level, n, mode int) {
		for _, withBias := range []bool{false, true} {
			x := newBuf(t, need(n, n, LX, W), mode)
			w := newBuf(t, need(n, n, LW, W), mode)
			c := newBuf(t, need(n, n, N, n), mode)
			matrix(x, n, LX, W)
			matrix(w, n, LW, W)
			var bias []float32
			var bb *buf
			if withBias {
				bb = newBuf(t, n, mode)
				matrix(bb, 1, 0, n)
				bias = bb.s
			}
			l.product(n, x.s, w.s, bias, c.s, scale)
			for idx, got := range c.s {
				i, j := idx/N, idx%N
				if j >= keys(i, n) {
					if !isSent(got) {
						t.Fatalf("%s t=%d mode=%d: c[%d,%d] = %v written above the diagonal", l.name, n, mode, i, j, got)
					}
					continue
				}
				var s, mag float64
				for p := 0; p < W; p++ {
					v := float64(x.s[i*LX+p]) * float64(w.s[j*LW+p])
					s += v
					mag += math.Abs(v)
				}
				want := float64(scale) * s
				mag *= float64(scale)
				if withBias {
					want += float64(bias[j])
					mag += math.Abs(float64(bias[j]))
				}
				if !near(got, want, mag) {
					t.Fatalf("%s t=%d mode=%d bias=%v: c[%d,%d] = %v, want %v", l.name, n, mode, withBias, i, j, got, want)
				}
			}
			c.checkOutside(t, "product c")
		}
	})
}

func TestProductBackX(t *testing.T) {
	each(t, func(t *testing.T, l level, n, mode int) {
		dc := newBuf(t, need(n, n, N, n), mode)
		w := newBuf(t, need(n, n, LW, W), mode)
		dx := newBuf(t, need(n, n, LX, W), mode)
		tri(dc, n)
		matrix(w, n, LW, W)
		l.backX(n, dc.s, w.s, dx.s, scale)
		for idx, got := range dx.s {
			i, p := idx/LX, idx%LX
			if p >= W {
				if !isSent(got) {
					t.Fatalf("%s t=%d mode=%d: dx[%d,%d] = %v written past the head", l.name, n, mode, i, p, got)
				}
				continue
			}
			var s, mag float64
			for j := 0; j < keys(i, n); j++ {
				v := float64(dc.s[i*N+j]) * float64(w.s[j*LW+p])
				s += v
				mag += math.Abs(v)
			}
			if !near(got, float64(scale)*s, float64(scale)*mag) {
				t.Fatalf("%s t=%d mode=%d: dx[%d,%d] = %v, want %v", l.name, n, mode, i, p, got, float64(scale)*s)
			}
		}
		dx.checkOutside(t, "backX dx")
	})
}

func TestProductBackW(t *testing.T) {
	each(t, func(t *testing.T, l level, n, mode int) {
		for _, withBias := range []bool{false, true} {
			dc := newBuf(t, need(n, n, N, n), mode)
			x := newBuf(t, need(n, n, LX, W), mode)
			dw := newBuf(t, need(n, n, LW, W), mode)
			tri(dc, n)
			matrix(x, n, LX, W)
			matrix(dw, n, LW, W)
			old := append([]float32(nil), dw.s...)
			var dbias, oldBias []float32
			var db *buf
			if withBias {
				db = newBuf(t, n, mode)
				matrix(db, 1, 0, n)
				dbias = db.s
				oldBias = append([]float32(nil), dbias...)
			}
			l.backW(n, dc.s, x.s, dw.s, dbias, scale)
			for idx, got := range dw.s {
				j, p := idx/LW, idx%LW
				if p >= W {
					if !isSent(got) {
						t.Fatalf("%s t=%d mode=%d: dw[%d,%d] = %v written past the row", l.name, n, mode, j, p, got)
					}
					continue
				}
				var s, mag float64
				for i := first(j); i < n; i++ {
					v := float64(dc.s[i*N+j]) * float64(x.s[i*LX+p])
					s += v
					mag += math.Abs(v)
				}
				want := float64(old[idx]) + float64(scale)*s
				if !near(got, want, float64(scale)*mag+math.Abs(float64(old[idx]))) {
					t.Fatalf("%s t=%d mode=%d: dw[%d,%d] = %v, want %v", l.name, n, mode, j, p, got, want)
				}
			}
			dw.checkOutside(t, "backW dw")
			if withBias {
				for j, got := range dbias {
					var s, mag float64
					for i := first(j); i < n; i++ {
						s += float64(dc.s[i*N+j])
						mag += math.Abs(float64(dc.s[i*N+j]))
					}
					want := float64(oldBias[j]) + s
					if !near(got, want, mag+math.Abs(float64(oldBias[j]))) {
						t.Fatalf("%s t=%d mode=%d: dbias[%d] = %v, want %v", l.name, n, mode, j, got, want)
					}
				}
				db.checkOutside(t, "backW dbias")
			}
		}
	})
}

func TestTile(t *testing.T) {
	if !hasTile {
		t.Skip("not built")
	}
	each(t, func(t *testing.T, l level, n, mode int) {
		fa := newBuf(t, need(n, n, LA, FA), mode)
		fb := newBuf(t, need(n, n, LB, FB), mode)
		c := newBuf(t, need(n, n, N, n), mode)
		matrix(fa, n, LA, FA)
		matrix(fb, n, LB, FB)
		l.tile(n, fa.s, fb.s, c.s)
		for idx, got := range c.s {
			i, j := idx/N, idx%N
			if j >= keys(i, n) {
				if !isSent(got) {
					t.Fatalf("%s t=%d mode=%d: c[%d,%d] = %v written above the diagonal", l.name, n, mode, i, j, got)
				}
				continue
			}
			want := float64(fa.s[i*LA+j/FB]) * float64(fb.s[i*LB+j%FB])
			if !near(got, want, math.Abs(want)) {
				t.Fatalf("%s t=%d mode=%d: c[%d,%d] = %v, want %v", l.name, n, mode, i, j, got, want)
			}
		}
		c.checkOutside(t, "tile c")
	})
}

func TestTileBack(t *testing.T) {
	if !hasTile {
		t.Skip("not built")
	}
	each(t, func(t *testing.T, l level, n, mode int) {
		dc := newBuf(t, need(n, n, N, n), mode)
		fa := newBuf(t, need(n, n, LA, FA), mode)
		fb := newBuf(t, need(n, n, LB, FB), mode)
		dfa := newBuf(t, need(n, n, LA, FA), mode)
		dfb := newBuf(t, need(n, n, LB, FB), mode)
		tri(dc, n)
		matrix(fa, n, LA, FA)
		matrix(fb, n, LB, FB)
		l.tileBack(n, dc.s, fa.s, fb.s, dfa.s, dfb.s)
		for idx, got := range dfa.s {
			i, p := idx/LA, idx%LA
			if p >= FA {
				if !isSent(got) {
					t.Fatalf("%s t=%d mode=%d: dfa[%d,%d] = %v written past the head", l.name, n, mode, i, p, got)
				}
				continue
			}
			var s, mag float64
			for q := 0; q < FB && p*FB+q < keys(i, n); q++ {
				v := float64(dc.s[i*N+p*FB+q]) * float64(fb.s[i*LB+q])
				s += v
				mag += math.Abs(v)
			}
			if !near(got, s, mag) {
				t.Fatalf("%s t=%d mode=%d: dfa[%d,%d] = %v, want %v", l.name, n, mode, i, p, got, s)
			}
		}
		for idx, got := range dfb.s {
			i, q := idx/LB, idx%LB
			if q >= FB {
				if !isSent(got) {
					t.Fatalf("%s t=%d mode=%d: dfb[%d,%d] = %v written past the head", l.name, n, mode, i, q, got)
				}
				continue
			}
			var s, mag float64
			for p := 0; p < FA && p*FB+q < keys(i, n); p++ {
				v := float64(dc.s[i*N+p*FB+q]) * float64(fa.s[i*LA+p])
				s += v
				mag += math.Abs(v)
			}
			if !near(got, s, mag) {
				t.Fatalf("%s t=%d mode=%d: dfb[%d,%d] = %v, want %v", l.name, n, mode, i, q, got, s)
			}
		}
		dfa.checkOutside(t, "tileBack dfa")
		dfb.checkOutside(t, "tileBack dfb")
	})
}

func TestTri(t *testing.T) {
	if !hasTri {
		t.Skip("not built")
	}
	const alpha = float32(-1.3)
	each(t, func(t *testing.T, l level, n, mode int) {
		for _, op := range []string{"scale", "axpy", "dot"} {
			x := newBuf(t, need(n, n, N, n), mode)
			y := newBuf(t, need(n, n, N, n), mode)
			tri(x, n)
			tri(y, n)
			old := append([]float32(nil), y.s...)
			var dot float32
			switch op {
			case "scale":
				l.triScale(n, alpha, x.s, y.s)
			case "axpy":
				l.triAxpy(n, alpha, x.s, y.s)
			case "dot":
				dot = l.triDot(n, x.s, y.s)
			}
			var s, mag float64
			for idx, got := range y.s {
				i, j := idx/N, idx%N
				if j >= keys(i, n) {
					if !isSent(got) {
						t.Fatalf("%s %s t=%d mode=%d: y[%d,%d] = %v written above the diagonal", l.name, op, n, mode, i, j, got)
					}
					continue
				}
				xv, yv := float64(x.s[idx]), float64(old[idx])
				var want float64
				switch op {
				case "scale":
					want = float64(alpha) * xv
				case "axpy":
					want = yv + float64(alpha)*xv
				case "dot":
					want = yv
					s += xv * yv
					mag += math.Abs(xv * yv)
				}
				if !near(got, want, math.Abs(want)+math.Abs(float64(alpha)*xv)) {
					t.Fatalf("%s %s t=%d mode=%d: y[%d,%d] = %v, want %v", l.name, op, n, mode, i, j, got, want)
				}
			}
			if op == "dot" && !near(dot, s, mag) {
				t.Fatalf("%s dot t=%d mode=%d: %v, want %v", l.name, n, mode, dot, s)
			}
			y.checkOutside(t, "tri "+op+" y")
		}
	})
}

// benchProducts runs one product kernel at t = N and reports GFLOP/s,
// counting 2·(t(t+1)/2)·W flops.
func benchProducts(b *testing.B, l level, kind string) {
	n := N
	mk := func(rows, stride, width int) []float32 {
		s := make([]float32, need(n, rows, stride, width))
		for i := range s {
			s[i] = rnd()
		}
		return s
	}
	x, w, c := mk(n, LX, W), mk(n, LW, W), mk(n, N, n)
	dx, dw := mk(n, LX, W), mk(n, LW, W)
	for b.Loop() {
		switch kind {
		case "product":
			l.product(n, x, w, nil, c, scale)
		case "backX":
			l.backX(n, c, w, dx, scale)
		case "backW":
			l.backW(n, c, x, dw, nil, scale)
		}
	}
	flops := float64(n*(n+1)) * float64(W)
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkProducts(b *testing.B) {
	if !bench {
		b.Skip("not a benchmark configuration")
	}
	for _, l := range levels {
		if !l.ok {
			continue
		}
		for _, kind := range []string{"product", "backX", "backW"} {
			b.Run("kind="+kind+"/isa="+l.name, func(b *testing.B) { benchProducts(b, l, kind) })
		}
	}
}
`
