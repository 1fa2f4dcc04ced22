package mat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/synthgen/synthgen/runtime/parallel"
)

// causalP fills the [t, t] block (row stride ld) of p with a causal
// probability-like matrix: positive below and on the diagonal, other
// values above it (which LowerA and UpperA take as zeros), and NaN beyond
// column t, which no product may read.
func causalP(r *rand.Rand, t, ld int) []float32 {
	p := make([]float32, t*ld)
	for i := 0; i < t; i++ {
		for j := 0; j < ld; j++ {
			switch {
			case j >= t:
				p[i*ld+j] = float32(math.NaN())
			case j <= i:
				p[i*ld+j] = r.Float32()
			default:
				p[i*ld+j] = 1e3 * float32(r.NormFloat64())
			}
		}
	}
	return p
}

// lower reads p's causal triangle, zero above it.
func lower(p []float32, ld int) func(i, j int) float32 {
	return func(i, j int) float32 {
		if j > i {
			return 0
		}
		return p[i*ld+j]
	}
}

// TestMulBatchBF16 checks attention's batched products at every bf16 level
// against the float64 reference on bf16-rounded operands: P·V (LowerA),
// Pᵀ·dY (UpperA), dY·Vᵀ (LowerC, the triangle only), a full product of
// several segments and a product whose A is shared, at lengths that are
// not multiples of the tiles, after products that leave other values in
// the packing buffers, with 1 and 3 workers bit-identical.
func TestMulBatchBF16(t *testing.T) {
	pool := parallel.New(3)
	defer pool.Close()
	for _, kn := range bfKernels(t) {
		t.Run(kn.Level.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 9))
			for _, sz := range [][3]int{{1, 1, 3}, {7, 5, 9}, {33, 16, 40}, {130, 24, 130}, {600, 64, 600}} {
				tt, dh, ld := sz[0], sz[1], sz[2]
				d := 2*dh + 3 // two heads in a row of width d
				ps := [2][]float32{causalP(r, tt, ld), causalP(r, tt, ld)}
				v, dy := randSlice(r, tt*d), randSlice(r, tt*d)
				head := func(x []float32, h int) Strided { return Strided{x[h*dh:], d, 1} }
				headT := func(x []float32, h int) Strided { return Strided{x[h*dh:], 1, d} }
				name := fmt.Sprintf("t%d dh%d", tt, dh)
				var first [4][]float32
				for wi, p := range []*parallel.Pool{nil, pool} {
					e := NewEngine(p)
					e.SetBF16(kn)
					y, dv := make([]float32, tt*d), make([]float32, tt*d)
					g := [2][]float32{make([]float32, tt*ld), make([]float32, tt*ld)}
					full := make([]float32, tt*tt)
					var fwd, dvp, gp []BatchProd
					for h := 0; h < 2; h++ {
						fwd = append(fwd, BatchProd{C: y[h*dh:], LDC: d, A: []Strided{{ps[h], ld, 1}}, B: []Strided{headT(v, h)}})
						dvp = append(dvp, BatchProd{C: dv[h*dh:], LDC: d, A: []Strided{{ps[h], 1, ld}}, B: []Strided{headT(dy, h)}})
						gp = append(gp, BatchProd{C: g[h], LDC: ld, A: []Strided{head(dy, h)}, B: []Strided{head(v, h)}})
					}
					// Fill the engine's packing buffers with other values first:
					// what the triangles leave unpacked must never be read.
					junk := randSlice(r, tt*ld)
					var pollute []BatchProd
					for h := 0; h < 2; h++ {
						pollute = append(pollute, BatchProd{C: make([]float32, tt*d), LDC: d, A: []Strided{{junk, ld, 1}}, B: []Strided{headT(v, h)}},
							BatchProd{C: make([]float32, tt*d), LDC: d, A: []Strided{{junk, 1, ld}}, B: []Strided{headT(dy, h)}})
					}
					if err := e.MulBatchBF16(tt, dh, tt, Full, pollute); err != nil {
						t.Fatal(err)
					}
					// A shared A (head 0's P for both): packed once.
					shared := []BatchProd{fwd[0], {C: make([]float32, tt*d), LDC: d, A: fwd[0].A, B: []Strided{headT(v, 1)}}}
					for _, c := range []struct {
						tri   Tri
						m, n  int
						k     int
						prods []BatchProd
					}{{LowerA, tt, dh, tt, fwd}, {UpperA, tt, dh, tt, dvp}, {LowerC, tt, tt, dh, gp}, {LowerA, tt, dh, tt, shared}} {
						if err := e.MulBatchBF16(c.m, c.n, c.k, c.tri, c.prods); err != nil {
							t.Fatal(err)
						}
					}
					// Both heads' dY·Vᵀ summed: two segments, full.
					if err := e.MulBatchBF16(tt, tt, dh, Full, []BatchProd{{C: full, LDC: tt, A: []Strided{head(dy, 0), head(dy, 1)}, B: []Strided{head(v, 0), head(v, 1)}}}); err != nil {
						t.Fatal(err)
					}
					for h := 0; h < 2; h++ {
						p := ps[h]
						for i := 0; i < tt; i++ {
							for c := 0; c < dh; c++ {
								s, abs := bfRef(lower(p, ld), func(c, j int) float32 { return v[j*d+h*dh+c] }, i, c, tt)
								check(t, name+" P·V", y[i*d+h*dh+c], s, bfTol(abs, tt))
								s, abs = bfRef(func(j, i int) float32 { return lower(p, ld)(i, j) }, func(c, i int) float32 { return dy[i*d+h*dh+c] }, i, c, tt)
								check(t, name+" Pᵀ·dY", dv[i*d+h*dh+c], s, bfTol(abs, tt))
							}
							for j := 0; j <= i; j++ {
								s, abs := bfRef(func(i, c int) float32 { return dy[i*d+h*dh+c] }, func(j, c int) float32 { return v[j*d+h*dh+c] }, i, j, dh)
								check(t, name+" dY·Vᵀ", g[h][i*ld+j], s, bfTol(abs, dh))
							}
						}
					}
					for i := 0; i < tt; i++ {
						for c := 0; c < dh; c++ {
							s, abs := bfRef(lower(ps[0], ld), func(c, j int) float32 { return v[j*d+dh+c] }, i, c, tt)
							check(t, name+" shared P·V", shared[1].C[i*d+c], s, bfTol(abs, tt))
						}
						for j := 0; j < tt; j++ {
							s, abs := bfRef(func(i, q int) float32 { return dy[i*d+q/dh*dh+q%dh] }, func(j, q int) float32 { return v[j*d+q/dh*dh+q%dh] }, i, j, 2*dh)
							check(t, name+" two segments", full[i*tt+j], s, bfTol(abs, 2*dh))
						}
					}
					outs := [4][]float32{y, dv, slices.Concat(g[0], g[1]), full}
					if wi == 0 {
						first = outs
						continue
					}
					for o := range outs {
						for x := range outs[o] { // above the diagonal g is not wanted
							if o == 2 && (x%ld > (x%(tt*ld))/ld) {
								continue
							}
							if math.Float32bits(outs[o][x]) != math.Float32bits(first[o][x]) {
								t.Fatalf("%s: output %d at %d differs with 3 workers: %g, %g", name, o, x, outs[o][x], first[o][x])
							}
						}
					}
				}
			}
		})
	}
}

// TestMulBatchBF16Errors checks that bad sizes and a missing kernel are
// errors, not panics.
func TestMulBatchBF16Errors(t *testing.T) {
	e := NewEngine(nil)
	p := []BatchProd{{C: make([]float32, 4), LDC: 2, A: []Strided{{make([]float32, 4), 2, 1}}, B: []Strided{{make([]float32, 4), 2, 1}}}}
	if err := e.MulBatchBF16(2, 2, 2, Full, p); err == nil {
		t.Error("no error without a bf16 kernel")
	}
	kns := bfKernels(t)
	e.SetBF16(kns[0])
	if err := e.MulBatchBF16(2, 2, 2, Full, p); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		m, n, k int
		tri     Tri
	}{{3, 2, 2, Full}, {2, 2, 3, Full}, {0, 2, 2, Full}, {2, 1, 1, LowerA}, {2, 1, 2, LowerC}} {
		if err := e.MulBatchBF16(c.m, c.n, c.k, c.tri, p); err == nil {
			t.Errorf("%v: no error", c)
		}
	}
}
