package model

import (
	"github.com/synthgen/synthgen/runtime/mat"
)

// The step's other few-row products (the attention's over the cached
// positions, dense's w2, and every product where the one-row kernels are
// not used) run on the micro-kernel padded to a whole tile of its MR
// rows: an edge tile of A narrower than MR is packed, zero-padded, into
// the engine's buffer for every tile and inner block of the product,
// which costs as much as the product itself at one row, while a full tile
// is read where it lies, and the kernel computes MR rows either way. So the row is copied into the first row of pa and the product
// written into pc: the other rows of pa hold anything (each row of C
// depends on its own row of A only) and their rows of pc are not read.

// mulPanels computes c = a·Bᵀ for rows rows of a [rows, k] (c [rows, n])
// and B the operand pn holds (mat.Engine.MulPanels).
func (dc *Decoder) mulPanels(c, a []float32, pn *mat.Panels, rows, n, k int) {
	if !dc.mk || rows%dc.mr == 0 {
		dc.eng.MulPanels(c[:rows*n], a[:rows*k], pn, rows, n, k, false)
		return
	}
	r := (rows + dc.mr - 1) / dc.mr * dc.mr
	copy(dc.pa[:rows*k], a[:rows*k])
	dc.eng.MulPanels(dc.pc[:r*n], dc.pa[:r*k], pn, r, n, k, false)
	copy(c[:rows*n], dc.pc[:rows*n])
}

// backX computes the row c = a·w for a [1, n], w [n, k], c [1, k]
// (mat.Engine.LinearBackX).
func (dc *Decoder) backX(c, a, w []float32, k, n int) {
	if !dc.mk || dc.mr == 1 {
		dc.eng.LinearBackX(c[:k], a[:n], w[:n*k], 1, k, n, false)
		return
	}
	r := dc.mr
	copy(dc.pa[:n], a[:n])
	dc.eng.LinearBackX(dc.pc[:r*k], dc.pa[:r*n], w[:n*k], r, k, n, false)
	copy(c[:k], dc.pc[:k])
}

// exp replaces x by e^x: the spec's Exp kernel when it has one.
func (dc *Decoder) exp(x []float32) {
	if f := dc.m.Kernels.Exp; f != nil {
		f(len(x), x)
		return
	}
	expInPlace(x)
}

// dot is Σ a[p]·b[p] over len(a).
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	p := 0
	for ; p+4 <= len(a); p += 4 {
		s0 += a[p] * b[p]
		s1 += a[p+1] * b[p+1]
		s2 += a[p+2] * b[p+2]
		s3 += a[p+3] * b[p+3]
	}
	for ; p < len(a); p++ {
		s0 += a[p] * b[p]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy adds alpha·x to y over len(x).
func axpy(alpha float32, x, y []float32) {
	y = y[:len(x)]
	for c, v := range x {
		y[c] += alpha * v
	}
}
