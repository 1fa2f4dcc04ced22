package mat

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/parallel"
)

// bfKernels returns the bf16 kernels of every level that runs here.
func bfKernels(t testing.TB) []*bf16.Kernel {
	var out []*bf16.Kernel
	for _, l := range []bf16.Level{bf16.Go, bf16.AVX512BF16, bf16.AMX} {
		k, err := bf16.New(l)
		if errors.Is(err, bf16.ErrNoFeature) {
			t.Logf("bf16 level %s not tested: %v", l, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

// bfRef is Σ_p A(i, p)·B(j, p) in float64 over bf16-rounded operands, and
// the sum of the terms' absolute values.
func bfRef(at, bt func(r, p int) float32, i, j, k int) (s, abs float64) {
	for p := 0; p < k; p++ {
		x := float64(bf16.Round(at(i, p))) * float64(bf16.Round(bt(j, p)))
		s += x
		abs += math.Abs(x)
	}
	return s, abs
}

// bfTol is the error bound of a float32 sum of k exact products (bf16·bf16
// is exact in float32) and of the float32 additions the engine adds to it
// (bias, old value or residual): twice (k+2)·2⁻²⁴ of the absolute values'
// sum.
func bfTol(abs float64, k int) float64 { return 2*float64(k+2)*0x1p-24*abs + 1e-30 }

// TestLinearBF16 checks every linear-layer product on the bf16 path at
// every level against the float64 reference on bf16-rounded operands, for
// shapes with edges in every dimension, with 1 and 3 workers (bit-identical).
func TestLinearBF16(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {33, 31, 65}, {64, 64, 64}, {70, 129, 100}, {130, 40, 600}, {200, 96, 33}}
	pool := parallel.New(3)
	defer pool.Close()
	for _, kn := range bfKernels(t) {
		t.Run(kn.Level.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			for _, sh := range shapes {
				m, k, n := sh[0], sh[1], sh[2]
				x, w, b, dy := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, n), randSlice(r, m*n)
				res, old := randSlice(r, m*n), randSlice(r, m*k)
				name := fmt.Sprintf("m%d k%d n%d", m, k, n)
				for _, p := range []*parallel.Pool{nil, pool} {
					e := NewEngine(p)
					e.SetBF16(kn)
					// Forward: y = x·wᵀ + b, y += x·wᵀ + b, y = res + x·wᵀ + b.
					y := make([]float32, m*n)
					e.Linear(y, x, w, b, m, k, n)
					ya := slices.Clone(res)
					e.LinearAdd(ya, x, w, b, m, k, n)
					yr := make([]float32, m*n)
					e.LinearRes(yr, res, x, w, b, m, k, n)
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							s, abs := bfRef(func(r, p int) float32 { return x[r*k+p] }, func(r, p int) float32 { return w[r*k+p] }, i, j, k)
							s += float64(b[j])
							abs += math.Abs(float64(b[j]))
							check(t, name+" Linear", y[i*n+j], s, bfTol(abs, k))
							rv := float64(res[i*n+j])
							check(t, name+" LinearAdd", ya[i*n+j], s+rv, bfTol(abs+math.Abs(rv), k))
							check(t, name+" LinearRes", yr[i*n+j], s+rv, bfTol(abs+math.Abs(rv), k))
						}
					}
					// dx = dy·w and dx += dy·w.
					dx := make([]float32, m*k)
					e.LinearBackX(dx, dy, w, m, k, n, false)
					dxa := slices.Clone(old)
					e.LinearBackX(dxa, dy, w, m, k, n, true)
					for i := 0; i < m; i++ {
						for q := 0; q < k; q++ {
							s, abs := bfRef(func(r, p int) float32 { return dy[r*n+p] }, func(r, p int) float32 { return w[p*k+r] }, i, q, n)
							check(t, name+" LinearBackX", dx[i*k+q], s, bfTol(abs, n))
							o := float64(old[i*k+q])
							check(t, name+" LinearBackX accumulate", dxa[i*k+q], s+o, bfTol(abs+math.Abs(o), n))
						}
					}
					// dw += dyᵀ·x, db += colsum(dy) (float32).
					dw, db := slices.Clone(old[:0]), make([]float32, n)
					dw = append(dw, res[:min(len(res), n*k)]...)
					for len(dw) < n*k {
						dw = append(dw, 0.5)
					}
					dw0 := slices.Clone(dw)
					e.LinearBackW(dw, db, dy, x, m, k, n)
					for j := 0; j < n; j++ {
						var cs, ca float64
						for i := 0; i < m; i++ {
							cs += float64(dy[i*n+j])
							ca += math.Abs(float64(dy[i*n+j]))
						}
						check(t, name+" db", db[j], cs, bfTol(ca, m))
						for q := 0; q < k; q++ {
							s, abs := bfRef(func(r, p int) float32 { return dy[p*n+r] }, func(r, p int) float32 { return x[p*k+r] }, j, q, m)
							o := float64(dw0[j*k+q])
							check(t, name+" LinearBackW", dw[j*k+q], s+o, bfTol(abs+math.Abs(o), m))
						}
					}
					if p != nil {
						// Bit-identical to the single-goroutine engine.
						e1 := NewEngine(nil)
						e1.SetBF16(kn)
						y1 := make([]float32, m*n)
						e1.Linear(y1, x, w, b, m, k, n)
						dw1 := slices.Clone(dw0)
						e1.LinearBackW(dw1, make([]float32, n), dy, x, m, k, n)
						if !slices.Equal(y1, y) || !slices.Equal(dw1, dw) {
							t.Errorf("%s: results differ between 1 and %d workers", name, p.Size())
						}
					}
				}
			}
		})
	}
}

