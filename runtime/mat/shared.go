package mat

import (
	"fmt"
	"slices"
)

// Products that share an operand: several linear layers reading the same
// input (attention's v, q, k and a dense synthesizer's w1 all read h1), in
// the forward pass and in both backward products. On the float32 paths
// each form runs exactly the single products it stands for, in order (the
// same bits as those calls). On the bf16 path the shared operand is
// rounded and packed once for all of them, and every product's blocks of
// C run in one pass on the pool; see each form for its bits.

// LinearOut is one output of LinearShared: Y = x·Wᵀ + B for W [N, k],
// B [N] (nil: no bias) and Y [rows, N].
type LinearOut struct {
	Y, W, B []float32
	N       int
}

// LinearShared computes every out.Y = x·out.Wᵀ + out.B for x [rows, k]:
// Linear(out.Y, x, out.W, out.B, rows, k, out.N) for each out in order.
// On the bf16 path x is packed once; every Y is bit-identical to its
// Linear. No Y may overlap x or another Y.
func (e *Engine) LinearShared(x []float32, rows, k int, outs []LinearOut) {
	for i, o := range outs {
		if o.N < 0 || len(o.W) < o.N*k || len(o.Y) < rows*o.N || o.B != nil && len(o.B) < o.N {
			panic(fmt.Sprintf("mat: LinearShared out %d: N %d, len(W) %d, len(Y) %d, len(B) %d, for x of %d × %d",
				i, o.N, len(o.W), len(o.Y), len(o.B), rows, k))
		}
	}
	if e.bf.k == nil || rows == 0 || k == 0 {
		for _, o := range outs {
			e.Linear(o.Y, x, o.W, o.B, rows, k, o.N)
		}
		return
	}
	if !slices.ContainsFunc(outs, func(o LinearOut) bool { return o.N > 0 }) {
		return
	}
	j := &e.bf.job
	j.begin(e.bf.k)
	j.seg(operand{x, k, 1}, k)
	sa := j.side(false, rows)
	for _, o := range outs {
		if o.N == 0 {
			continue
		}
		j.seg(operand{o.W, k, 1}, k)
		sb := j.side(true, o.N)
		var b []float32
		if o.B != nil {
			b = o.B[:o.N]
		}
		j.prod(sa, sb, o.Y, nil, b, nil, o.N, false)
	}
	e.bfRun()
}

// GradOut is one output of LinearBackWShared: DW += DYᵀ·x and DB +=
// colsum(DY) for DY [rows, N], DW [N, k] and DB [N] (nil: no bias).
type GradOut struct {
	DW, DB, DY []float32
	N          int
}

// LinearBackWShared accumulates the weight and bias gradients of several
// linear layers that read the same input x [rows, k]: LinearBackW(out.DW,
// out.DB, out.DY, x, rows, k, out.N) for each out in order. On the bf16
// path x is packed once; every DW and DB is bit-identical to its
// LinearBackW's.
func (e *Engine) LinearBackWShared(x []float32, rows, k int, outs []GradOut) {
	for i, o := range outs {
		if o.N < 0 || len(o.DW) < o.N*k || len(o.DY) < rows*o.N || o.DB != nil && len(o.DB) < o.N {
			panic(fmt.Sprintf("mat: LinearBackWShared out %d: N %d, len(DW) %d, len(DY) %d, len(DB) %d, for x of %d × %d",
				i, o.N, len(o.DW), len(o.DY), len(o.DB), rows, k))
		}
	}
	if e.bf.k == nil || rows == 0 || k == 0 {
		for _, o := range outs {
			e.LinearBackW(o.DW, o.DB, o.DY, x, rows, k, o.N)
		}
		return
	}
	if !slices.ContainsFunc(outs, func(o GradOut) bool { return o.N > 0 }) {
		return
	}
	j := &e.bf.job
	j.begin(e.bf.k)
	j.seg(operand{x, 1, k}, rows)
	sb := j.side(true, k)
	for _, o := range outs {
		if o.N == 0 {
			continue
		}
		j.seg(operand{o.DY, 1, o.N}, rows)
		sa := j.side(false, o.N)
		var db []float32
		if o.DB != nil {
			db = o.DB[:o.N]
		}
		j.prod(sa, sb, o.DW, nil, nil, db, k, true)
	}
	e.bfRun()
}

// BackXTerm is one term of LinearBackXSum: DY·W for DY [rows, N] and
// W [N, k].
type BackXTerm struct {
	DY, W []float32
	N     int
}

// LinearBackXSum computes the input gradient of x [rows, k] read by
// several linear layers: dx = Σ term.DY·term.W (dx += when accumulate),
// dx [rows, k]. On the float32 paths it is LinearBackX(dx, term.DY,
// term.W, rows, k, term.N, ·) for each term in order, the first with
// accumulate and the rest accumulating. On the bf16 path it is one
// product over the terms' inner dimensions concatenated (each padded to a
// multiple of bf16.Step): A = [DY₁ DY₂ …] and B = [W₁; W₂; …] each packed
// once, so each element is one float32 sum over all the terms (in
// 512-deep blocks of the concatenation, as any bf16 product's) rather than
// the terms' products added to dx one after another: a different rounding
// order from the separate LinearBackX calls, within the same bound of
// 2·(K+1)·2⁻²⁴ of the terms' magnitudes for K = Σ N.
func (e *Engine) LinearBackXSum(dx []float32, rows, k int, terms []BackXTerm, accumulate bool) {
	kk := 0
	for i, t := range terms {
		if t.N < 0 || len(t.W) < t.N*k || len(t.DY) < rows*t.N {
			panic(fmt.Sprintf("mat: LinearBackXSum term %d: N %d, len(W) %d, len(DY) %d, for dx of %d × %d",
				i, t.N, len(t.W), len(t.DY), rows, k))
		}
		kk += t.N
	}
	if e.bf.k == nil || rows == 0 || k == 0 || kk == 0 {
		for i, t := range terms {
			e.LinearBackX(dx, t.DY, t.W, rows, k, t.N, accumulate || i > 0)
		}
		return
	}
	j := &e.bf.job
	j.begin(e.bf.k)
	for _, t := range terms {
		if t.N > 0 {
			j.seg(operand{t.DY, t.N, 1}, t.N)
		}
	}
	sa := j.side(false, rows)
	for _, t := range terms {
		if t.N > 0 {
			j.seg(operand{t.W, 1, k}, t.N)
		}
	}
	sb := j.side(true, k)
	j.prod(sa, sb, dx[:rows*k], nil, nil, nil, k, accumulate)
	e.bfRun()
}
