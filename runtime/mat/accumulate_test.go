package mat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/parallel"
)

// tnTerms are AccumulateTN's terms for TestAccumulateTN, over C [m, n]:
// aft_full's shape (row blocks of 64, each over the keys before its end,
// one k-block each) and awkward ones (a term longer than a k-block, one
// with no inner rows, strides past the rows, M not a multiple of a tile).
func tnTerms(r *rand.Rand, m, n int) []TNTerm {
	var terms []TNTerm
	add := func(M, K, padA, padB int) {
		lda, ldb := M+padA, n+padB
		terms = append(terms, TNTerm{A: randSlice(r, max(0, (K-1)*lda+M)), B: randSlice(r, max(0, (K-1)*ldb+n)),
			LDA: lda, LDB: ldb, M: M, K: K})
	}
	for b := 64; b <= m; b += 64 {
		add(b, 64, 0, 0)
	}
	add(m, 300, 3, 5)
	add(37, 0, 0, 0)
	add(min(m, 101), 17, 1, 0)
	add(m, 1, 0, 2)
	return terms
}

// TestAccumulateTN checks AccumulateTN against LinearBackW called for
// each term in turn (on contiguous copies of its operands), bit for bit,
// on the plain path and each micro-kernel level, with 0 to 3 workers,
// and against float64 sums.
func TestAccumulateTN(t *testing.T) {
	pools := []*parallel.Pool{nil, parallel.New(1), parallel.New(2), parallel.New(3)}
	defer func() {
		for _, p := range pools[1:] {
			p.Close()
		}
	}()
	setups := []func(*Engine){nil}
	for _, s := range microSets(t) {
		setups = append(setups, func(e *Engine) { e.SetGemm(s.GemmTile, s.GemmShape) })
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][2]int{{512, 600}, {130, 70}, {64, 33}} {
		m, n := sh[0], sh[1]
		terms := tnTerms(r, m, n)
		c0 := randSlice(r, m*n)
		// float64 reference.
		want := make([]float64, m*n)
		for i, v := range c0 {
			want[i] = float64(v)
		}
		for _, tm := range terms {
			for p := 0; p < tm.K; p++ {
				for i := 0; i < tm.M; i++ {
					a := float64(tm.A[p*tm.LDA+i])
					for j := 0; j < n; j++ {
						want[i*n+j] += a * float64(tm.B[p*tm.LDB+j])
					}
				}
			}
		}
		for si, setup := range setups {
			var ref []float32
			for pi, pool := range pools {
				name := fmt.Sprintf("m%d_n%d/level%d/pool%d", m, n, si, pi)
				e := NewEngine(pool)
				if setup != nil {
					setup(e)
				}
				if ref == nil {
					// The terms one after another through LinearBackW.
					ref = append([]float32(nil), c0...)
					for _, tm := range terms {
						a, b := make([]float32, tm.K*tm.M), make([]float32, tm.K*n)
						for p := 0; p < tm.K; p++ {
							copy(a[p*tm.M:(p+1)*tm.M], tm.A[p*tm.LDA:])
							copy(b[p*n:(p+1)*n], tm.B[p*tm.LDB:])
						}
						e.LinearBackW(ref[:tm.M*n], nil, a, b, tm.K, n, tm.M)
					}
					for i, v := range ref {
						if d := math.Abs(float64(v) - want[i]); d > 1e-3*(1+math.Abs(want[i])) {
							t.Fatalf("%s: LinearBackW's sum [%d] = %v, float64 %v", name, i, v, want[i])
						}
					}
				}
				got := append([]float32(nil), c0...)
				e.AccumulateTN(got, m, n, terms)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
						t.Fatalf("%s: C[%d, %d] = %v, the terms through LinearBackW give %v", name, i/n, i%n, got[i], ref[i])
					}
				}
			}
		}
	}
}

// TestAccumulateTNBadTerm: a term that does not fit is a panic naming it.
func TestAccumulateTNBadTerm(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Error("no panic for a term of more rows than C")
		}
	}()
	var e Engine
	e.AccumulateTN(make([]float32, 4*4), 4, 4, []TNTerm{{A: make([]float32, 5), B: make([]float32, 4), LDA: 5, LDB: 4, M: 5, K: 1}})
}