func check(t *testing.T, what string, got float32, want, tol float64) {
	t.Helper()
	if d := math.Abs(float64(got) - want); !(d <= tol) {
		t.Fatalf("%s: got %v, reference %v, bound %v", what, got, want, tol)
	}
}

// TestBF16Error checks that the bf16 path does round its operands: its
// difference from the float32 product is above float32's accumulation
// error and within bf16's (2⁻⁸ relative per operand pair).
func TestBF16Error(t *testing.T) {
	const m, k, n = 40, 300, 50
	r := rand.New(rand.NewPCG(1, 1))
	x, w := randSlice(r, m*k), randSlice(r, n*k)
	for _, kn := range bfKernels(t) {
		e := NewEngine(nil)
		e.SetBF16(kn)
		y := make([]float32, m*n)
		e.Linear(y, x, w, nil, m, k, n)
		var maxRel float64
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s, abs float64
				for p := 0; p < k; p++ {
					v := float64(x[i*k+p]) * float64(w[j*k+p])
					s += v
					abs += math.Abs(v)
				}
				rel := math.Abs(float64(y[i*n+j])-s) / abs
				if rel > 0x1p-8+bfTol(1, k) {
					t.Fatalf("%s: y[%d][%d] = %v, float64 product of the float32 operands %v: relative error %g above bf16's 2⁻⁸", kn.Level, i, j, y[i*n+j], s, rel)
				}
				maxRel = max(maxRel, rel)
			}
		}
		if maxRel < 1e-5 {
			t.Errorf("%s: largest error %g relative to Σ|terms|: the operands were not rounded to bf16", kn.Level, maxRel)
		}
	}
}

// TestThenBF16 checks the Then forms on the bf16 path at every level, with
// 1 and 3 workers: each row visited once, complete (the doubled product is
// twice Linear's or LinearBackX's, bit for bit), with blocks of whole rows.
func TestThenBF16(t *testing.T) {
	pool := parallel.New(3)
	defer pool.Close()
	r := rand.New(rand.NewPCG(9, 10))
	for _, kn := range bfKernels(t) {
		for _, sh := range [][3]int{{1, 1, 1}, {33, 31, 65}, {70, 129, 100}, {300, 40, 600}, {200, 96, 33}} {
			m, k, n := sh[0], sh[1], sh[2]
			x, w, b, dy := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, n), randSlice(r, m*n)
			for _, p := range []*parallel.Pool{nil, pool} {
				name := fmt.Sprintf("%s m%d k%d n%d workers %d", kn.Level, m, k, n, workers(p))
				e := NewEngine(p)
				e.SetBF16(kn)
				y, dx := make([]float32, m*n), make([]float32, m*k)
				e.Linear(y, x, w, b, m, k, n)
				e.LinearBackX(dx, dy, w, m, k, n, false)
				yt, dxt := randSlice(r, m*n), randSlice(r, m*k)
				dbl := &doubler{c: yt, n: n, seen: make([]int32, m)}
				e.LinearThen(yt, x, w, b, m, k, n, dbl)
				dbl.check(t, name+" LinearThen")
				dbl = &doubler{c: dxt, n: k, seen: make([]int32, m)}
				e.LinearBackXThen(dxt, dy, w, m, k, n, false, dbl)
				dbl.check(t, name+" LinearBackXThen")
				for i := range y {
					y[i] *= 2
				}
				for i := range dx {
					dx[i] *= 2
				}
				if !bitsEqual(yt, y) || !bitsEqual(dxt, dx) {
					t.Errorf("%s: the Then forms differ from twice the products", name)
				}
			}
		}
	}
}

