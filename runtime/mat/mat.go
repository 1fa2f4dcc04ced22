// Package mat holds the float32 matrix products of the linear layers, run
// on a parallel.Pool: through a generated GEMM micro-kernel when the engine
// has one (SetGemm; see pack.go), else in plain Go, a blocked, tiled
// product with a 2×3 register tile. With a bf16 kernel (SetBF16; see
// bf16.go) the linear layers' products, MulPanels and AccumulateTN take
// bf16 operands and accumulate in float32.
//
// All matrices are dense and row-major. For a linear layer with weight
// w [n, k] (PyTorch's [out, in]) and bias b [n] applied to x [m, k]:
//
//	Linear:      y  = x·wᵀ + b          y [m, n]
//	LinearAdd:   y += x·wᵀ + b
//	LinearRes:   y  = res + x·wᵀ + b
//	LinearBackX: dx = dy·w   (or +=)    dx [m, k]
//	LinearBackW: dw += dyᵀ·x, db += colsum(dy)
//
// and, for several layers reading one x (shared.go), LinearShared (each
// yᵢ = x·wᵢᵀ + bᵢ), LinearBackWShared (each dwᵢ, dbᵢ) and LinearBackXSum
// (dx = Σ dyᵢ·wᵢ).
//
// Every product is computed as C = A·Bᵀ. The plain path walks both
// operands along their contiguous rows (the backward products first
// transpose their operands into the engine's scratch); the micro-kernel
// path reads them in place through strides. The output is cut into tiles
// whose size depends only on the shapes, each tile is one task, and each
// output element is summed in the same fixed order whichever worker
// computes it: the results are bit-identical for any number of workers.
package mat

import (
	"fmt"
	"unsafe"

	"github.com/synthgen/synthgen/runtime/parallel"
)

// Blocking parameters. The register tile is 2 rows of A by 3 rows of B; a
// task computes a tileM×tileN block of C, blockK columns of the inner
// dimension at a time (so a 2×blockK strip of A and a tileN×blockK block of
// B stay in L1/L2).
const (
	tileM  = 64
	tileN  = 48
	blockK = 256
	tileT  = 32 // transpose tile
)

// Engine runs the products on a worker pool, with scratch for the
// transposed operands. The zero Engine runs on the calling goroutine alone.
// An Engine must not be used by two goroutines at once.
type Engine struct {
	pool    *parallel.Pool
	scratch []float32
	g       gemmJob
	tr      transposeJob

	mk    micro       // GEMM micro-kernel (SetGemm); none: plain Go
	packs [][]float32 // per-worker buffers of the micro-kernel path
	bpack []float32   // B packed into panels, shared by a product's tasks
	pj    packedJob
	pb    packBJob
	rj    rowsJob

	bf bfState // the linear layers' bf16 kernel (SetBF16; bf16.go)
}

// Rows is row-wise work on a product's output (an activation, or the
// backward's product with its derivative) that LinearThen and
// LinearBackXThen run on whole rows r0 ≤ r < r1 as soon as they are
// complete, on the worker that computed them, while they are still in its
// caches. Rows of one call never overlap; calls may run concurrently.
type Rows interface {
	Rows(r0, r1 int)
}

// rowsJob runs a Rows on blocks of rowsBlock rows (the plain-Go path, whose
// tasks are not whole rows).
type rowsJob struct {
	then Rows
	m    int
}

const rowsBlock = 64

func (j *rowsJob) Run(_, task int) {
	r0 := task * rowsBlock
	j.then.Rows(r0, min(r0+rowsBlock, j.m))
}

// thenRows runs then on every row of an m-row output, in parallel.
func (e *Engine) thenRows(then Rows, m int) {
	e.rj = rowsJob{then: then, m: m}
	e.run(ceilDiv(m, rowsBlock), &e.rj)
	e.rj = rowsJob{}
}

// NewEngine returns an engine that runs on pool (nil: the calling goroutine).
func NewEngine(pool *parallel.Pool) *Engine { return &Engine{pool: pool} }

// SetPool changes the pool the engine runs on (nil: the calling goroutine).
func (e *Engine) SetPool(pool *parallel.Pool) {
	e.pool = pool
	e.reservePacks()
}

// ScratchSize is the scratch a linear layer of these sizes needs: the
// largest of the backward products' transposed operands.
func ScratchSize(m, k, n int) int { return max(k*padded(n), (n+k)*padded(m)) }

// padded is the row stride of a transposed operand with rows of n floats:
// n rounded up to a cache line, plus one cache line so that consecutive rows
// do not fall into the same L1 set (which a stride of a multiple of 4 KiB does).
func padded(n int) int { return (n+15)/16*16 + 16 }

