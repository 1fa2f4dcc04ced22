package mat

import (
	"github.com/synthgen/synthgen/runtime/bf16"
)

// The bf16 path (SetBF16): the linear layers' products — Linear and its
// forms, LinearBackX and LinearBackW — and the products on packed panels
// and their sums (MulPanels, AccumulateTN: aft_full's), with bf16
// operands (rounded to nearest even) and float32 accumulation and output,
// through a runtime/bf16 micro-kernel. MulNT (the attention and
// synthesizer products) stays float32.
//
// A job is one or more products A·Bᵀ into one C (several: AccumulateTN's
// terms, each over C's first rows). Their operands are packed whole, in
// parallel, before the products (B into panels of bf16.NR columns, A into
// blocks of the kernel's MR rows, the inner dimension padded with zeros to
// bf16.Step), B but once for many products when it comes packed already
// (Panels: PackB packs it in bf16 when the engine has a bf16 kernel). Then
// C is cut into blocks of bfBlockM × bfBlockN (smaller when that makes
// fewer than minTasks), one task each, which takes every product's part
// in turn, walking its inner dimension bfBlockK at a time. An element's
// sum depends only on the products, their order and bfBlockK, so results
// are bit-identical for any number of workers. Bias, residual, row sums
// (the bias gradient) and the Rows callback stay float32, as on the
// float32 paths.

const (
	bfBlockK = 512 // inner-dimension block of one kernel call
	bfBlockM = 128 // rows of a C block (a multiple of every MR)
	bfBlockN = 128 // columns of a C block (a multiple of bf16.NR)
)

// bfState is the engine's bf16 kernel and its packed operands' buffers.
type bfState struct {
	k      *bf16.Kernel
	ap, bp []uint16
	tmp    [][]uint16 // per worker: the pairs of PackAT and PackBT
	prods  []bfProd   // a job's products (reused)
	job    bfJob
}

// SetBF16 runs the linear layers' products, MulPanels and AccumulateTN
// through bf16 kernel k (nil: back to float32).
func (e *Engine) SetBF16(k *bf16.Kernel) { e.bf.k = k }

// BF16 returns the level of the engine's bf16 kernel (bf16.None without
// one).
func (e *Engine) BF16() bf16.Level {
	if e.bf.k == nil {
		return bf16.None
	}
	return e.bf.k.Level
}

func (e *Engine) bfOK(m, n, k int) bool { return e.bf.k != nil && m > 0 && n > 0 && k > 0 }

// bfProd is one product of a bf16 job: C's first m rows (+)= A·Bᵀ, A
// m × kk, B the job's n columns × kk, padded to depth kp. A's blocks are
// packed at ap[aOff:], B's panels at bp[bOff:], bps bf16 apart. A bps
// set before bfPlan means B comes packed (Panels, whose depth may exceed
// kp: the products read the first kp of it).
type bfProd struct {
	a, b            operand
	m, kk, kp       int
	aOff, bOff, bps int
	bTasks, aTasks  int  // packing tasks of B, then A
	bT, aT          bool // B, A packed from rows p (PackBT: a task per packRowsBF p; PackAT or PackATRows)
	aRows           bool // A packed by rows (PackATRows, a task per packRowsAT rows; with the job's row sums)
}

// bfJob packs the products' operands (phase 0: each product's B panels
// then its A blocks) or computes the blocks of C (phase 1).
type bfJob struct {
	k                  *bf16.Kernel
	phase              int
	c, res, bias, asum []float32 // res, bias, asum: a job of one product only
	prods              []bfProd
	m, n, ldc          int // C's rows and columns
	ap, bp             []uint16
	tmp                [][]uint16
	mc, nc, tilesN     int // C's blocks: mc × nc, tilesN across
	acc                bool
}

// packRowsBF is the inner indices one PackAT or PackBT task packs.
const packRowsBF = 64

// packRowsAT is the rows of a transposed A one PackATRows task packs, over
// the whole inner dimension (so each row's sum is one task's).
const packRowsAT = 64

