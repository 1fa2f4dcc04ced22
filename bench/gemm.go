package bench

import (
	"fmt"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/synthgen/synthgen/internal/kernelbench"
	"github.com/synthgen/synthgen/runtime/kernels"
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
	var out []Case
	for _, sh := range kernelbench.GemmShapes(spec) {
		prefix := func(pass, impl string) string {
			return fmt.Sprintf("spec=%s/m=%d/k=%d/n=%d/kernel=Gemm/pass=%s/impl=%s", name, sh.M, sh.K, sh.N, pass, impl)
		}
		o := kernelbench.NewGemmOperands(sh)
		for _, s := range sets {
			for _, c := range kernelbench.GemmSetCases(s, sh, o) {
				c.Name = prefix(c.Name, s.ISA.String())
				out = append(out, c)
			}
		}
		out = append(out, gonumCases(sh, o, prefix)...)
	}
	return out, nil
}

// gonumCases are the three products of shape sh with gonum's blas32.
func gonumCases(sh kernelbench.GemmShape, o *kernelbench.GemmOperands, prefix func(pass, impl string) string) []Case {
	m, k, n := sh.M, sh.K, sh.N
	flops := 2 * float64(m) * float64(k) * float64(n)
	ones := make([]float32, m)
	for i := range ones {
		ones[i] = 1
	}
	gx, gw, gy := general(m, k, k, o.X), general(n, k, k, o.W), general(m, n, n, o.Y)
	gdx, gdw, gdy := general(m, k, k, o.DX), general(n, k, k, o.DW), general(m, n, n, o.DY)
	return []Case{
		{Name: prefix("fwd", "gonum"), Flops: flops, Executed: flops, Run: func() {
			for i := 0; i < m; i++ {
				copy(o.Y[i*n:i*n+n], o.B)
			}
			blas32.Gemm(blas.NoTrans, blas.Trans, 1, gx, gw, 1, gy)
		}},
		{Name: prefix("backx", "gonum"), Flops: flops, Executed: flops, Run: func() {
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, gdy, gw, 0, gdx)
		}},
		{Name: prefix("backw", "gonum"), Flops: flops, Executed: flops, Run: func() {
			blas32.Gemm(blas.Trans, blas.NoTrans, 1, gdy, gx, 1, gdw)
			blas32.Gemv(blas.Trans, 1, gdy, blas32.Vector{N: m, Inc: 1, Data: ones}, 1, blas32.Vector{N: n, Inc: 1, Data: o.DB})
		}},
	}
}

// GemmProducts returns the cases of GemmCases for one level: the three
// products of each linear-layer shape of spec through runtime/mat on set's
// micro-kernel (for the Go set, mat's plain-Go products), named
// m=…/k=…/n=…/pass=fwd|backx|backw; nil when set has no GemmTile.
func GemmProducts(spec specs.Spec, set kernels.Set) []Case {
	return kernelbench.GemmProducts(spec, set)
}
