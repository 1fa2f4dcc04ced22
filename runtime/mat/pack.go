package mat

import (
	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The micro-kernel path: when the engine has a GEMM micro-kernel (SetGemm),
// every product is cut into blocks of C, one task each, and each task walks
// the inner dimension kcBlock at a time, running the micro-kernel over
// every MR×NR tile of its block, B panel outermost so a panel stays in L1.
//
// The micro-kernel reads A through two strides and B's rows p as NR
// contiguous floats, so most operands are read where they lie: A
// (row-major or transposed), B whenever its columns are contiguous (the
// backward products). B with contiguous rows (the weight of a forward
// product) is packed once per product, shared by all tasks, into panels
// of NR columns; an edge tile narrower than the kernel's MR×NR is packed,
// zero-padded, into the worker's own buffer, since the kernel reads whole
// tiles.
//
// An operand read in place puts each p on a cache line of its own, its
// row stride apart: a transposed A (the output gradient of a weight
// gradient product) and B (its input). Within a k-block the first tile
// to read such a block copies it on its way through (the kernel's apack
// and bpack) into the worker's buffer, packed, and the other tiles read
// the copy: B's panel is copied by the panel's first tile, A's tiles by
// the first panel's. Copying in a pass of its own, before the products,
// measured slower than reading in place: the copy cost what it saved.
//
// One call of the micro-kernel runs all the full tiles down a B panel
// (mr above MR, A's tiles at steps of at), so that the call, its checks
// and this loop are paid once per panel and k-block rather than per tile.
//
// An element of C is the sum of its kc-blocks' partial sums, added in
// increasing order, each partial sum formed over p in increasing order by
// the micro-kernel: its value depends on kcBlock only, not on mc, nc, the
// task count or which worker ran it, so results are bit-identical for any
// number of workers.

const (
	kcBlock  = 256 // inner-dimension block: a B panel of NR·kcBlock floats stays in L1
	mcTarget = 128 // rows of a C block, rounded down to MR (the A block stays in L2)
	ncTarget = 128 // columns of a C block, rounded down to NR
	minTasks = 4   // cut blocks smaller until there are this many, for the workers
	// wideTarget is the rows and columns of a C block of a product whose A
	// is transposed (a weight gradient, whose inner dimension is the
	// tokens: thousands), when it still makes minTasks blocks. Each block
	// reads its rows of A and columns of B over the whole inner dimension
	// from memory, so the product reads A once per column block and B once
	// per row block: blocks of 256 × 256 halve that traffic against 128 ×
	// 128. Their working set, C's block, A's copy (256 KiB each) and B's
	// panel, fits L2.
	wideTarget = 256
)

// micro is the engine's GEMM micro-kernel and its tile shape.
type micro struct {
	tile   kernels.GemmTileFunc
	mr, nr int
	mc, nc int // full block sizes
}

// SetGemm gives the engine a GEMM micro-kernel and its tile shape function
// (kernels.GemmTileFunc, kernels.GemmShapeFunc, from the same level); the
// products then run through it. Either nil returns the engine to the
// plain-Go products. It reserves the workers' buffers for the engine's
// current pool, so calls afterwards do not allocate (but for the shared
// packed B, which grows to the largest weight once).
func (e *Engine) SetGemm(tile kernels.GemmTileFunc, shape kernels.GemmShapeFunc) {
	if tile == nil || shape == nil {
		e.mk = micro{}
		return
	}
	mr, nr := shape()
	if mr < 1 || nr < 1 {
		panic("mat: GEMM micro-kernel with an empty tile shape")
	}
	e.mk = micro{tile: tile, mr: mr, nr: nr, mc: max(mr, mcTarget/mr*mr), nc: max(nr, ncTarget/nr*nr)}
	e.reservePacks()
}

// PanelFloats is the size, in float32s, of the buffer PackB allocates for
// an n × k operand: 0 without a GEMM micro-kernel (SetGemm), whose plain-Go
// products read B in place; with a bf16 kernel (SetBF16), its bf16 panels'
// size in float32s.
func (e *Engine) PanelFloats(n, k int) int {
	if n == 0 || k == 0 {
		return 0
	}
	if e.bf.k != nil {
		return (ceilDiv(n, bf16.NR)*bf16.BPanel(bf16.Pad(k)) + 1) / 2
	}
	if e.mk.tile == nil {
		return 0
	}
	return ceilDiv(n, e.mk.nr) * e.mk.nr * k
}

// reservePacks makes sure every worker has its buffer: an edge tile of A
// (MR×kcBlock), a panel of B (kcBlock×NR: an edge panel, or a copy), and
// the copy of a block of a transposed A (its rows, up to wideTarget, by
// kcBlock, plus MR floats).
func (e *Engine) reservePacks() {
	if e.mk.tile == nil {
		return
	}
	workers := 1
	if e.pool != nil {
		workers = e.pool.Size()
	}
	per := (e.mk.mr+e.mk.nr)*kcBlock + max(e.mk.mc, e.mk.wideRows())*kcBlock + e.mk.mr
	if len(e.packs) < workers || len(e.packs[0]) < per {
		e.packs = make([][]float32, workers)
		for w := range e.packs {
			e.packs[w] = Alloc(per)
		}
	}
}

// operand is a matrix read as rows of the inner dimension: element (r, p)
// is data[r·rs + p·cs].
type operand struct {
	data   []float32
	rs, cs int
}

func (o operand) at(r, p int) float32 { return o.data[r*o.rs+p*o.cs] }

// packedJob computes C[m×n] (+)= A·Bᵀ (+ bias) and asum[i] += Σ_p A(i, p)
// with the micro-kernel; C has row stride ldc. With res set, C starts from
// res (same layout) rather than from 0 or its old value. bpk, when set, is
// B packed into panels of NR columns over the whole inner dimension.
type packedJob struct {
	e                  *Engine
	c, res, bias, asum []float32
	a, b               operand
	bpk                []float32
	bps                int // floats from one panel of bpk to the next
	m, n, k, ldc       int
	mc, nc, tilesN     int
	acc                bool
	then               Rows     // run on each block's rows, which span C's width
	terms              []TNTerm // a sum of products (AccumulateTN): a, b, k unused
}

// packBJob packs B's panels of NR columns. With B's rows p contiguous
// (b.rs == 1: an operand of Panels, PackB) a task packs a run of packRows
// rows p into every panel, reading each source row once, front to back;
// otherwise (the weight of a forward product, small) a task packs one
// panel.
type packBJob struct {
	dst  []float32
	b    operand
	n, k int
	nr   int
}

// packRows is the run of B's rows a row-wise packing task copies.
const packRows = 64

// tasks is the number of tasks the job runs as.
func (j *packBJob) tasks() int {
	if j.b.rs == 1 {
		return ceilDiv(j.k, packRows)
	}
	return ceilDiv(j.n, j.nr)
}

func (j *packBJob) Run(_, task int) {
	if j.b.rs != 1 {
		j0 := task * j.nr
		pack(j.dst[task*j.k*j.nr:][:j.k*j.nr], j.b, j0, min(j0+j.nr, j.n), 0, j.k, j.nr)
		return
	}
	nr, k, n := j.nr, j.k, j.n
	full := n / nr * nr // columns in whole panels
	for p := task * packRows; p < min(k, (task+1)*packRows); p++ {
		src := j.b.data[p*j.b.cs:][:n]
		d := j.dst[p*nr:]
		jr := 0
		switch nr {
		case 32:
			for ; jr < full; jr += 32 {
				*(*[32]float32)(d[jr*k:]) = *(*[32]float32)(src[jr:])
			}
		case 16:
			for ; jr < full; jr += 16 {
				*(*[16]float32)(d[jr*k:]) = *(*[16]float32)(src[jr:])
			}
		default:
			for ; jr < full; jr += nr {
				copy(d[jr*k:jr*k+nr], src[jr:])
			}
		}
		if jr < n {
			tail := d[jr*k : jr*k+nr]
			copy(tail, src[jr:])
			clear(tail[n-jr:])
		}
	}
}

// gemmPacked is gemm through the micro-kernel, for operands in any layout.
//
// With then, a task's block spans whole rows of C (nc covers n) and the
// task runs then on its rows once they are complete.
func (e *Engine) gemmPacked(c, res []float32, a, b operand, bias, asum []float32, m, n, k, ldc int, accumulate bool, then Rows) {
	mk := &e.mk
	e.reservePacks()
	var bpk []float32
	if b.rs != 1 {
		panels := ceilDiv(n, mk.nr)
		if need := panels * mk.nr * k; len(e.bpack) < need {
			e.bpack = Alloc(need)
		}
		bpk = e.bpack[:panels*mk.nr*k]
		e.pb = packBJob{dst: bpk, b: b, n: n, k: k, nr: mk.nr}
		e.run(e.pb.tasks(), &e.pb)
		e.pb = packBJob{}
	}
	e.runPacked(c, res, a, b, bpk, k*mk.nr, bias, asum, m, n, k, ldc, accumulate, then)
}

// runPacked runs the micro-kernel's tasks of a product whose B is bpk
// (panels bps floats apart) when bpk is not nil, else b read in place.
func (e *Engine) runPacked(c, res []float32, a, b operand, bpk []float32, bps int, bias, asum []float32, m, n, k, ldc int, accumulate bool, then Rows) {
	j := &e.pj
	*j = packedJob{e: e, c: c, res: res, bias: bias, asum: asum, a: a, b: b, bpk: bpk, bps: bps, m: m, n: n, k: k, ldc: ldc,
		acc: accumulate, then: then}
	e.runJob(j, transposedA(a))
}

// runJob cuts job j's C into blocks and runs them, one task each: wide
// blocks for a product whose A is transposed (wide) where they make
// enough tasks, else mcTarget × ncTarget, cut smaller until there are
// minTasks.
func (e *Engine) runJob(j *packedJob, wide bool) {
	mk := &e.mk
	m, n, then := j.m, j.n, j.then
	mc, nc := mk.mc, mk.nc
	if then != nil {
		nc = ceilDiv(n, mk.nr) * mk.nr
	}
	tiles := func() int { return ceilDiv(m, mc) * ceilDiv(n, nc) }
	if wide && then == nil {
		wm, wn := mk.wideRows(), max(mk.nr, wideTarget/mk.nr*mk.nr)
		if ceilDiv(m, wm)*ceilDiv(n, wn) >= minTasks {
			mc, nc = wm, wn
		}
	}
	for tiles() < minTasks && mc > mk.mr {
		mc = max(mk.mr, mc/2/mk.mr*mk.mr)
	}
	for tiles() < minTasks && nc > mk.nr && then == nil {
		nc = max(mk.nr, nc/2/mk.nr*mk.nr)
	}
	j.mc, j.nc, j.tilesN = mc, nc, ceilDiv(n, nc)
	e.run(tiles(), j)
	*j = packedJob{}
}

// accumulateTN is AccumulateTN on the micro-kernel: one task per block of
// C, which adds the terms' parts in turn while the block is in cache.
func (e *Engine) accumulateTN(c []float32, m, n int, terms []TNTerm) {
	e.reservePacks()
	j := &e.pj
	*j = packedJob{e: e, c: c, m: m, n: n, ldc: n, acc: true, terms: terms}
	e.runJob(j, true)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// transposedA reports whether A is a transposed operand, its rows' p one
// row stride apart: the output gradient of a weight-gradient product.
func transposedA(a operand) bool { return a.rs == 1 && a.cs > 1 }

// wideRows is the rows of a wide block (wideTarget rounded down to MR).
func (mk *micro) wideRows() int { return max(mk.mr, wideTarget/mk.mr*mk.mr) }

// Run computes one mc×nc block of C.
func (g *packedJob) Run(worker, task int) {
	i0 := task / g.tilesN * g.mc
	j0 := task % g.tilesN * g.nc
	i1 := min(i0+g.mc, g.m)
	j1 := min(j0+g.nc, g.n)
	if g.terms != nil {
		// A sum of products (AccumulateTN): each term's part of the
		// block in turn, over the block's rows before the term's M.
		for _, t := range g.terms {
			if t.M > i0 && t.K > 0 {
				g.block(worker, i0, min(i1, t.M), j0, j1, operand{t.A, 1, t.LDA}, operand{t.B, 1, t.LDB}, t.K)
			}
		}
		return
	}
	if g.res != nil {
		c, ldc := g.c, g.ldc
		for i := i0; i < i1; i++ {
			copy(c[i*ldc+j0:i*ldc+j1], g.res[i*ldc+j0:i*ldc+j1])
		}
	}
	g.block(worker, i0, i1, j0, j1, g.a, g.b, g.k)
	if g.then != nil {
		g.then.Rows(i0, i1)
	}
	// A's row sums, unless block's tiles formed them (A's columns contiguous).
	if g.asum != nil && j0 == 0 && g.a.rs != 1 {
		for i := i0; i < i1; i++ {
			var s float32
			for p := 0; p < g.k; p++ {
				s += g.a.at(i, p)
			}
			g.asum[i] += s
		}
	}
}

// block adds A·Bᵀ over the inner dimension k to rows i0 ≤ i < i1 and
// columns j0 ≤ j < j1 of C (overwriting them first, unless the job
// accumulates or starts from res), with the job's bias and row sums.
func (g *packedJob) block(worker, i0, i1, j0, j1 int, a, b operand, k int) {
	mk := &g.e.mk
	mr, nr := mk.mr, mk.nr
	c, ldc := g.c, g.ldc
	buf := g.e.packs[worker]
	aEdge := buf[:mr*kcBlock]
	bEdge := buf[mr*kcBlock : (mr+nr)*kcBlock]
	iFull := i0 + (i1-i0)/mr*mr // rows [iFull, i1) make a partial tile
	// A's row sums (the bias gradient) come with the tiles of the first
	// column panel when A's columns are contiguous, else from Run's loop.
	kernelSum := g.asum != nil && j0 == 0 && a.rs == 1
	// A transposed A (a backward product's output gradient, ai = 1) puts
	// each p of a tile on a cache line of its own, its row stride apart
	// and so in few cache sets: the first column panel's tiles read it in
	// place and copy it on the way into packed panels of MR rows, which
	// the other panels read.
	copyA := transposedA(a) && j1-j0 > nr
	aPanels := buf[(mr+nr)*kcBlock:]
	for kb := 0; kb < k; kb += kcBlock {
		kl := min(kcBlock, k-kb)
		// The first k-block stores the tile (or adds it to C's old value or
		// the residual) with the bias; the later ones add their part.
		first := kb == 0
		overwrite := first && !g.acc && g.res == nil
		if iFull < i1 {
			pack(aEdge, a, iFull, i1, kb, kl, mr)
		}
		for jr := j0; jr < j1; jr += nr {
			nv := min(nr, j1-jr)
			var bias []float32
			if first && g.bias != nil {
				bias = g.bias[jr : jr+nv]
			}
			var bs []float32
			var bp int
			// copyB: B read in place by more than one tile is copied by the
			// first into the worker's panel, which the others read.
			copyB := false
			switch {
			case g.bpk != nil:
				bs, bp = g.bpk[jr/nr*g.bps+kb*nr:][:kl*nr], nr
			case nv == nr:
				bs, bp = b.data[jr+kb*b.cs:], b.cs // b.rs == 1: row p of the panel is contiguous
				copyB = i1-i0 > mr && iFull > i0
			default:
				pack(bEdge, b, jr, jr+nv, kb, kl, nr)
				bs, bp = bEdge[:kl*nr], nr
			}
			sums := kernelSum && jr == j0
			if iFull > i0 {
				// The full tiles in one call: A read in place (each tile
				// copying its block when asked), or from the first column
				// panel's copies, kl·mr floats apart; the first tile copies
				// B when asked, and the others read the copy.
				var as, apack, bpack []float32
				at, ai, ap, aStep := a.data[i0*a.rs+kb*a.cs:], a.rs, a.cs, mr*a.rs
				if sums {
					as = g.asum[i0:iFull]
				}
				if copyA {
					if jr == j0 {
						apack = aPanels[:(iFull-i0)*kl]
					} else {
						at, ai, ap, aStep = aPanels[:(iFull-i0)*kl], 1, mr, mr*kl
					}
				}
				if copyB {
					bpack = bEdge[:kl*nr]
				}
				mk.tile(kl, at, ai, ap, aStep, bs, bp, c[i0*ldc+jr:], ldc, iFull-i0, nv, bias, as, apack, bpack, overwrite)
				if copyB {
					bs, bp = bpack, nr
				}
			}
			if iFull < i1 {
				var as []float32
				if sums {
					as = g.asum[iFull:i1]
				}
				mk.tile(kl, aEdge[:kl*mr], 1, mr, mr*kl, bs, bp, c[iFull*ldc+jr:], ldc, i1-iFull, nv, bias, as, nil, nil, overwrite)
			}
		}
	}
}

// pack writes rows r0 ≤ r < r1 of o, inner indices kb ≤ p < kb+kl, into
// panels of w rows: dst[panel·kl·w + (p−kb)·w + (r−r0)%w], rows past r1
// zero.
func pack(dst []float32, o operand, r0, r1, kb, kl, w int) {
	for pr := r0; pr < r1; pr += w {
		pan := dst[(pr-r0)/w*kl*w:][:kl*w]
		rows := min(w, r1-pr)
		switch {
		case o.rs == 1:
			// Rows are contiguous for a fixed p: copy w floats per p.
			for p := 0; p < kl; p++ {
				src := o.data[pr+(kb+p)*o.cs:][:rows]
				d := pan[p*w : p*w+w]
				copy(d, src)
				clear(d[rows:])
			}
		case o.cs == 1:
			// p is contiguous within a row: scatter each row into the panel.
			r := 0
			for ; r+4 <= rows; r += 4 {
				s0 := o.data[(pr+r)*o.rs+kb:][:kl]
				s1 := o.data[(pr+r+1)*o.rs+kb:][:kl]
				s2 := o.data[(pr+r+2)*o.rs+kb:][:kl]
				s3 := o.data[(pr+r+3)*o.rs+kb:][:kl]
				for p := range s0 {
					d := pan[p*w+r : p*w+r+4 : p*w+r+4]
					d[0], d[1], d[2], d[3] = s0[p], s1[p], s2[p], s3[p]
				}
			}
			for ; r < rows; r++ {
				src := o.data[(pr+r)*o.rs+kb:][:kl]
				for p, v := range src {
					pan[p*w+r] = v
				}
			}
			if rows < w {
				for p := 0; p < kl; p++ {
					clear(pan[p*w+rows : p*w+w])
				}
			}
		default:
			for p := 0; p < kl; p++ {
				for r := 0; r < w; r++ {
					v := float32(0)
					if r < rows {
						v = o.at(pr+r, kb+p)
					}
					pan[p*w+r] = v
				}
			}
		}
	}
}