func (j *bfJob) Run(worker, task int) {
	if j.phase == 0 {
		for i := range j.prods {
			p := &j.prods[i]
			if task < p.bTasks+p.aTasks {
				j.pack(p, worker, task)
				return
			}
			task -= p.bTasks + p.aTasks
		}
		return
	}
	i0 := task / j.tilesN * j.mc
	j0 := task % j.tilesN * j.nc
	i1 := min(i0+j.mc, j.m)
	j1 := min(j0+j.nc, j.n)
	c, ldc := j.c, j.ldc
	if j.res != nil {
		for i := i0; i < i1; i++ {
			copy(c[i*ldc+j0:i*ldc+j1], j.res[i*ldc+j0:i*ldc+j1])
		}
	}
	// An overwritten C starts from the bias in the kernel; one that is
	// added to (or starts from res) gets the bias added after.
	biasIn := j.bias != nil && !j.acc && j.res == nil
	for i := range j.prods {
		if p := &j.prods[i]; p.m > i0 {
			j.tiles(p, i0, min(i1, p.m), j0, j1, biasIn)
		}
	}
	if j.bias != nil && !biasIn {
		for i := i0; i < i1; i++ {
			row := c[i*ldc+j0 : i*ldc+j1]
			bb := j.bias[j0:j1]
			for x := range row {
				row[x] += bb[x]
			}
		}
	}
	if p := &j.prods[0]; j.asum != nil && j0 == 0 && !p.aRows {
		// A's row sums in float32 (the bias gradient, from the unrounded
		// operand): with A's rows strided (rs 1, a transposed output
		// gradient) p runs outermost over contiguous runs of rows.
		var sums [bfBlockM]float32 // mc ≤ bfBlockM
		s := sums[:i1-i0]
		if p.a.rs == 1 {
			q, cs := 0, p.a.cs
			for ; q+4 <= p.kk; q += 4 { // four rows a pass: s is read and written a quarter as often
				r0 := p.a.data[i0+q*cs:][:len(s)]
				r1 := p.a.data[i0+(q+1)*cs:][:len(s)]
				r2 := p.a.data[i0+(q+2)*cs:][:len(s)]
				r3 := p.a.data[i0+(q+3)*cs:][:len(s)]
				for x := range s {
					s[x] += (r0[x] + r1[x]) + (r2[x] + r3[x])
				}
			}
			for ; q < p.kk; q++ {
				row := p.a.data[i0+q*cs:][:len(s)]
				for x, v := range row {
					s[x] += v
				}
			}
		} else {
			for x := range s {
				for q := 0; q < p.kk; q++ {
					s[x] += p.a.at(i0+x, q)
				}
			}
		}
		for x, v := range s {
			j.asum[i0+x] += v
		}
	}
}

// pack runs packing task task of product p.
func (j *bfJob) pack(p *bfProd, worker, task int) {
	if task < p.bTasks {
		if p.bT {
			p0 := task * packRowsBF
			bf16.PackBT(j.bp[p.bOff:], p.b.data, p.b.cs, j.n, p.kk, p.kp, p0, min(p0+packRowsBF, p.kp), j.tmp[worker])
			return
		}
		bf16.PackB(j.bp[p.bOff+task*p.bps:], p.b.data, p.b.rs, p.b.cs, task*bf16.NR, j.n, p.kk, p.kp)
		return
	}
	t := task - p.bTasks
	ap := j.ap[p.aOff:]
	switch {
	case p.aRows:
		r0 := t * packRowsAT
		rowsPad := ceilDiv(p.m, j.k.MR) * j.k.MR
		j.k.PackATRows(ap, p.a.data, p.a.cs, p.m, p.kk, p.kp, 0, p.kp, r0, min(r0+packRowsAT, rowsPad), j.tmp[worker], j.asum)
	case p.aT:
		p0 := t * packRowsBF
		j.k.PackAT(ap, p.a.data, p.a.cs, p.m, p.kk, p.kp, p0, min(p0+packRowsBF, p.kp), j.tmp[worker])
	default:
		j.k.PackA(ap[t*j.k.ABlock(p.kp):], p.a.data, p.a.rs, p.a.cs, t*j.k.MR, p.m, p.kk, p.kp)
	}
}

