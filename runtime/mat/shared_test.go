package mat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/runtime/parallel"
)

// sharedShapes are rows, k and the outputs' (or terms') N, with edges off
// multiples of 16 and 32 in every dimension, an empty output, and sizes
// past one 512-deep block of the kernel (and of the concatenation).
var sharedShapes = []struct {
	rows, k int
	ns      []int
}{
	{1, 1, []int{1}},
	{3, 5, []int{7, 1, 2}},
	{33, 31, []int{65, 0, 17}},
	{64, 64, []int{64, 64, 64, 64}},
	{70, 129, []int{100, 33, 31, 1}},
	{130, 40, []int{300, 250}},
	{45, 520, []int{20, 520, 7}},
	{17, 3, []int{1, 1, 1}},
}

// sharedEngines returns the engines the shared forms run on, each with a
// name and whether it is float32 (the forms must match the single
// products bit for bit) or bf16: the plain path, every micro-kernel this
// run may use, and every bf16 level this CPU has, on pool (nil: the
// calling goroutine).
func sharedEngines(t *testing.T, pool *parallel.Pool) (names []string, engines []*Engine, isBF []bool) {
	names, engines, isBF = append(names, "plain"), append(engines, NewEngine(pool)), append(isBF, false)
	for _, s := range microSets(t) {
		e := NewEngine(pool)
		e.SetGemm(s.GemmTile, s.GemmShape)
		names, engines, isBF = append(names, "f32-"+s.ISA.String()), append(engines, e), append(isBF, false)
	}
	for _, kn := range bfKernels(t) {
		e := NewEngine(pool)
		e.SetBF16(kn)
		names, engines, isBF = append(names, "bf16-"+kn.Level.String()), append(engines, e), append(isBF, true)
	}
	return
}

// TestLinearShared checks LinearShared and LinearBackWShared bit for bit
// against the single products they stand for (Linear, LinearBackW), on
// every float32 path and bf16 level, with 1 and 3 workers.
func TestLinearShared(t *testing.T) {
	pool := parallel.New(3)
	defer pool.Close()
	r := rand.New(rand.NewPCG(21, 22))
	for _, sh := range sharedShapes {
		rows, k := sh.rows, sh.k
		x := randSlice(r, rows*k)
		var ws, bs, dys, dws, dbs [][]float32
		for i, n := range sh.ns {
			ws = append(ws, randSlice(r, n*k))
			if i != 1 { // one output without a bias
				bs = append(bs, randSlice(r, n))
			} else {
				bs = append(bs, nil)
			}
			dys = append(dys, randSlice(r, rows*n))
			dws = append(dws, randSlice(r, n*k))
			dbs = append(dbs, randSlice(r, n))
		}
		for _, p := range []*parallel.Pool{nil, pool} {
			names, engines, _ := sharedEngines(t, p)
			for ei, e := range engines {
				name := fmt.Sprintf("%s rows %d k %d ns %v workers %d", names[ei], rows, k, sh.ns, workers(p))
				var outs []LinearOut
				var gouts []GradOut
				var wantY, wantDW, wantDB [][]float32
				for i, n := range sh.ns {
					y := make([]float32, rows*n)
					e.Linear(y, x, ws[i], bs[i], rows, k, n)
					wantY = append(wantY, y)
					outs = append(outs, LinearOut{Y: slices.Repeat([]float32{float32(math.NaN())}, rows*n), W: ws[i], B: bs[i], N: n})
					dw, db := slices.Clone(dws[i]), slices.Clone(dbs[i])
					if i == 1 {
						db = nil
					}
					e.LinearBackW(dw, db, dys[i], x, rows, k, n)
					wantDW, wantDB = append(wantDW, dw), append(wantDB, db)
					gdb := slices.Clone(dbs[i])
					if i == 1 {
						gdb = nil
					}
					gouts = append(gouts, GradOut{DW: slices.Clone(dws[i]), DB: gdb, DY: dys[i], N: n})
				}
				e.LinearShared(x, rows, k, outs)
				e.LinearBackWShared(x, rows, k, gouts)
				for i := range sh.ns {
					if !bitsEqual(outs[i].Y, wantY[i]) {
						t.Errorf("%s: LinearShared out %d differs from Linear", name, i)
					}
					if !bitsEqual(gouts[i].DW, wantDW[i]) || !bitsEqual(gouts[i].DB, wantDB[i]) {
						t.Errorf("%s: LinearBackWShared out %d differs from LinearBackW", name, i)
					}
				}
			}
		}
	}
}

func workers(p *parallel.Pool) int {
	if p == nil {
		return 1
	}
	return p.Size()
}