// TestPanelsBF16 checks MulPanels on bf16 panels (PackB with a bf16
// kernel), at every level, against the float64 reference on bf16-rounded
// operands, on leading parts of both layouts with edges in m, n and k (k
// below a Step, not a multiple of one, past a bfBlockK), overwriting and
// accumulating, bit-identical with 1 and 3 workers; and that the operands
// were rounded (the error is bf16's, not float32's).
func TestPanelsBF16(t *testing.T) {
	pool := parallel.New(3)
	defer pool.Close()
	const N, K = 100, 600 // the packed operand: N columns (rows when transposed), K inner
	r := rand.New(rand.NewPCG(5, 6))
	bT := randSlice(r, N*K) // [N, K]: B(j, p) = bT[j·K + p]
	bR := randSlice(r, K*N) // [K, N]: B(j, p) = bR[p·N + j]
	shapes := [][3]int{{1, 1, 1}, {3, 5, 7}, {9, 33, 31}, {33, 64, 64}, {64, 100, 130}, {70, 37, 513}, {130, 100, 600}}
	for _, kn := range bfKernels(t) {
		t.Run(kn.Level.String(), func(t *testing.T) {
			var maxRel float64
			for _, transposed := range []bool{false, true} {
				var res [2][]float32 // 1 and 3 workers
				for wi, p := range []*parallel.Pool{nil, pool} {
					e := NewEngine(p)
					e.SetBF16(kn)
					var pn Panels
					bsrc, bat := bR, func(j, q int) float32 { return bR[q*N+j] }
					if transposed {
						bsrc, bat = bT, func(j, q int) float32 { return bT[j*K+q] }
					}
					e.PackB(&pn, bsrc, N, K, transposed)
					if pn.kp == 0 {
						t.Fatal("PackB with a bf16 kernel did not pack bf16 panels")
					}
					rr := rand.New(rand.NewPCG(1, 2))
					for _, sh := range shapes {
						m, n, k := sh[0], sh[1], sh[2]
						if !transposed {
							n = N // the whole width
						}
						name := fmt.Sprintf("transposed %t m%d n%d k%d", transposed, m, n, k)
						a := randSlice(rr, m*k)
						for _, acc := range []bool{false, true} {
							old := randSlice(rr, m*n)
							c := slices.Clone(old)
							e.MulPanels(c, a, &pn, m, n, k, acc)
							res[wi] = append(res[wi], c...)
							for i := 0; i < m; i++ {
								for j := 0; j < n; j++ {
									s, abs := bfRef(func(r, q int) float32 { return a[r*k+q] }, bat, i, j, k)
									var exact, eabs float64
									for q := 0; q < k; q++ {
										v := float64(a[i*k+q]) * float64(bat(j, q))
										exact += v
										eabs += math.Abs(v)
									}
									if acc {
										o := float64(old[i*n+j])
										s, abs, exact = s+o, abs+math.Abs(o), exact+o
									}
									check(t, name, c[i*n+j], s, bfTol(abs, k))
									maxRel = max(maxRel, math.Abs(float64(c[i*n+j])-exact)/eabs)
								}
							}
						}
					}
				}
				if !slices.Equal(res[0], res[1]) {
					t.Errorf("transposed %t: results differ between 1 and 3 workers", transposed)
				}
			}
			if maxRel < 1e-5 {
				t.Errorf("largest error %g relative to Σ|terms|: the operands were not rounded to bf16", maxRel)
			}
		})
	}
}

