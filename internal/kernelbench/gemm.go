package kernelbench

import (
	"fmt"
	"math/rand/v2"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/mat"
	"github.com/synthgen/synthgen/specs"
)

// GemmShape is one linear layer's product: M rows, K inputs, N outputs.
type GemmShape struct{ M, K, N int }

// GemmShapes are spec's distinct linear-layer shapes at the training
// batch's row count M = 16·N: d→d, and d→ffn, ffn→d when ffn ≠ d.
func GemmShapes(spec specs.Spec) []GemmShape {
	m := 16 * spec.N
	shapes := []GemmShape{{m, spec.D, spec.D}}
	if spec.FFN != spec.D {
		shapes = append(shapes, GemmShape{m, spec.D, spec.FFN}, GemmShape{m, spec.FFN, spec.D})
	}
	return shapes
}

// GemmOperands are the matrices of one shape's three products: forward
// Y = X·Wᵀ + B, DX = DY·W and DW += DYᵀ·X (with DB).
type GemmOperands struct{ X, W, B, Y, DY, DX, DW, DB []float32 }

// NewGemmOperands returns deterministic operands for shape sh.
func NewGemmOperands(sh GemmShape) *GemmOperands {
	m, k, n := sh.M, sh.K, sh.N
	r := rand.New(rand.NewPCG(3, 4))
	return &GemmOperands{
		X: RandSlice(r, m*k, 1), W: RandSlice(r, n*k, 1), B: RandSlice(r, n, 1),
		Y: RandSlice(r, m*n, 1), DY: RandSlice(r, m*n, 1),
		DX: RandSlice(r, m*k, 1), DW: RandSlice(r, n*k, 1), DB: RandSlice(r, n, 1),
	}
}

// GemmSetCases are the three products of shape sh through runtime/mat on
// set s's micro-kernel (for the Go set, mat's plain-Go products, which the
// runtime uses at that level), named by pass only: fwd, backx, backw; nil
// when s has no GemmTile. FLOPs are 2·m·k·n per product (all executed).
func GemmSetCases(s kernels.Set, sh GemmShape, o *GemmOperands) []Case {
	if s.GemmTile == nil {
		return nil
	}
	m, k, n := sh.M, sh.K, sh.N
	flops := 2 * float64(m) * float64(k) * float64(n)
	e := mat.NewEngine(nil)
	if s.ISA > kernels.Go {
		e.SetGemm(s.GemmTile, s.GemmShape)
	}
	return []Case{
		{"fwd", flops, flops, func() { e.Linear(o.Y, o.X, o.W, o.B, m, k, n) }},
		{"backx", flops, flops, func() { e.LinearBackX(o.DX, o.DY, o.W, m, k, n, false) }},
		{"backw", flops, flops, func() { e.LinearBackW(o.DW, o.DB, o.DY, o.X, m, k, n) }},
	}
}

// GemmProducts returns, for one level, the three products of each
// linear-layer shape of spec through runtime/mat on set's micro-kernel,
// named m=…/k=…/n=…/pass=fwd|backx|backw; nil when set has no GemmTile.
func GemmProducts(spec specs.Spec, set kernels.Set) []Case {
	var out []Case
	for _, sh := range GemmShapes(spec) {
		for _, c := range GemmSetCases(set, sh, NewGemmOperands(sh)) {
			c.Name = fmt.Sprintf("m=%d/k=%d/n=%d/pass=%s", sh.M, sh.K, sh.N, c.Name)
			out = append(out, c)
		}
	}
	return out
}
