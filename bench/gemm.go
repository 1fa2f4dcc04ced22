package bench

import (
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/mat"
	"github.com/synthgen/synthgen/specs"
)

// SpecOf returns the spec of a linked generated package.
func SpecOf(name string) (specs.Spec, error) { return kernels.Spec(name) }

// GemmCases returns the three products of each distinct linear-layer shape
// of spec name (d→d, d→ffn, ffn→d) at the training batch's row count
// m = 16·N, on one core: forward y = x·wᵀ + b, dx = dy·w and dw += dyᵀ·x
// (with db), through runtime/mat on the spec's generated GEMM micro-kernel
// at every level this CPU runs (impl=avx2|avx512; impl=go is mat's
// plain-Go products, which the runtime uses at that level because they
// beat the Go micro-kernel), and through gonum's blas32.Gemm (impl=gonum),
// as a Go user would write them. FLOPs are 2·m·k·n per product (all
// executed).
func GemmCases(name string) ([]Case, error) {
	spec, err := kernels.Spec(name)
	if err != nil {
		return nil, err
	}
	sets, err := kernels.Sets(name)
	if err != nil {
		return nil, err
	}
	m := 16 * spec.N
	type shape struct{ k, n int }
	shapes := []shape{{spec.D, spec.D}}
	if spec.FFN != spec.D {
		shapes = append(shapes, shape{spec.D, spec.FFN}, shape{spec.FFN, spec.D})
	}
	var out []Case
	for _, sh := range shapes {
		k, n := sh.k, sh.n
		r := rand.New(rand.NewPCG(3, 4))
		x, w, b := randSlice(r, m*k, 1), randSlice(r, n*k, 1), randSlice(r, n, 1)
		y, dy := randSlice(r, m*n, 1), randSlice(r, m*n, 1)
		dx, dw, db := randSlice(r, m*k, 1), randSlice(r, n*k, 1), randSlice(r, n, 1)
		flops := 2 * float64(m) * float64(k) * float64(n)
		prefix := func(pass, impl string) string {
			return fmt.Sprintf("spec=%s/m=%d/k=%d/n=%d/kernel=Gemm/pass=%s/impl=%s", name, m, k, n, pass, impl)
		}
		for _, s := range sets {
			if s.GemmTile == nil {
				continue
			}
			e := mat.NewEngine(nil)
			if s.ISA > kernels.Go {
				e.SetGemm(s.GemmTile, s.GemmShape)
			}
			impl := s.ISA.String()
			out = append(out,
				Case{prefix("fwd", impl), flops, flops, func() { e.Linear(y, x, w, b, m, k, n) }},
				Case{prefix("backx", impl), flops, flops, func() { e.LinearBackX(dx, dy, w, m, k, n, false) }},
				Case{prefix("backw", impl), flops, flops, func() { e.LinearBackW(dw, db, dy, x, m, k, n) }},
			)
		}
		ones := make([]float32, m)
		for i := range ones {
			ones[i] = 1
		}
		gx, gw, gy := general(m, k, k, x), general(n, k, k, w), general(m, n, n, y)
		gdx, gdw, gdy := general(m, k, k, dx), general(n, k, k, dw), general(m, n, n, dy)
		out = append(out,
			Case{prefix("fwd", "gonum"), flops, flops, func() {
				for i := 0; i < m; i++ {
					copy(y[i*n:i*n+n], b)
				}
				blas32.Gemm(blas.NoTrans, blas.Trans, 1, gx, gw, 1, gy)
			}},
			Case{prefix("backx", "gonum"), flops, flops, func() {
				blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, gdy, gw, 0, gdx)
			}},
			Case{prefix("backw", "gonum"), flops, flops, func() {
				blas32.Gemm(blas.Trans, blas.NoTrans, 1, gdy, gx, 1, gdw)
				blas32.Gemv(blas.Trans, 1, gdy, blas32.Vector{N: m, Inc: 1, Data: ones}, 1, blas32.Vector{N: n, Inc: 1, Data: db})
			}},
		)
	}
	return out, nil
}
