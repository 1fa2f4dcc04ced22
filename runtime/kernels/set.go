// Package kernels is the runtime's side of the generated code: the kernel
// signatures every generated package implements, the registry that
// generated packages fill from their init functions, and the dispatch that
// picks, per kernel, the best instruction set this CPU has.
//
// Layout conventions shared by every kernel (the generated code bakes the
// spec's sizes in as constants; t ≤ N is the only size passed at run time):
//
//   - Activation matrices are [t, D] row-major; head h of one is the slice
//     starting at column h·DH, read with row stride D.
//   - Logit and probability matrices of one (sequence, head) are [t, N]
//     row-major with row stride N. Only the causal lower triangle j ≤ i < t
//     is read or written; kernels never touch entries with j > i.
//   - "Overwrite" outputs are written whole; "accumulate" outputs are added to.
//
// Exact formulas are in docs/kernels.md.
package kernels

// SoftmaxValueFunc is the fused causal softmax and value product for one
// (sequence, head): for every row i < t,
//
//	a[i·N+j] = exp(b[i·N+j] − m_i) / Σ_{j'≤i} exp(b[i·N+j'] − m_i),  j ≤ i, m_i = max_{j≤i} b[i·N+j]
//	y[i·D+c] = Σ_{j≤i} a[i·N+j] · v[j·D+c],                            c < DH
//
// a may be the same slice as b. Entries of b may be −Inf (an extra mask); a
// row whose entries are all −Inf gives a = 0 and y = 0.
type SoftmaxValueFunc func(t int, b, a, v, y []float32)

// SoftmaxValueBackFunc is the backward of SoftmaxValueFunc. From the kept
// probabilities a, the values v and the output gradient dy it writes
// (overwrite)
//
//	dv[j·D+c] = Σ_{j≤i<t} a[i·N+j] · dy[i·D+c]
//	db[i·N+j] = a[i·N+j] · (g_ij − Σ_{j'≤i} a[i·N+j'] · g_ij'),  g_ij = Σ_c dy[i·D+c] · v[j·D+c]
//
// db may be the same slice as a.
type SoftmaxValueBackFunc func(t int, a, v, dy, db, dv []float32)

// ProductFunc synthesizes logits as a causal product (vanilla's Q·Kᵀ,
// dense's G·W2ᵀ, factorized random's R1·R2ᵀ): for j ≤ i < t (overwrite)
//
//	c[i·N+j] = scale · Σ_{p<W} x[i·LX+p] · w[j·LW+p] + bias[j]
//
// with the width W and the row strides LX, LW fixed by the kernel's
// instance; bias may be empty (no bias).
type ProductFunc func(t int, x, w, bias, c []float32, scale float32)

// ProductBackXFunc is the gradient of ProductFunc with respect to x (overwrite):
//
//	dx[i·LX+p] = scale · Σ_{j≤i} dc[i·N+j] · w[j·LW+p]
type ProductBackXFunc func(t int, dc, w, dx []float32, scale float32)

// ProductBackWFunc is the gradient of ProductFunc with respect to w and the
// bias (accumulate):
//
//	dw[j·LW+p] += scale · Σ_{j≤i<t} dc[i·N+j] · x[i·LX+p]
//	dbias[j]   += Σ_{j≤i<t} dc[i·N+j]          (skipped when dbias is empty)
type ProductBackWFunc func(t int, dc, x, dw, dbias []float32, scale float32)

// TileFunc synthesizes factorized-dense logits (overwrite), j ≤ i < t:
//
//	c[i·N+j] = fa[i·LA + j/FB] · fb[i·LB + j%FB]
//
// with LA = Heads·FA and LB = Heads·FB the row strides of the per-sequence
// FA and FB matrices (pass the head's slice).
type TileFunc func(t int, fa, fb, c []float32)

// TileBackFunc is the gradient of TileFunc (overwrite), for i < t, p < FA, q < FB:
//
//	dfa[i·LA+p] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fb[i·LB+q]
//	dfb[i·LB+q] = Σ_{j=p·FB+q ≤ i} dc[i·N+j] · fa[i·LA+p]
type TileBackFunc func(t int, dc, fa, fb, dfa, dfb []float32)

// TriScaleFunc writes y = alpha·x on the causal triangle (overwrite).
type TriScaleFunc func(t int, alpha float32, x, y []float32)

// TriAxpyFunc adds alpha·x to y on the causal triangle (accumulate).
type TriAxpyFunc func(t int, alpha float32, x, y []float32)

// TriDotFunc returns Σ_{j≤i<t} x[i·N+j]·y[i·N+j].
type TriDotFunc func(t int, x, y []float32) float32

// Set holds one instruction set's kernels for one spec. A nil field is a
// kernel the spec does not need (or this level does not provide).
type Set struct {
	ISA ISA

	SoftmaxValue     SoftmaxValueFunc
	SoftmaxValueBack SoftmaxValueBackFunc

	// vanilla: x = Q_h, w = K_h (strides D, width DH).
	VanillaLogits      ProductFunc
	VanillaLogitsBackX ProductBackXFunc
	VanillaLogitsBackW ProductBackWFunc

	// dense: x = relu(w1(h))_h (stride D, width DH), w = w2.weight (stride DH).
	DenseLogits      ProductFunc
	DenseLogitsBackX ProductBackXFunc
	DenseLogitsBackW ProductBackWFunc

	// factorized_random: x = R1[h], w = R2[h] (stride K, width K).
	FactRandomLogits      ProductFunc
	FactRandomLogitsBackX ProductBackXFunc
	FactRandomLogitsBackW ProductBackWFunc

	// factorized_dense: the tiling product of FA and FB.
	FactDenseLogits     TileFunc
	FactDenseLogitsBack TileBackFunc

	// Mixtures and random's gradient: causal-triangle vector operations.
	TriScale TriScaleFunc
	TriAxpy  TriAxpyFunc
	TriDot   TriDotFunc
}
