package mat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/synthgen/synthgen/runtime/parallel"
)

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(r.NormFloat64())
	}
	return s
}

// close64 compares a float32 result with a float64 reference, allowing for
// float32 rounding of a length-k sum of products of size ≤ mag.
func checkClose(t *testing.T, what string, got []float32, want []float64, k int, mag float64) {
	t.Helper()
	tol := 1e-6*float64(k+1)*mag + 1e-6
	bad := 0
	for i := range want {
		if d := math.Abs(float64(got[i]) - want[i]); !(d <= tol) {
			if bad < 5 {
				t.Errorf("%s[%d] = %g, want %g (|diff| %.3g > tol %.3g)", what, i, got[i], want[i], d, tol)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements wrong", what, bad, len(want))
	}
}

var shapes = [][3]int{ // m, k, n
	{1, 1, 1}, {2, 3, 1}, {3, 1, 5}, {7, 12, 10}, {14, 12, 6}, {65, 36, 49},
	{130, 257, 97}, {129, 513, 50}, {24, 36, 256}, {2, 600, 3}, {100, 0, 7},
}

func TestProducts(t *testing.T) { checkProducts(t, shapes, nil) }

// checkProducts runs the products at the shapes against naive float64
// references, on engines with 0 to 3 workers prepared by setup (nil: plain
// Go), which must agree bit for bit.
func checkProducts(t *testing.T, shapes [][3]int, setup func(*Engine)) {
	pools := []*parallel.Pool{nil, parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools[1:] {
			p.Close()
		}
	}()
	r := rand.New(rand.NewPCG(1, 2))
	for _, sh := range shapes {
		m, k, n := sh[0], sh[1], sh[2]
		x := randSlice(r, m*k)
		w := randSlice(r, n*k)
		b := randSlice(r, n)
		dy := randSlice(r, m*n)
		dx0 := randSlice(r, m*k)
		dw0 := randSlice(r, n*k)
		db0 := randSlice(r, n)
		res := randSlice(r, m*n)

		// Naive references in float64.
		y := make([]float64, m*n)
		yRes := make([]float64, m*n)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				s := float64(b[j])
				for p := 0; p < k; p++ {
					s += float64(x[i*k+p]) * float64(w[j*k+p])
				}
				y[i*n+j] = s
				yRes[i*n+j] = s + float64(res[i*n+j])
			}
		}
		dx := make([]float64, m*k)
		dxAcc := make([]float64, m*k)
		for i := 0; i < m; i++ {
			for p := 0; p < k; p++ {
				s := 0.0
				for j := 0; j < n; j++ {
					s += float64(dy[i*n+j]) * float64(w[j*k+p])
				}
				dx[i*k+p] = s
				dxAcc[i*k+p] = s + float64(dx0[i*k+p])
			}
		}
		dw := make([]float64, n*k)
		db := make([]float64, n)
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				s := float64(dw0[j*k+p])
				for i := 0; i < m; i++ {
					s += float64(dy[i*n+j]) * float64(x[i*k+p])
				}
				dw[j*k+p] = s
			}
			s := float64(db0[j])
			for i := 0; i < m; i++ {
				s += float64(dy[i*n+j])
			}
			db[j] = s
		}

		var first [][]float32
		for pi, pool := range pools {
			name := fmt.Sprintf("m%d_k%d_n%d/pool%d", m, k, n, pi)
			e := NewEngine(pool)
			if setup != nil {
				setup(e)
			}
			gotY := randSlice(r, m*n) // garbage: Linear overwrites
			e.Linear(gotY, x, w, b, m, k, n)
			checkClose(t, name+"/Linear", gotY, y, k, 4)

			gotYAdd := append([]float32(nil), res...)
			e.LinearAdd(gotYAdd, x, w, b, m, k, n)
			checkClose(t, name+"/LinearAdd", gotYAdd, yRes, k, 4)

			gotYRes := randSlice(r, m*n) // garbage: LinearRes overwrites
			resCopy := append([]float32(nil), res...)
			e.LinearRes(gotYRes, resCopy, x, w, b, m, k, n)
			checkClose(t, name+"/LinearRes", gotYRes, yRes, k, 4)
			for i := range res {
				if math.Float32bits(resCopy[i]) != math.Float32bits(res[i]) {
					t.Fatalf("%s/LinearRes: changed res[%d]", name, i)
				}
			}

			gotDX := randSlice(r, m*k)
			e.LinearBackX(gotDX, dy, w, m, k, n, false)
			checkClose(t, name+"/LinearBackX", gotDX, dx, n, 4)

			gotDXAcc := append([]float32(nil), dx0...)
			e.LinearBackX(gotDXAcc, dy, w, m, k, n, true)
			checkClose(t, name+"/LinearBackX(acc)", gotDXAcc, dxAcc, n, 4)

			gotDW := append([]float32(nil), dw0...)
			gotDB := append([]float32(nil), db0...)
			e.LinearBackW(gotDW, gotDB, dy, x, m, k, n)
			checkClose(t, name+"/LinearBackW.dw", gotDW, dw, m, 4)
			checkClose(t, name+"/LinearBackW.db", gotDB, db, m, 4)

			// The Then forms: the epilogue doubles each row; it must see every
			// row exactly once, complete.
			gotYThen := randSlice(r, m*n)
			dbl := &doubler{c: gotYThen, n: n, seen: make([]int32, m)}
			e.LinearThen(gotYThen, x, w, b, m, k, n, dbl)
			dbl.check(t, name+"/LinearThen")
			checkClose(t, name+"/LinearThen", gotYThen, scaled(y, 2), k, 8)

			gotDXThen := randSlice(r, m*k)
			dbl = &doubler{c: gotDXThen, n: k, seen: make([]int32, m)}
			e.LinearBackXThen(gotDXThen, dy, w, m, k, n, false, dbl)
			dbl.check(t, name+"/LinearBackXThen")
			checkClose(t, name+"/LinearBackXThen", gotDXThen, scaled(dx, 2), n, 8)

			all := [][]float32{gotY, gotYAdd, gotYRes, gotDX, gotDXAcc, gotDW, gotDB, gotYThen, gotDXThen}
			if first == nil {
				first = all
				continue
			}
			for q := range all {
				for i := range all[q] {
					if math.Float32bits(all[q][i]) != math.Float32bits(first[q][i]) {
						t.Fatalf("%s: product %d element %d = %g differs from the serial engine's %g", name, q, i, all[q][i], first[q][i])
					}
				}
			}
		}
	}
}