// tiles adds product p's part to C's rows i0 ≤ i < i1 and columns j0 ≤ j
// < j1 (overwriting them first, with the bias when biasIn, unless the job
// accumulates or starts from res).
func (j *bfJob) tiles(p *bfProd, i0, i1, j0, j1 int, biasIn bool) {
	mr := j.k.MR
	c, ldc := j.c, j.ldc
	ab, bb := j.k.ABlock(p.kp), bf16.BPanel(p.kp)
	a := j.ap[p.aOff+i0/mr*ab:][:ceilDiv(i1-i0, mr)*ab]
	for kb := 0; kb < p.kp; kb += bfBlockK {
		kl := min(bfBlockK, p.kp-kb)
		load := j.acc || j.res != nil || kb > 0
		for jr := j0; jr < j1; jr += bf16.NR {
			bpan := j.bp[p.bOff+jr/bf16.NR*p.bps:][:bb]
			nr := min(bf16.NR, j1-jr)
			var bias []float32
			if biasIn {
				bias = j.bias[jr : jr+nr]
			}
			// All the block's rows down the panel in one call.
			j.k.Tile(p.kp, kb, kl, a, bpan, c[i0*ldc+jr:], ldc, i1-i0, nr, load, bias)
		}
	}
}

// bfPlan lays out products prods of a job with n columns (m rows) in the
// engine's buffers: their depths, packing tasks and offsets; B is packed
// for those whose bps is 0 (the others' B is packed already).
func (e *Engine) bfPlan(m, n int, prods []bfProd) {
	kn := e.bf.k
	aSize, bSize := 0, 0
	for i := range prods {
		p := &prods[i]
		p.kp = bf16.Pad(p.kk)
		blocks := ceilDiv(p.m, kn.MR)
		p.aOff = aSize
		aSize += blocks * kn.ABlock(p.kp)
		p.aT = transposedA(p.a)
		p.aTasks = blocks
		if p.aT {
			p.aTasks = ceilDiv(p.kp, packRowsBF)
			if bf16.PackATSums() {
				p.aRows = true
				p.aTasks = ceilDiv(blocks*kn.MR, packRowsAT)
			}
		}
		if p.bps == 0 {
			bSize += p.planB(n, bSize)
		}
	}
	if len(e.bf.bp) < bSize {
		e.bf.bp = make([]uint16, bSize)
	}
	if len(e.bf.ap) < aSize {
		e.bf.ap = make([]uint16, aSize)
	}
	e.bfReserveTmp(max(m, n))
}

// planB sets p's packing of B (n columns, depth p.kp) into panels at
// bp[off:] and returns their size.
func (p *bfProd) planB(n, off int) int {
	panels := ceilDiv(n, bf16.NR)
	p.bOff, p.bps = off, bf16.BPanel(p.kp)
	p.bT = p.b.rs == 1 && p.b.cs > 1
	p.bTasks = panels
	if p.bT {
		p.bTasks = ceilDiv(p.kp, packRowsBF)
	}
	return panels * p.bps
}

// bfReserveTmp makes sure every worker has the pairs scratch of PackAT
// and PackBT for rows or columns up to n.
func (e *Engine) bfReserveTmp(n int) {
	workers := 1
	if e.pool != nil {
		workers = e.pool.Size()
	}
	if need := bf16.PairsLen(n); len(e.bf.tmp) < workers || len(e.bf.tmp[0]) < need {
		e.bf.tmp = make([][]uint16, workers)
		for w := range e.bf.tmp {
			e.bf.tmp[w] = make([]uint16, need)
		}
	}
}