// Reserve makes sure the engine's scratch holds at least size floats, so
// that later calls with ScratchSize(m, k, n) ≤ size do not allocate.
func (e *Engine) Reserve(size int) {
	if len(e.scratch) < size {
		e.scratch = Alloc(size)
	}
}

// Alloc returns a zeroed slice of n float32s whose first element is aligned
// to 64 bytes (a cache line, and a ZMM register's width).
func Alloc(n int) []float32 {
	buf := make([]float32, n+16)
	off := 0
	if n > 0 {
		addr := uintptr(unsafe.Pointer(&buf[0]))
		off = int((64-addr%64)%64) / 4
	}
	return buf[off : off+n : off+n]
}

func (e *Engine) run(tasks int, job parallel.Job) {
	if e.pool == nil {
		for i := 0; i < tasks; i++ {
			job.Run(0, i)
		}
		return
	}
	e.pool.Run(tasks, job)
}

// MulNT computes C = A·Bᵀ (overwrite) or C += A·Bᵀ (accumulate) for
// A [m, k], B [n, k], C [m, n], all row-major and contiguous.
func (e *Engine) MulNT(c, a, b []float32, m, n, k int, accumulate bool) {
	if e.packedOK(m, n, k) {
		e.gemmPacked(c, nil, operand{a, k, 1}, operand{b, k, 1}, nil, nil, m, n, k, n, accumulate, nil)
		return
	}
	e.gemm(c, a, b, nil, nil, m, n, k, k, k, accumulate)
}

// Linear computes y = x·wᵀ + b for x [m, k], w [n, k], y [m, n]; b [n] may
// be nil (no bias).
func (e *Engine) Linear(y, x, w, b []float32, m, k, n int) {
	e.LinearThen(y, x, w, b, m, k, n, nil)
}

// LinearThen is Linear followed by then (if not nil) on every row of y,
// each row as soon as it is complete (Rows).
func (e *Engine) LinearThen(y, x, w, b []float32, m, k, n int, then Rows) {
	if b != nil {
		b = b[:n]
	}
	if e.bfOK(m, n, k) {
		e.gemmBF16(y, nil, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, false, then)
		return
	}
	if e.packedOK(m, n, k) {
		e.gemmPacked(y, nil, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, false, then)
		return
	}
	e.gemm(y, x, w, b, nil, m, n, k, k, k, false)
	if then != nil && m > 0 {
		e.thenRows(then, m)
	}
}

// LinearAdd computes y += x·wᵀ + b for x [m, k], w [n, k], y [m, n]; b [n]
// may be nil (no bias). It is Linear for a layer whose output is added to a
// residual stream.
func (e *Engine) LinearAdd(y, x, w, b []float32, m, k, n int) {
	if b != nil {
		b = b[:n]
	}
	if e.bfOK(m, n, k) {
		e.gemmBF16(y, nil, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, true, nil)
		return
	}
	if e.packedOK(m, n, k) {
		e.gemmPacked(y, nil, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, true, nil)
		return
	}
	e.gemm(y, x, w, b, nil, m, n, k, k, k, true)
}

// LinearRes computes y = res + x·wᵀ + b for x [m, k], w [n, k], res and y
// [m, n]; b [n] may be nil (no bias). It is LinearAdd for a layer whose
// input residual stream must be kept: res is read, not changed (y must not
// overlap it).
func (e *Engine) LinearRes(y, res, x, w, b []float32, m, k, n int) {
	if b != nil {
		b = b[:n]
	}
	res = res[:m*n]
	if e.bfOK(m, n, k) {
		e.gemmBF16(y, res, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, true, nil)
		return
	}
	if e.packedOK(m, n, k) {
		e.gemmPacked(y, res, operand{x, k, 1}, operand{w, k, 1}, b, nil, m, n, k, n, true, nil)
		return
	}
	copy(y[:m*n], res)
	e.gemm(y, x, w, b, nil, m, n, k, k, k, true)
}

// LinearBackX computes dx = dy·w (or dx += dy·w when accumulate) for
// dy [m, n], w [n, k], dx [m, k].
func (e *Engine) LinearBackX(dx, dy, w []float32, m, k, n int, accumulate bool) {
	e.LinearBackXThen(dx, dy, w, m, k, n, accumulate, nil)
}

