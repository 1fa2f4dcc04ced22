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
	var out []Case
	for _, sh := range gemmShapes(spec) {
		prefix := func(pass, impl string) string {
			return fmt.Sprintf("spec=%s/m=%d/k=%d/n=%d/kernel=Gemm/pass=%s/impl=%s", name, sh.m, sh.k, sh.n, pass, impl)
		}
		o := newGemmOperands(sh)
		for _, s := range sets {
			for _, c := range gemmSetCases(s, sh, o) {
				c.Name = prefix(c.Name, s.ISA.String())
				out = append(out, c)
			}
		}
		out = append(out, gonumCases(sh, o, prefix)...)
	}
	return out, nil
}

// GemmProducts returns the cases of GemmCases for one level: the three
// products of each linear-layer shape of spec through runtime/mat on set's
// micro-kernel (for the Go set, mat's plain-Go products), named
// m=…/k=…/n=…/pass=fwd|backx|backw; nil when set has no GemmTile.
func GemmProducts(spec specs.Spec, set kernels.Set) []Case {
	var out []Case
	for _, sh := range gemmShapes(spec) {
		for _, c := range gemmSetCases(set, sh, newGemmOperands(sh)) {
			c.Name = fmt.Sprintf("m=%d/k=%d/n=%d/pass=%s", sh.m, sh.k, sh.n, c.Name)
			out = append(out, c)
		}
	}
	return out
}

// gemmShape is one linear layer's product: m rows, k inputs, n outputs.
type gemmShape struct{ m, k, n int }

// gemmShapes are spec's distinct linear-layer shapes at m = 16·N.
func gemmShapes(spec specs.Spec) []gemmShape {
	m := 16 * spec.N
	shapes := []gemmShape{{m, spec.D, spec.D}}
	if spec.FFN != spec.D {
		shapes = append(shapes, gemmShape{m, spec.D, spec.FFN}, gemmShape{m, spec.FFN, spec.D})
	}
	return shapes
}

// gemmOperands are the matrices of one shape's three products.
type gemmOperands struct{ x, w, b, y, dy, dx, dw, db []float32 }

func newGemmOperands(sh gemmShape) *gemmOperands {
	m, k, n := sh.m, sh.k, sh.n
	r := rand.New(rand.NewPCG(3, 4))
	return &gemmOperands{
		x: randSlice(r, m*k, 1), w: randSlice(r, n*k, 1), b: randSlice(r, n, 1),
		y: randSlice(r, m*n, 1), dy: randSlice(r, m*n, 1),
		dx: randSlice(r, m*k, 1), dw: randSlice(r, n*k, 1), db: randSlice(r, n, 1),
	}
}

// gemmSetCases are the three products of shape sh on set s's micro-kernel,
// named by pass only.
func gemmSetCases(s kernels.Set, sh gemmShape, o *gemmOperands) []Case {
	if s.GemmTile == nil {
		return nil
	}
	m, k, n := sh.m, sh.k, sh.n
	flops := 2 * float64(m) * float64(k) * float64(n)
	e := mat.NewEngine(nil)
	if s.ISA > kernels.Go {
		e.SetGemm(s.GemmTile, s.GemmShape)
	}
	return []Case{
		{"fwd", flops, flops, func() { e.Linear(o.y, o.x, o.w, o.b, m, k, n) }},
		{"backx", flops, flops, func() { e.LinearBackX(o.dx, o.dy, o.w, m, k, n, false) }},
		{"backw", flops, flops, func() { e.LinearBackW(o.dw, o.db, o.dy, o.x, m, k, n) }},
	}
}

// gonumCases are the three products of shape sh with gonum's blas32.
func gonumCases(sh gemmShape, o *gemmOperands, prefix func(pass, impl string) string) []Case {
	m, k, n := sh.m, sh.k, sh.n
	flops := 2 * float64(m) * float64(k) * float64(n)
	ones := make([]float32, m)
	for i := range ones {
		ones[i] = 1
	}
	gx, gw, gy := general(m, k, k, o.x), general(n, k, k, o.w), general(m, n, n, o.y)
	gdx, gdw, gdy := general(m, k, k, o.dx), general(n, k, k, o.dw), general(m, n, n, o.dy)
	return []Case{
		{prefix("fwd", "gonum"), flops, flops, func() {
			for i := 0; i < m; i++ {
				copy(o.y[i*n:i*n+n], o.b)
			}
			blas32.Gemm(blas.NoTrans, blas.Trans, 1, gx, gw, 1, gy)
		}},
		{prefix("backx", "gonum"), flops, flops, func() {
			blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, gdy, gw, 0, gdx)
		}},
		{prefix("backw", "gonum"), flops, flops, func() {
			blas32.Gemm(blas.Trans, blas.NoTrans, 1, gdy, gx, 1, gdw)
			blas32.Gemv(blas.Trans, 1, gdy, blas32.Vector{N: m, Inc: 1, Data: ones}, 1, blas32.Vector{N: n, Inc: 1, Data: o.db})
		}},
	}
}