// runBF16 runs job j (its products planned by bfPlan): the packing, then
// C's blocks of bfBlockM × bfBlockN, cut smaller (to multiples of the
// tile) until there are minTasks for the workers; then then on every row.
func (e *Engine) runBF16(j *bfJob, then Rows) {
	kn := e.bf.k
	j.k, j.tmp = kn, e.bf.tmp
	if j.ap == nil {
		j.ap = e.bf.ap
	}
	if j.bp == nil {
		j.bp = e.bf.bp
	}
	packs := 0
	for _, p := range j.prods {
		packs += p.bTasks + p.aTasks
	}
	j.phase = 0
	e.run(packs, j)
	m, n := j.m, j.n
	mc, nc := bfBlockM, bfBlockN
	tiles := func() int { return ceilDiv(m, mc) * ceilDiv(n, nc) }
	for tiles() < minTasks && mc > kn.MR {
		mc = max(kn.MR, mc/2/kn.MR*kn.MR)
	}
	for tiles() < minTasks && nc > bf16.NR {
		nc = max(bf16.NR, nc/2/bf16.NR*bf16.NR)
	}
	j.phase, j.mc, j.nc, j.tilesN = 1, mc, nc, ceilDiv(n, nc)
	e.run(tiles(), j)
	*j = bfJob{}
	clear(e.bf.prods) // no operands kept
	if then != nil {
		e.thenRows(then, m)
	}
}

// gemmBF16 is gemmPacked on the bf16 kernel: C[m×n] (row stride ldc) =
// (or +=, when accumulate; or res +) A·Bᵀ + bias, asum[i] += Σ_p A(i, p),
// then then on every row.
func (e *Engine) gemmBF16(c, res []float32, a, b operand, bias, asum []float32, m, n, k, ldc int, accumulate bool, then Rows) {
	prods := append(e.bf.prods[:0], bfProd{a: a, b: b, m: m, kk: k})
	e.bf.prods = prods
	e.bfPlan(m, n, prods)
	j := &e.bf.job
	*j = bfJob{c: c, res: res, bias: bias, asum: asum, prods: prods, m: m, n: n, ldc: ldc, acc: accumulate}
	e.runBF16(j, then)
}

// mulPanelsBF16 is MulPanels on the bf16 kernel, pn packed in bf16.
func (e *Engine) mulPanelsBF16(c, a []float32, pn *Panels, m, n, k int, accumulate bool) {
	prods := append(e.bf.prods[:0], bfProd{a: operand{a, k, 1}, m: m, kk: k, bps: bf16.BPanel(pn.kp)})
	e.bf.prods = prods
	e.bfPlan(m, n, prods)
	j := &e.bf.job
	*j = bfJob{c: c, prods: prods, m: m, n: n, ldc: n, bp: pn.half, acc: accumulate}
	e.runBF16(j, nil)
}

// accumulateTNBF16 is AccumulateTN on the bf16 kernel: every term's
// operands packed, then one task per block of C, which adds the terms'
// parts in turn.
func (e *Engine) accumulateTNBF16(c []float32, m, n int, terms []TNTerm) {
	prods := e.bf.prods[:0]
	for _, t := range terms {
		if t.M > 0 && t.K > 0 {
			prods = append(prods, bfProd{a: operand{t.A, 1, t.LDA}, b: operand{t.B, 1, t.LDB}, m: t.M, kk: t.K})
		}
	}
	e.bf.prods = prods
	if len(prods) == 0 {
		return
	}
	e.bfPlan(m, n, prods)
	j := &e.bf.job
	*j = bfJob{c: c, prods: prods, m: m, n: n, ldc: n, acc: true}
	e.runBF16(j, nil)
}

// packPanelsBF16 packs pn's operand (PackB) into bf16 panels, in parallel.
func (e *Engine) packPanelsBF16(pn *Panels) {
	n, k := pn.n, pn.k
	kp := bf16.Pad(k)
	b := operand{pn.src, 1, n}
	if pn.transposed {
		b = operand{pn.src, k, 1}
	}
	// A job of one product with B only: no A to pack, no C.
	prods := append(e.bf.prods[:0], bfProd{b: b, kk: k, kp: kp})
	e.bf.prods = prods
	if size := prods[0].planB(n, 0); len(pn.half) < size {
		pn.half = make([]uint16, size)
	}
	e.bfReserveTmp(n)
	j := &e.bf.job
	*j = bfJob{k: e.bf.k, prods: prods, n: n, bp: pn.half, tmp: e.bf.tmp}
	e.run(prods[0].bTasks, j)
	*j = bfJob{}
	clear(e.bf.prods)
	pn.kp = kp
}