// LinearBackXThen is LinearBackX followed by then (if not nil) on every row
// of dx, each row as soon as it is complete (Rows).
func (e *Engine) LinearBackXThen(dx, dy, w []float32, m, k, n int, accumulate bool, then Rows) {
	if m == 0 {
		return
	}
	switch {
	case k == 0:
	case n == 0:
		if !accumulate {
			clear(dx[:m*k])
		}
	case e.bfOK(m, k, n):
		e.gemmBF16(dx, nil, operand{dy, n, 1}, operand{w, 1, k}, nil, nil, m, k, n, k, accumulate, then)
		return
	case e.packedOK(m, k, n):
		// dx(i, j) = Σ_p dy[i·n+p]·w[p·k+j]: B(j, p) = w[p·k+j].
		e.gemmPacked(dx, nil, operand{dy, n, 1}, operand{w, 1, k}, nil, nil, m, k, n, k, accumulate, then)
		return
	default:
		ld := padded(n)
		e.Reserve(k * ld)
		wt := e.scratch[:k*ld]
		e.transpose(wt, w, n, k, ld)
		e.gemm(dx, dy, wt, nil, nil, m, k, n, n, ld, accumulate)
	}
	if then != nil {
		e.thenRows(then, m)
	}
}

// LinearBackW accumulates the weight and bias gradients of a linear layer:
// dw += dyᵀ·x and db += colsum(dy), for dy [m, n], x [m, k], dw [n, k],
// db [n]; db may be nil (no bias).
func (e *Engine) LinearBackW(dw, db, dy, x []float32, m, k, n int) {
	if m == 0 || n == 0 {
		return
	}
	if db != nil {
		db = db[:n]
	}
	if e.bfOK(n, k, m) {
		e.gemmBF16(dw, nil, operand{dy, 1, n}, operand{x, 1, k}, nil, db, n, k, m, k, true, nil)
		return
	}
	if e.packedOK(n, k, m) {
		// dw(j, q) += Σ_i dy[i·n+j]·x[i·k+q]: A(j, i) = dy[i·n+j], B(q, i) = x[i·k+q].
		e.gemmPacked(dw, nil, operand{dy, 1, n}, operand{x, 1, k}, nil, db, n, k, m, k, true, nil)
		return
	}
	e.plainTN(dw, db, dy, n, x, k, n, k, m)
}

// plainTN is C [m, n] += Aᵀ·B (and db += A's column sums, db not nil) on
// the plain path, for A [k, m] and B [k, n] with rows lda and ldb floats
// apart: both transposed into scratch, then gemm.
func (e *Engine) plainTN(c, db, a []float32, lda int, b []float32, ldb, m, n, k int) {
	ld := padded(k)
	e.Reserve((m + n) * ld)
	at := e.scratch[:m*ld]
	bt := e.scratch[m*ld : (m+n)*ld]
	e.transposeStrided(at, a, k, m, lda, ld)
	e.transposeStrided(bt, b, k, n, ldb, ld)
	e.gemm(c, at, bt, nil, db, m, n, k, ld, ld, true)
}

// TNTerm is one product of AccumulateTN's sum: Aᵀ·B for A [K, M] and B
// [K, n], rows LDA and LDB floats apart (LDA ≥ M, LDB ≥ n).
type TNTerm struct {
	A, B     []float32
	LDA, LDB int
	M, K     int
}

// AccumulateTN adds a sum of products to C [m, n] (row-major, contiguous):
// for each term in order, its Aᵀ·B to C's first term.M rows, as
// LinearBackW(c, nil, A, B, K, n, M) would with A and B contiguous. Every
// element gets the terms' parts in the same order and the same bits as
// those calls made one after another; with the micro-kernel each block of
// C takes all the terms' parts while it is in cache, rather than each
// term reading and writing all of C (aft_full's G = Ewᵀ·D, whose terms
// are its row blocks). Every term.M must be at most m. With a bf16 kernel
// (SetBF16) the terms run on it: bf16 operands, float32 sums, each
// block of C taking the terms' parts in order.
func (e *Engine) AccumulateTN(c []float32, m, n int, terms []TNTerm) {
	for i, t := range terms {
		if t.M > m || t.M < 0 || t.K < 0 || t.LDA < t.M || t.LDB < n ||
			t.K > 0 && t.M > 0 && (len(t.A) < (t.K-1)*t.LDA+t.M || len(t.B) < (t.K-1)*t.LDB+n) {
			panic(fmt.Sprintf("mat: AccumulateTN term %d: M %d, K %d, LDA %d, LDB %d, len(A) %d, len(B) %d, for C of %d × %d",
				i, t.M, t.K, t.LDA, t.LDB, len(t.A), len(t.B), m, n))
		}
	}
	if m == 0 || n == 0 {
		return
	}
	c = c[:m*n]
	if e.bfOK(m, n, 1) {
		e.accumulateTNBF16(c, m, n, terms)
		return
	}
	if e.packedOK(m, n, 1) {
		e.accumulateTN(c, m, n, terms)
		return
	}
	for _, t := range terms {
		if t.M > 0 && t.K > 0 {
			e.plainTN(c[:t.M*n], nil, t.A, t.LDA, t.B, t.LDB, t.M, n, t.K)
		}
	}
}