// doubler is a Rows that doubles each row of c (n floats wide) and counts
// its visits.
type doubler struct {
	c    []float32
	n    int
	seen []int32
}

func (d *doubler) Rows(r0, r1 int) {
	for i := r0; i < r1; i++ {
		atomic.AddInt32(&d.seen[i], 1)
		for j := range d.c[i*d.n : (i+1)*d.n] {
			d.c[i*d.n+j] *= 2
		}
	}
}

func (d *doubler) check(t *testing.T, what string) {
	t.Helper()
	for i, v := range d.seen {
		if v != 1 {
			t.Fatalf("%s: row %d visited %d times, want once", what, i, v)
		}
	}
}

func scaled(v []float64, f float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = f * x
	}
	return out
}

func TestLinearNoBias(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m, k, n := 5, 7, 4
	x, w := randSlice(r, m*k), randSlice(r, n*k)
	y := make([]float32, m*n)
	NewEngine(nil).Linear(y, x, w, nil, m, k, n)
	want := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			for p := 0; p < k; p++ {
				want[i*n+j] += float64(x[i*k+p]) * float64(w[j*k+p])
			}
		}
	}
	checkClose(t, "Linear(nil bias)", y, want, k, 4)
}

func TestAllocAligned(t *testing.T) {
	for _, n := range []int{0, 1, 3, 17, 1000} {
		s := Alloc(n)
		if len(s) != n || cap(s) != n {
			t.Fatalf("Alloc(%d): len %d cap %d", n, len(s), cap(s))
		}
		if n > 0 && uintptr(unsafePointer(s))%64 != 0 {
			t.Fatalf("Alloc(%d) is not 64-byte aligned", n)
		}
	}
}

func TestNoAllocs(t *testing.T) {
	pool := parallel.New(2)
	defer pool.Close()
	e := NewEngine(pool)
	m, k, n := 64, 48, 40
	e.Reserve(ScratchSize(m, k, n))
	x, w, b := Alloc(m*k), Alloc(n*k), Alloc(n)
	y, dy, dx, dw := Alloc(m*n), Alloc(m*n), Alloc(m*k), Alloc(n*k)
	allocs := testing.AllocsPerRun(20, func() {
		e.Linear(y, x, w, b, m, k, n)
		e.LinearBackX(dx, dy, w, m, k, n, false)
		e.LinearBackW(dw, b, dy, x, m, k, n)
	})
	if allocs != 0 {
		t.Fatalf("products allocate %v times per run", allocs)
	}
}

func benchLinear(b *testing.B, workers, m, k, n int, which string) {
	pool := parallel.New(workers)
	defer pool.Close()
	e := NewEngine(pool)
	e.Reserve(ScratchSize(m, k, n))
	r := rand.New(rand.NewPCG(5, 6))
	x, w, bias := randSlice(r, m*k), randSlice(r, n*k), randSlice(r, n)
	y, dy, dx, dw := make([]float32, m*n), randSlice(r, m*n), make([]float32, m*k), make([]float32, n*k)
	for b.Loop() {
		switch which {
		case "fwd":
			e.Linear(y, x, w, bias, m, k, n)
		case "backx":
			e.LinearBackX(dx, dy, w, m, k, n, false)
		case "backw":
			e.LinearBackW(dw, bias, dy, x, m, k, n)
		}
	}
	b.ReportMetric(2*float64(m)*float64(k)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkLinear measures the three products at the shapes of a
// d = 128, ffn = 512 model at batch 16 × 128 tokens.
func BenchmarkLinear(b *testing.B) {
	for _, workers := range []int{1, 2} {
		for _, sh := range [][3]int{{2048, 128, 128}, {2048, 128, 512}, {2048, 512, 128}} {
			for _, which := range []string{"fwd", "backx", "backw"} {
				b.Run(fmt.Sprintf("w%d/%dx%dx%d/%s", workers, sh[0], sh[1], sh[2], which), func(b *testing.B) {
					benchLinear(b, workers, sh[0], sh[1], sh[2], which)
				})
			}
		}
	}
}