// bitsEqual compares two float32 slices bit for bit.
func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestLinearBackXSum checks LinearBackXSum: on the float32 paths bit for
// bit against LinearBackX term by term; on every bf16 level against a
// float64 reference on the bf16-rounded operands, within 2·(K+1)·2⁻²⁴ of
// the terms' magnitudes (K = Σ N; the old value of dx added to both when
// accumulating), and bit for bit between 1 and 3 workers.
func TestLinearBackXSum(t *testing.T) {
	pool := parallel.New(3)
	defer pool.Close()
	r := rand.New(rand.NewPCG(23, 24))
	for _, sh := range sharedShapes {
		rows, k := sh.rows, sh.k
		var terms []BackXTerm
		kk := 0
		for _, n := range sh.ns {
			terms = append(terms, BackXTerm{DY: randSlice(r, rows*n), W: randSlice(r, n*k), N: n})
			kk += n
		}
		old := randSlice(r, rows*k)
		bfGot := map[string][2][]float32{}
		for _, p := range []*parallel.Pool{nil, pool} {
			names, engines, isBF := sharedEngines(t, p)
			for ei, e := range engines {
				name := fmt.Sprintf("%s rows %d k %d ns %v workers %d", names[ei], rows, k, sh.ns, workers(p))
				got := slices.Repeat([]float32{float32(math.NaN())}, rows*k)
				e.LinearBackXSum(got, rows, k, terms, false)
				gotAcc := slices.Clone(old)
				e.LinearBackXSum(gotAcc, rows, k, terms, true)
				if !isBF[ei] {
					want := slices.Repeat([]float32{float32(math.NaN())}, rows*k)
					wantAcc := slices.Clone(old)
					for i, tm := range terms {
						e.LinearBackX(want, tm.DY, tm.W, rows, k, tm.N, i > 0)
						e.LinearBackX(wantAcc, tm.DY, tm.W, rows, k, tm.N, true)
					}
					if !bitsEqual(got, want) || !bitsEqual(gotAcc, wantAcc) {
						t.Errorf("%s: LinearBackXSum differs from LinearBackX term by term", name)
					}
					continue
				}
				for i := 0; i < rows; i++ {
					for q := 0; q < k; q++ {
						var s, abs float64
						for _, tm := range terms {
							ts, ta := bfRef(func(r, p int) float32 { return tm.DY[r*tm.N+p] }, func(r, p int) float32 { return tm.W[p*k+r] }, i, q, tm.N)
							s, abs = s+ts, abs+ta
						}
						tol := 2*float64(kk+1)*0x1p-24*abs + 1e-30
						check(t, name+" LinearBackXSum", got[i*k+q], s, tol)
						o := float64(old[i*k+q])
						check(t, name+" LinearBackXSum accumulate", gotAcc[i*k+q], s+o, 2*float64(kk+2)*0x1p-24*(abs+math.Abs(o))+1e-30)
					}
				}
				if prev, ok := bfGot[names[ei]]; ok {
					if !bitsEqual(prev[0], got) || !bitsEqual(prev[1], gotAcc) {
						t.Errorf("%s: LinearBackXSum differs between 1 and %d workers", name, workers(p))
					}
				}
				bfGot[names[ei]] = [2][]float32{got, gotAcc}
			}
		}
	}
}

// TestLinearBackXSumRounds checks that LinearBackXSum's bf16 path does
// round its operands and sums the terms in one product: its result differs
// from the float32 one, and at every level it equals LinearBackX of the
// concatenated operands bit for bit (each term's inner dimension a
// multiple of bf16.Step, so the concatenation has no padding between
// them, and all of it in one 512-deep block).
func TestLinearBackXSumRounds(t *testing.T) {
	const rows, k = 37, 45
	ns := []int{64, 32, 96}
	r := rand.New(rand.NewPCG(25, 26))
	var terms []BackXTerm
	kk := 0
	for _, n := range ns {
		terms = append(terms, BackXTerm{DY: randSlice(r, rows*n), W: randSlice(r, n*k), N: n})
		kk += n
	}
	// The concatenation: dy [rows, kk] = [DY₁ DY₂ DY₃], w [kk, k] = [W₁; W₂; W₃].
	dy := make([]float32, 0, rows*kk)
	for i := 0; i < rows; i++ {
		for _, tm := range terms {
			dy = append(dy, tm.DY[i*tm.N:(i+1)*tm.N]...)
		}
	}
	var w []float32
	for _, tm := range terms {
		w = append(w, tm.W...)
	}
	for _, kn := range bfKernels(t) {
		e := NewEngine(nil)
		e.SetBF16(kn)
		got := make([]float32, rows*k)
		e.LinearBackXSum(got, rows, k, terms, false)
		want := make([]float32, rows*k)
		e.LinearBackX(want, dy, w, rows, k, kk, false)
		if !bitsEqual(got, want) {
			t.Errorf("%s: LinearBackXSum differs from LinearBackX of the concatenated operands", kn.Level)
		}
		f32 := make([]float32, rows*k)
		NewEngine(nil).LinearBackX(f32, dy, w, rows, k, kk, false)
		if bitsEqual(got, f32) {
			t.Errorf("%s: LinearBackXSum equals the float32 product: operands not rounded", kn.Level)
		}
	}
}

// TestSharedNoAllocs checks that the shared forms do not allocate on the
// bf16 path once the engine's buffers have grown.
func TestSharedNoAllocs(t *testing.T) {
	const rows, k = 100, 64
	r := rand.New(rand.NewPCG(27, 28))
	x := randSlice(r, rows*k)
	outs := []LinearOut{{Y: make([]float32, rows*k), W: randSlice(r, k*k), B: randSlice(r, k), N: k}, {Y: make([]float32, rows*k), W: randSlice(r, k*k), N: k}}
	gouts := []GradOut{{DW: make([]float32, k*k), DB: make([]float32, k), DY: randSlice(r, rows*k), N: k}, {DW: make([]float32, k*k), DY: randSlice(r, rows*k), N: k}}
	terms := []BackXTerm{{DY: randSlice(r, rows*k), W: randSlice(r, k*k), N: k}, {DY: randSlice(r, rows*k), W: randSlice(r, k*k), N: k}}
	dx := make([]float32, rows*k)
	pool := parallel.New(2)
	defer pool.Close()
	for _, kn := range bfKernels(t) {
		e := NewEngine(pool)
		e.SetBF16(kn)
		f := func() {
			e.LinearShared(x, rows, k, outs)
			e.LinearBackWShared(x, rows, k, gouts)
			e.LinearBackXSum(dx, rows, k, terms, false)
		}
		f()
		if a := testing.AllocsPerRun(5, f); a != 0 {
			t.Errorf("%s: %v allocations per run", kn.Level, a)
		}
	}
}