// packedOK reports whether a product C[m×n] with inner dimension k runs on
// the micro-kernel: the engine has one and no dimension is zero (the plain
// path handles those edge cases).
func (e *Engine) packedOK(m, n, k int) bool {
	return e.mk.tile != nil && m > 0 && n > 0 && k > 0
}

// gemm: C[m×n] (+)= A[m×k]·B[n×k]ᵀ (+ bias[j]); asum[i] += Σ_p A[i][p].
// Rows of A are lda apart, rows of B ldb apart; C is contiguous.
func (e *Engine) gemm(c, a, b, bias, asum []float32, m, n, k, lda, ldb int, accumulate bool) {
	if m == 0 {
		return
	}
	if n == 0 {
		if asum != nil {
			for i := 0; i < m; i++ {
				var s float32
				for _, v := range a[i*lda : i*lda+k] {
					s += v
				}
				asum[i] += s
			}
		}
		return
	}
	if k == 0 && !accumulate {
		for i := 0; i < m; i++ {
			row := c[i*n : i*n+n]
			if bias != nil {
				copy(row, bias)
			} else {
				clear(row)
			}
		}
		return
	}
	g := &e.g
	*g = gemmJob{c: c[:m*n], a: a[:(m-1)*lda+k], b: b[:(n-1)*ldb+k], bias: bias, asum: asum,
		m: m, n: n, k: k, lda: lda, ldb: ldb, acc: accumulate, tilesN: (n + tileN - 1) / tileN}
	tiles := (m + tileM - 1) / tileM * g.tilesN
	e.run(tiles, g)
	*g = gemmJob{}
}

type gemmJob struct {
	c, a, b, bias, asum []float32
	m, n, k, lda, ldb   int
	acc                 bool
	tilesN              int
}

// Run computes one tileM×tileN tile of C.
func (g *gemmJob) Run(_, task int) {
	m, n, k, lda, ldb := g.m, g.n, g.k, g.lda, g.ldb
	a, b, c := g.a, g.b, g.c
	i0 := task / g.tilesN * tileM
	j0 := task % g.tilesN * tileN
	i1 := min(i0+tileM, m)
	j1 := min(j0+tileN, n)
	for kb := 0; kb < k; kb += blockK {
		ke := min(kb+blockK, k)
		keep := g.acc || kb > 0 // add to C rather than overwrite it
		i := i0
		for ; i+1 < i1; i += 2 {
			row23(a[i*lda+kb:i*lda+ke], a[(i+1)*lda+kb:(i+1)*lda+ke], b[kb:], ldb, j0, j1,
				c[i*n:i*n+n], c[(i+1)*n:(i+1)*n+n], keep)
		}
		if i < i1 {
			row13(a[i*lda+kb:i*lda+ke], b[kb:], ldb, j0, j1, c[i*n:i*n+n], keep)
		}
	}
	if g.bias != nil {
		bias := g.bias
		for i := i0; i < i1; i++ {
			row := c[i*n+j0 : i*n+j1]
			bb := bias[j0:j1]
			bb = bb[:len(row)]
			for j := range row {
				row[j] += bb[j]
			}
		}
	}
	if g.asum != nil && j0 == 0 {
		for i := i0; i < i1; i++ {
			var s float32
			for _, v := range a[i*lda : i*lda+k] {
				s += v
			}
			g.asum[i] += s
		}
	}
}

// row23 computes (or adds, when keep) r0[j] = a0·b_j and r1[j] = a1·b_j
// for j0 ≤ j < j1, where b_j = b[j·ldb:][:len(a0)]: 2×3 register tiles, then
// 2×1 for the last columns.
func row23(a0, a1, b []float32, ldb, j0, j1 int, r0, r1 []float32, keep bool) {
	k := len(a0)
	j := j0
	for ; j+2 < j1; j += 3 {
		s00, s01, s02, s10, s11, s12 := dot23(a0, a1, b[j*ldb:j*ldb+k], b[(j+1)*ldb:(j+1)*ldb+k], b[(j+2)*ldb:(j+2)*ldb+k])
		if keep {
			r0[j] += s00
			r0[j+1] += s01
			r0[j+2] += s02
			r1[j] += s10
			r1[j+1] += s11
			r1[j+2] += s12
		} else {
			r0[j], r0[j+1], r0[j+2] = s00, s01, s02
			r1[j], r1[j+1], r1[j+2] = s10, s11, s12
		}
	}
	for ; j < j1; j++ {
		s0, s1 := dot21(a0, a1, b[j*ldb:j*ldb+k])
		if keep {
			r0[j] += s0
			r1[j] += s1
		} else {
			r0[j], r1[j] = s0, s1
		}
	}
}

