package mat

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/parallel"
)

// TestPanels checks MulPanels on leading parts of a packed operand against
// MulNT and LinearBackX on the same parts unpacked, bit for bit, on the
// plain path and through each level's micro-kernel, with one worker and
// two, at sizes around the tile shape, the kc block and the panel width.
func TestPanels(t *testing.T) {
	pool := parallel.New(2)
	defer pool.Close()
	type setup struct {
		name string
		set  func(e *Engine)
	}
	setups := []setup{{"plain", func(*Engine) {}}}
	for _, s := range microSets(t) {
		setups = append(setups, setup{s.ISA.String(), func(e *Engine) { e.SetGemm(s.GemmTile, s.GemmShape) }})
	}
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	const N, K = 300, 520 // the packed operand: N columns (rows when transposed), K inner
	bT := rnd(N * K)      // [N, K]: B(j, p) = bT[j·K + p]
	bR := rnd(K * N)      // [K, N]: B(j, p) = bR[p·N + j]
	for _, su := range setups {
		for _, workers := range []int{1, 2} {
			e, ref := NewEngine(nil), NewEngine(nil)
			su.set(e)
			su.set(ref)
			if workers == 2 {
				e.SetPool(pool)
			}
			var pT, pR Panels
			e.PackB(&pT, bT, N, K, true)
			e.PackB(&pR, bR, N, K, false)
			for _, sh := range [][3]int{{1, 1, 1}, {9, 33, 257}, {64, 256, 520}, {37, 300, 100}, {130, 31, 519}} {
				m, n, k := sh[0], sh[1], sh[2]
				t.Run(fmt.Sprintf("%s/workers=%d/m=%d/n=%d/k=%d", su.name, workers, m, n, k), func(t *testing.T) {
					a := rnd(m * K)
					// Transposed: any n ≤ N, k ≤ K; B's part is bT's leading rows and columns.
					part := make([]float32, n*k)
					for j := 0; j < n; j++ {
						copy(part[j*k:j*k+k], bT[j*K:j*K+k])
					}
					for _, acc := range []bool{false, true} {
						got, want := rnd(m*n), make([]float32, m*n)
						copy(want, got)
						e.MulPanels(got, a[:m*k], &pT, m, n, k, acc)
						ref.MulNT(want, a[:m*k], part, m, n, k, acc)
						same(t, "transposed", got, want)
					}
					// Row-major: every column, any k ≤ K: bR's leading rows.
					got, want := make([]float32, m*N), make([]float32, m*N)
					e.MulPanels(got, a[:m*k], &pR, m, N, k, false)
					ref.LinearBackX(want, a[:m*k], bR[:k*N], m, N, k, false)
					same(t, "row-major", got, want)
				})
			}
		}
	}
}

func same(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestPanelsNoAllocs checks that repacking into the same Panels and the
// products from it do not allocate once the buffer has grown.
func TestPanelsNoAllocs(t *testing.T) {
	pool := parallel.New(2)
	defer pool.Close()
	for _, s := range microSets(t) {
		e := NewEngine(nil)
		e.SetGemm(s.GemmTile, s.GemmShape)
		e.SetPool(pool)
		b, a, c := Alloc(200*300), Alloc(64*300), Alloc(64*200)
		var p Panels
		e.PackB(&p, b, 200, 300, true)
		allocs := testing.AllocsPerRun(10, func() {
			e.PackB(&p, b, 200, 300, true)
			e.MulPanels(c, a, &p, 64, 200, 300, false)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per run", s.ISA, allocs)
		}
	}
}