// TestPanelsBF16Switch: panels packed in bf16 and read after the engine
// went back to float32 (or the other way) give that precision's product.
func TestPanelsBF16Switch(t *testing.T) {
	kn := bfKernels(t)[0]
	const m, n, k = 5, 40, 70
	r := rand.New(rand.NewPCG(3, 4))
	a, b := randSlice(r, m*k), randSlice(r, n*k)
	want := make([]float32, m*n)
	NewEngine(nil).MulNT(want, a, b, m, n, k, false)
	e := NewEngine(nil)
	e.SetBF16(kn)
	var pn Panels
	e.PackB(&pn, b, n, k, true)
	e.SetBF16(nil)
	got := make([]float32, m*n)
	e.MulPanels(got, a, &pn, m, n, k, false)
	if !slices.Equal(got, want) {
		t.Errorf("bf16 panels read in float32: not the float32 product")
	}
	e.PackB(&pn, b, n, k, true)
	e.SetBF16(kn)
	e.MulPanels(got, a, &pn, m, n, k, false)
	if !slices.Equal(got, want) {
		t.Errorf("float32 panels read with a bf16 kernel: not the float32 product")
	}
}

// TestAccumulateTNBF16 checks AccumulateTN on the bf16 path, at every
// level, against the float64 reference on bf16-rounded operands (one
// float32 sum of all the terms' products and C's old value), bit for bit
// against LinearBackW called for each term in turn (on contiguous copies
// of its operands) on the same engine, and bit-identical with 0 to 3
// workers.
func TestAccumulateTNBF16(t *testing.T) {
	pools := []*parallel.Pool{nil, parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools[1:] {
			p.Close()
		}
	}()
	for _, kn := range bfKernels(t) {
		t.Run(kn.Level.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			var maxRel float64
			for _, sh := range [][2]int{{130, 70}, {64, 33}, {200, 97}} {
				m, n := sh[0], sh[1]
				terms := tnTerms(r, m, n)
				c0 := randSlice(r, m*n)
				var ref []float32
				for pi, pool := range pools {
					name := fmt.Sprintf("m%d n%d pool%d", m, n, pi)
					e := NewEngine(pool)
					e.SetBF16(kn)
					got := slices.Clone(c0)
					e.AccumulateTN(got, m, n, terms)
					if ref != nil {
						if !slices.Equal(got, ref) {
							t.Fatalf("%s: results differ from one worker's", name)
						}
						continue
					}
					ref = got
					seq := slices.Clone(c0)
					for _, tm := range terms {
						a, b := make([]float32, tm.K*tm.M), make([]float32, tm.K*n)
						for p := 0; p < tm.K; p++ {
							copy(a[p*tm.M:(p+1)*tm.M], tm.A[p*tm.LDA:])
							copy(b[p*n:(p+1)*n], tm.B[p*tm.LDB:])
						}
						e.LinearBackW(seq[:tm.M*n], nil, a, b, tm.K, n, tm.M)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(seq[i]) {
							t.Fatalf("%s: C[%d, %d] = %v, the terms through LinearBackW give %v", name, i/n, i%n, got[i], seq[i])
						}
					}
					for i := 0; i < m; i++ {
						for j := 0; j < n; j++ {
							o := float64(c0[i*n+j])
							s, abs, exact, eabs, k := o, math.Abs(o), o, math.Abs(o), 0
							for _, tm := range terms {
								if i >= tm.M {
									continue
								}
								ts, ta := bfRef(func(r, p int) float32 { return tm.A[p*tm.LDA+r] }, func(r, p int) float32 { return tm.B[p*tm.LDB+r] }, i, j, tm.K)
								s, abs, k = s+ts, abs+ta, k+tm.K
								for p := 0; p < tm.K; p++ {
									v := float64(tm.A[p*tm.LDA+i]) * float64(tm.B[p*tm.LDB+j])
									exact += v
									eabs += math.Abs(v)
								}
							}
							check(t, name, got[i*n+j], s, bfTol(abs, k))
							maxRel = max(maxRel, math.Abs(float64(got[i*n+j])-exact)/eabs)
						}
					}
				}
			}
			if maxRel < 1e-5 {
				t.Errorf("largest error %g relative to Σ|terms|: the operands were not rounded to bf16", maxRel)
			}
		})
	}
}