// row13 is row23 for a single row of A.
func row13(a0, b []float32, ldb, j0, j1 int, r0 []float32, keep bool) {
	k := len(a0)
	j := j0
	for ; j+2 < j1; j += 3 {
		s0, s1, s2 := dot13(a0, b[j*ldb:j*ldb+k], b[(j+1)*ldb:(j+1)*ldb+k], b[(j+2)*ldb:(j+2)*ldb+k])
		if keep {
			r0[j] += s0
			r0[j+1] += s1
			r0[j+2] += s2
		} else {
			r0[j], r0[j+1], r0[j+2] = s0, s1, s2
		}
	}
	for ; j < j1; j++ {
		s := dot11(a0, b[j*ldb:j*ldb+k])
		if keep {
			r0[j] += s
		} else {
			r0[j] = s
		}
	}
}

// The register-tile kernels. Each output is one accumulator summed over p
// in increasing order, so every kernel gives an element the same value.

func dot23(a0, a1, b0, b1, b2 []float32) (c00, c01, c02, c10, c11, c12 float32) {
	n := len(a0)
	a1 = a1[:n]
	b0 = b0[:n]
	b1 = b1[:n]
	b2 = b2[:n]
	for p := 0; p < n; p++ {
		x0, x1 := a0[p], a1[p]
		y0, y1, y2 := b0[p], b1[p], b2[p]
		c00 += x0 * y0
		c01 += x0 * y1
		c02 += x0 * y2
		c10 += x1 * y0
		c11 += x1 * y1
		c12 += x1 * y2
	}
	return
}

func dot21(a0, a1, b0 []float32) (c0, c1 float32) {
	n := len(a0)
	a1 = a1[:n]
	b0 = b0[:n]
	for p := 0; p < n; p++ {
		y := b0[p]
		c0 += a0[p] * y
		c1 += a1[p] * y
	}
	return
}

func dot13(a0, b0, b1, b2 []float32) (c0, c1, c2 float32) {
	n := len(a0)
	b0 = b0[:n]
	b1 = b1[:n]
	b2 = b2[:n]
	for p := 0; p < n; p++ {
		x := a0[p]
		c0 += x * b0[p]
		c1 += x * b1[p]
		c2 += x * b2[p]
	}
	return
}

func dot11(a0, b0 []float32) (c float32) {
	b0 = b0[:len(a0)]
	for p, x := range a0 {
		c += x * b0[p]
	}
	return
}

// transpose writes dst = srcᵀ for src [rows, cols]: dst has cols rows of
// rows floats, ld apart.
func (e *Engine) transpose(dst, src []float32, rows, cols, ld int) {
	e.transposeStrided(dst, src, rows, cols, cols, ld)
}

// transposeStrided is transpose for src's rows lds floats apart.
func (e *Engine) transposeStrided(dst, src []float32, rows, cols, lds, ld int) {
	if rows == 0 || cols == 0 {
		return
	}
	t := &e.tr
	*t = transposeJob{dst: dst[:(cols-1)*ld+rows], src: src[:(rows-1)*lds+cols], rows: rows, cols: cols, lds: lds, ld: ld,
		tilesC: (cols + tileT - 1) / tileT}
	e.run((rows+tileT-1)/tileT*t.tilesC, t)
	*t = transposeJob{}
}

type transposeJob struct {
	dst, src   []float32
	rows, cols int
	lds, ld    int // src's and dst's row strides
	tilesC     int
}

// Run transposes one tileT×tileT block.
func (t *transposeJob) Run(_, task int) {
	i0 := task / t.tilesC * tileT
	j0 := task % t.tilesC * tileT
	i1 := min(i0+tileT, t.rows)
	j1 := min(j0+tileT, t.cols)
	lds, ld := t.lds, t.ld
	for i := i0; i < i1; i++ {
		row := t.src[i*lds+j0 : i*lds+j1]
		for jj, v := range row {
			t.dst[(j0+jj)*ld+i] = v
		}
	}
}
