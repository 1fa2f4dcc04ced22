package asmgen

// svHarness is the test file of the throwaway package TestSoftmaxValueAsm
// builds (package svtest, beside the generated .s files and cases_test.go,
// which lists the kernels as kcase values and the exp kernels as exps). It
// checks both softmax-value kernels against float64 references and sweeps
// exp; BenchmarkSoftmaxValue and TestMinTime (SV_MINTIME=1) time them. Only
// the levels in SV_ISAS (comma-separated) run.
const svHarness = `package svtest

// Harness for the softmax-value assembly, compiled by gen/asmgen's
// TestSoftmaxValueAsm into a throwaway package together with the generated
// .s files (see cases_test.go there for the kernels under test).

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

type kcase struct {
	name        string
	N, D, Heads int
	bidi        bool // unmasked kernels: every row has the t keys j < t
	isa         string
	fwd         func(t int, b, a, v, y []float32)
	back        func(t int, a, v, dy, db, dv []float32)
}

func enabled(isa string) bool {
	for _, s := range strings.Split(os.Getenv("SV_ISAS"), ",") {
		if s == isa {
			return true
		}
	}
	return false
}

// pageEnd returns a slice of n floats that ends exactly at the end of a
// readable mapping followed by an inaccessible page, so any access past
// its end faults, and is preceded by a guard float (checked by
// tbShim.guardsIntact). Filled with fill.
func pageEnd(t *tbShim, n int, fill float32) []float32 {
	const page = 4096
	size := ((n+1)*4 + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatalf("mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	off := size - n*4 - 4
	s := unsafe.Slice((*float32)(unsafe.Pointer(&mem[off])), n+1)
	for i := range s {
		s[i] = fill
	}
	s[0] = guard
	t.guards = append(t.guards, &s[0])
	return s[1:]
}

var guard = math.Float32frombits(0x7fc0beef)

func need(t, rows, stride, width int) int {
	if t == 0 || rows == 0 {
		return 0
	}
	return (rows-1)*stride + width
}

var sentinel = math.Float32frombits(0x7fc0dead) // a NaN: poisons anything that reads it

func same(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

func lengths(N int) []int {
	var ts []int
	seen := map[int]bool{}
	for _, t := range []int{1, 2, 3, 7, 15, 16, 17, 31, 33, N - 1, N} {
		if t >= 1 && t <= N && !seen[t] {
			seen[t] = true
			ts = append(ts, t)
		}
	}
	return ts
}

// rowKeys is the number of keys of row i at length t: i+1 in the causal
// triangle, t for the unmasked (bidirectional) kernels.
func rowKeys(bidi bool, i, t int) int {
	if bidi {
		return t
	}
	return i + 1
}

// logits fills the triangle of b (row stride N; the square i, j < t when
// bidi) with a mix of ordinary values, ±1e4, −Inf entries and one all −Inf
// row.
func logits(r *rand.Rand, b []float32, t, N int, bidi bool) {
	ninf := float32(math.Inf(-1))
	allInf := -1
	if t > 2 {
		allInf = r.IntN(t)
	}
	for i := 0; i < t; i++ {
		for j := 0; j < rowKeys(bidi, i, t); j++ {
			x := float32(r.NormFloat64() * 3)
			switch u := r.IntN(20); {
			case u == 0:
				x = ninf
			case u == 1:
				x = 1e4
			case u == 2:
				x = -1e4
			}
			if i%5 == 3 { // big logits only
				x = float32(r.NormFloat64() * 1e4)
			}
			if i == allInf {
				x = ninf
			}
			b[i*N+j] = x
		}
	}
}

func refSoftmax(b []float32, t, N int, bidi bool) [][]float64 {
	a := make([][]float64, t)
	for i := 0; i < t; i++ {
		a[i] = make([]float64, rowKeys(bidi, i, t))
		m := math.Inf(-1)
		for j := range a[i] {
			m = math.Max(m, float64(b[i*N+j]))
		}
		if math.IsInf(m, -1) {
			continue // all −Inf: zeros
		}
		s := 0.0
		for j := range a[i] {
			e := math.Exp(float64(b[i*N+j]) - m)
			a[i][j] = e
			s += e
		}
		for j := range a[i] {
			a[i][j] /= s
		}
	}
	return a
}

func TestForward(t *testing.T) {
	for _, kc := range cases {
		if !enabled(kc.isa) {
			continue
		}
		DH := kc.D / kc.Heads
		for _, tt := range lengths(kc.N) {
			for _, alias := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/t=%d/alias=%v", kc.name, kc.isa, tt, alias)
				if err := checkForward(kc, DH, tt, alias); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func checkForward(kc kcase, DH, t int, alias bool) error {
	N, D := kc.N, kc.D
	r := rand.New(rand.NewPCG(uint64(t), uint64(N*1000+D)))
	tb := &tbShim{}
	nt := need(t, t, N, t)
	b := pageEnd(tb, nt, sentinel)
	logits(r, b, t, N, kc.bidi)
	bIn := append([]float32(nil), b...)
	a := b
	if !alias {
		a = pageEnd(tb, nt, sentinel)
	}
	// v and y: head slices of [t, D] matrices whose other columns (other
	// heads) hold the sentinel.
	nh := need(t, t, D, DH)
	v := pageEnd(tb, nh, sentinel)
	y := pageEnd(tb, nh, sentinel)
	for i := 0; i < t; i++ {
		for c := 0; c < DH; c++ {
			v[i*D+c] = float32(r.NormFloat64())
		}
	}
	defer tb.release()
	kc.fwd(t, b, a, v, y)

	ref := refSoftmax(bIn, t, N, kc.bidi)
	var errs []string
	bad := func(f string, args ...any) {
		if len(errs) < 8 {
			errs = append(errs, fmt.Sprintf(f, args...))
		}
	}
	if !tb.guardsIntact() {
		bad("a guard in front of a slice was overwritten")
	}
	for i := 0; i < t; i++ {
		for j := 0; j < N && i*N+j < nt; j++ {
			got := a[i*N+j]
			if j >= rowKeys(kc.bidi, i, t) {
				want := sentinel
				if alias {
					want = bIn[i*N+j]
				}
				if !same(got, want) {
					bad("a[%d][%d] = %v outside the triangle was written", i, j, got)
				}
				continue
			}
			want := ref[i][j]
			if want == 0 && got != 0 && (math.IsInf(float64(bIn[i*N+j]), -1) || ref[i] == nil || allZero(ref[i])) {
				bad("a[%d][%d] = %v, want exactly 0", i, j, got)
			}
			if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > 1e-5*want+1e-35 {
				bad("a[%d][%d] = %v, want %v", i, j, got, want)
			}
		}
		for c := 0; c < D && i*D+c < nh; c++ {
			got := y[i*D+c]
			if c >= DH {
				if !same(got, sentinel) {
					bad("y[%d][%d] = %v outside the head was written", i, c, got)
				}
				continue
			}
			want, mag := 0.0, 0.0
			for j := range ref[i] {
				want += ref[i][j] * float64(v[j*D+c])
				mag += math.Abs(ref[i][j] * float64(v[j*D+c]))
			}
			if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
				bad("y[%d][%d] = %v, want %v", i, c, got, want)
			}
			if mag == 0 && got != 0 {
				bad("y[%d][%d] = %v, want exactly 0", i, c, got)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func allZero(x []float64) bool {
	for _, v := range x {
		if v != 0 {
			return false
		}
	}
	return true
}

// tbShim lets pageEnd run outside a testing.TB: it panics on failure and
// collects cleanups and the guards in front of the slices.
type tbShim struct {
	testing.TB
	cleanups []func()
	guards   []*float32
}

func (s *tbShim) guardsIntact() bool {
	for _, g := range s.guards {
		if !same(*g, guard) {
			return false
		}
	}
	return true
}

func (s *tbShim) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (s *tbShim) Cleanup(f func())             { s.cleanups = append(s.cleanups, f) }
func (s *tbShim) release() {
	for _, f := range s.cleanups {
		f()
	}
}

func TestBackward(t *testing.T) {
	for _, kc := range cases {
		if !enabled(kc.isa) {
			continue
		}
		DH := kc.D / kc.Heads
		for _, tt := range lengths(kc.N) {
			for _, alias := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/t=%d/alias=%v", kc.name, kc.isa, tt, alias)
				if err := checkBackward(kc, DH, tt, alias); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
		}
	}
}

func checkBackward(kc kcase, DH, t int, alias bool) error {
	N, D := kc.N, kc.D
	r := rand.New(rand.NewPCG(uint64(t)+7, uint64(N*1000+D)))
	tb := &tbShim{}
	defer tb.release()
	nt := need(t, t, N, t)
	b := make([]float32, nt)
	logits(r, b, t, N, kc.bidi)
	p := refSoftmax(b, t, N, kc.bidi)
	a := pageEnd(tb, nt, sentinel)
	for i := 0; i < t; i++ {
		for j := range p[i] {
			a[i*N+j] = float32(p[i][j])
		}
	}
	aIn := append([]float32(nil), a...)
	db := a
	if !alias {
		db = pageEnd(tb, nt, sentinel)
	}
	nh := need(t, t, D, DH)
	v := pageEnd(tb, nh, sentinel)
	dy := pageEnd(tb, nh, sentinel)
	dv := pageEnd(tb, nh, sentinel)
	for i := 0; i < t; i++ {
		for c := 0; c < DH; c++ {
			v[i*D+c] = float32(r.NormFloat64())
			dy[i*D+c] = float32(r.NormFloat64())
		}
	}
	kc.back(t, a, v, dy, db, dv)

	var errs []string
	bad := func(f string, args ...any) {
		if len(errs) < 8 {
			errs = append(errs, fmt.Sprintf(f, args...))
		}
	}
	if !tb.guardsIntact() {
		bad("a guard in front of a slice was overwritten")
	}
	for j := 0; j < t; j++ {
		for c := 0; c < D && j*D+c < nh; c++ {
			got := dv[j*D+c]
			if c >= DH {
				if !same(got, sentinel) {
					bad("dv[%d][%d] = %v outside the head was written", j, c, got)
				}
				continue
			}
			want, mag := 0.0, 0.0
			i0 := j
			if kc.bidi {
				i0 = 0
			}
			for i := i0; i < t; i++ {
				x := float64(aIn[i*N+j]) * float64(dy[i*D+c])
				want += x
				mag += math.Abs(x)
			}
			if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
				bad("dv[%d][%d] = %v, want %v", j, c, got, want)
			}
		}
	}
	for i := 0; i < t; i++ {
		L := rowKeys(kc.bidi, i, t)
		g := make([]float64, L)
		gm := make([]float64, L)
		s, sm := 0.0, 0.0
		for j := 0; j < L; j++ {
			for c := 0; c < DH; c++ {
				x := float64(dy[i*D+c]) * float64(v[j*D+c])
				g[j] += x
				gm[j] += math.Abs(x)
			}
			s += float64(aIn[i*N+j]) * g[j]
			sm += float64(aIn[i*N+j]) * (gm[j] + math.Abs(g[j]))
		}
		for j := 0; j < N && i*N+j < nt; j++ {
			got := db[i*N+j]
			if j >= L {
				if !same(got, aIn[i*N+j]) {
					bad("db[%d][%d] = %v outside the triangle was written", i, j, got)
				}
				continue
			}
			aij := float64(aIn[i*N+j])
			want := aij * (g[j] - s)
			tol := 1e-5*aij*(gm[j]+sm+math.Abs(s)+math.Abs(g[j])) + 1e-30
			if math.IsNaN(float64(got)) || math.Abs(float64(got)-want) > tol {
				bad("db[%d][%d] = %v, want %v", i, j, got, want)
			}
			if aij == 0 && got != 0 {
				bad("db[%d][%d] = %v, want exactly 0", i, j, got)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// TestExp sweeps the emitted exp kernels against float64 math.Exp and
// prints the maximum relative error over [−87, 0] (normal results).
func TestExp(t *testing.T) {
	for _, e := range exps {
		if !enabled(e.isa) {
			continue
		}
		const n = 1 << 22
		x := make([]float32, n)
		y := make([]float32, n)
		for i := range x {
			x[i] = float32(-87 * float64(i) / float64(n-1))
		}
		e.fn(x, y)
		maxRel, at := 0.0, float32(0)
		for i := range x {
			want := math.Exp(float64(x[i]))
			rel := math.Abs(float64(y[i])-want) / want
			if rel > maxRel {
				maxRel, at = rel, x[i]
			}
		}
		fmt.Printf("exp %s: max relative error over [-87, 0] = %.3g (%.2f·2^-24) at x = %v\n", e.isa, maxRel, maxRel*(1<<24), at)
		if maxRel > 3e-7 {
			t.Errorf("exp %s: max relative error %g at x = %v", e.isa, maxRel, at)
		}
		// Below −87: the AVX-512 version keeps denormals down to the
		// smallest one, AVX2's flushes results below 2^−126 to +0.
		maxAbs, maxRelLo := 0.0, 0.0
		for i := range x {
			x[i] = float32(-87 - 20*float64(i)/float64(n-1))
		}
		e.fn(x, y)
		for i := range x {
			want := math.Exp(float64(x[i]))
			d := math.Abs(float64(y[i]) - want)
			maxAbs = math.Max(maxAbs, d)
			if want >= 0x1p-126 {
				maxRelLo = math.Max(maxRelLo, d/want)
			}
		}
		fmt.Printf("exp %s: below -87: max abs error %.3g, max rel error (normal results) %.3g\n", e.isa, maxAbs, maxRelLo)
		if maxAbs > 0x1p-126 {
			t.Errorf("exp %s: below -87, abs error %g", e.isa, maxAbs)
		}
		if e.isa == "avx512" { // valid for x > 0 too
			for i := range x {
				x[i] = float32(88.7 * float64(i) / float64(n-1))
			}
			e.fn(x, y)
			maxRelHi := 0.0
			for i := range x {
				want := math.Exp(float64(x[i]))
				maxRelHi = math.Max(maxRelHi, math.Abs(float64(y[i])-want)/want)
			}
			fmt.Printf("exp %s: max relative error over [0, 88.7] = %.3g\n", e.isa, maxRelHi)
			if maxRelHi > 3e-7 {
				t.Errorf("exp %s: max relative error %g over [0, 88.7]", e.isa, maxRelHi)
			}
			xs := []float32{89, 1e4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
			ys := make([]float32, 16)
			e.fn(xs, ys)
			if !math.IsInf(float64(ys[0]), 1) || !math.IsInf(float64(ys[1]), 1) {
				t.Errorf("exp %s(89), exp(1e4) = %v, %v, want +Inf", e.isa, ys[0], ys[1])
			}
		}
		// Special values.
		ninf, nan := float32(math.Inf(-1)), float32(math.NaN())
		sp := []float32{0, float32(math.Copysign(0, -1)), ninf, nan, -1e4, -104, -1e30, -88, -87.3}
		xs := make([]float32, 16)
		ys := make([]float32, 16)
		copy(xs, sp)
		e.fn(xs, ys)
		for i, v := range sp {
			want := float32(math.Exp(float64(v)))
			switch {
			case math.IsNaN(float64(v)):
				if !math.IsNaN(float64(ys[i])) {
					t.Errorf("exp %s(NaN) = %v, want NaN", e.isa, ys[i])
				}
			case v == 0 || v < -104:
				if ys[i] != want {
					t.Errorf("exp %s(%v) = %v, want exactly %v", e.isa, v, ys[i], want)
				}
			}
		}
		fmt.Printf("exp %s: exp(-Inf) = %v, exp(NaN) = %v, exp(-104) = %v, exp(-88) = %v, exp(0) = %v\n",
			e.isa, ys[2], ys[3], ys[5], ys[7], ys[0])
	}
}

var benchT = []int{64, 256}

// TestMinTime prints each kernel's fastest call out of many at t = N (and
// 256 when N is larger) when SV_MINTIME is set: on a loaded machine the
// minimum is a steadier figure than the mean of a benchmark.
func TestMinTime(t *testing.T) {
	if os.Getenv("SV_MINTIME") == "" {
		t.Skip("SV_MINTIME not set")
	}
	for _, kc := range cases {
		if !enabled(kc.isa) {
			continue
		}
		ts := []int{kc.N}
		if kc.N > 256 {
			ts = []int{256, kc.N}
		}
		for _, tt := range ts {
			fwd, back := kernelArgs(kc, tt)
			ff := 2 * float64(tt*tt*(kc.D/kc.Heads))
			fw, bw := minTime(fwd), minTime(back)
			fmt.Printf("mintime %s %s t=%d: fwd %v (%.1f GFLOP/s)  back %v (%.1f GFLOP/s)\n",
				kc.name, kc.isa, tt, fw, ff/fw.Seconds()/1e9, bw, 2*ff/bw.Seconds()/1e9)
		}
	}
}

func minTime(f func()) time.Duration {
	best := time.Hour
	for k := 0; k < 1000; k++ {
		s := time.Now()
		f()
		if d := time.Since(s); d < best {
			best = d
		}
	}
	return best
}

// kernelArgs returns calls of the forward (with a aliasing b) and backward
// kernels of kc at length t on random data.
func kernelArgs(kc kcase, t int) (fwd, back func()) {
	N, D := kc.N, kc.D
	DH := D / kc.Heads
	r := rand.New(rand.NewPCG(1, 2))
	bb := make([]float32, need(t, t, N, t))
	a := make([]float32, len(bb))
	db := make([]float32, len(bb))
	for i := range bb {
		bb[i] = float32(r.NormFloat64())
	}
	v := make([]float32, need(t, t, D, DH))
	y := make([]float32, len(v))
	dy := make([]float32, len(v))
	dv := make([]float32, len(v))
	for i := range v {
		v[i] = float32(r.NormFloat64())
		dy[i] = float32(r.NormFloat64())
	}
	kc.fwd(t, bb, a, v, y)
	return func() { kc.fwd(t, bb, bb, v, y) }, func() { kc.back(t, a, v, dy, db, dv) }
}

// BenchmarkSoftmaxValue runs both kernels of the cases with N ≥ 256 at
// t = 64 and 256, reporting FLOPs counted as 2·t²·DH (forward) and
// 4·t²·DH (backward), as for dense attention.
func BenchmarkSoftmaxValue(b *testing.B) {
	for _, kc := range cases {
		if !enabled(kc.isa) || kc.N < 256 {
			continue
		}
		DH := kc.D / kc.Heads
		for _, t := range benchT {
			fwd, back := kernelArgs(kc, t)
			b.Run(fmt.Sprintf("kernel=fwd/%s/t=%d/dh=%d/isa=%s", kc.name, t, DH, kc.isa), func(b *testing.B) {
				for b.Loop() {
					fwd()
				}
				b.ReportMetric(2*float64(t*t*DH)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
			b.Run(fmt.Sprintf("kernel=back/%s/t=%d/dh=%d/isa=%s", kc.name, t, DH, kc.isa), func(b *testing.B) {
				for b.Loop() {
					back()
				}
				b.ReportMetric(4*float64(t*t*DH)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
`
