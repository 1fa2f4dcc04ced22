package mat

import (
	"github.com/synthgen/synthgen/runtime/bf16"
)

// The bf16 path (SetBF16): the linear layers' products — Linear and its
// forms, LinearBackX and LinearBackW, and the shared forms of shared.go —
// and the products on packed panels and their sums (MulPanels,
// AccumulateTN: aft_full's), with bf16 operands (rounded to nearest even)
// and float32 accumulation and output, through a runtime/bf16
// micro-kernel. MulNT stays float32.
//
// A bf16 job is a list of packed operands and a list of products. An
// operand is A, packed into blocks of the kernel's MR rows, or B, packed
// into panels of bf16.NR columns, over an inner dimension padded with
// zeros to bf16.Step. It is packed once however many products read it
// (the shared forms' x); its inner dimension may be joined from several
// segments, each padded (LinearBackXSum's terms); and a B may come packed
// already (a Panels': PackB packs it in bf16 with a bf16 kernel, once for
// every MulPanels on it). A product is C (+)= the sum of one or more terms
// A·Bᵀ, each over C's first rows (several: AccumulateTN's). The job packs
// all its operands whole, in parallel, in one run on the pool, then
// computes its products in a second: each product's C is cut into blocks
// of bfBlockM × bfBlockN (smaller when that makes fewer than minTasks;
// whole rows when a Rows callback follows), one task each, which takes
// the product's terms in order, walking each one's inner dimension
// bfBlockK at a time. An element's sum depends only on the terms, their
// order and bfBlockK, so results are bit-identical for any number of
// workers. Bias, residual, row sums (the bias gradient) and the Rows
// callback stay float32, as on the float32 paths.

const (
	bfBlockK = 512 // inner-dimension block of one kernel call
	bfBlockM = 128 // rows of a C block (a multiple of every MR)
	bfBlockN = 128 // columns of a C block (a multiple of bf16.NR)
)

// bfState is the engine's bf16 kernel, its packed operands' buffers and
// the job that packs and multiplies them.
type bfState struct {
	k      *bf16.Kernel
	ap, bp []uint16
	tmp    [][]uint16 // per worker: the pairs of PackAT and PackBT
	job    bfJob
}

// SetBF16 runs the linear layers' products, MulPanels and AccumulateTN
// through bf16 kernel k (nil: back to float32).
func (e *Engine) SetBF16(k *bf16.Kernel) { e.bf.k = k }

// BF16Kernel returns the engine's bf16 kernel (nil without one).
func (e *Engine) BF16Kernel() *bf16.Kernel { return e.bf.k }

// BF16 returns the level of the engine's bf16 kernel (bf16.None without
// one).
func (e *Engine) BF16() bf16.Level {
	if e.bf.k == nil {
		return bf16.None
	}
	return e.bf.k.Level
}

func (e *Engine) bfOK(m, n, k int) bool { return e.bf.k != nil && m > 0 && n > 0 && k > 0 }

// bfSeg is one segment of a packed operand's inner dimension: the
// operand's inner indices p < kk land at off+p of the packed layout (off a
// multiple of bf16.Step; the segment is padded with zeros to Pad(kk)).
type bfSeg struct {
	o       operand
	kk, off int
}

// bfSide is one packed operand: A, in blocks of MR rows, or B, in panels of
// bf16.NR columns ps bf16 apart, over an inner dimension of kp (padded)
// made of the segments segs[s0:s1] of the job, or packed already (ready:
// a Panels', whose panels may be deeper than kp; the products read their
// first kp).
type bfSide struct {
	b      bool // B (panels), else A (blocks)
	rows   int  // A's m, B's n
	kp     int
	s0, s1 int
	dst    []uint16
	ps     int       // B: the panels' stride, BPanel of their depth
	own    bool      // dst is the side's own (a Panels'), not the engine's buffers
	ready  bool      // packed already: no packing tasks
	sums   []float32 // A's row sums, formed while packing (PackATRows)
	tasks  int
}

// bfTerm is one term of a product: A·Bᵀ of sides sa and sb (their kp
// equal) over C's first rows (sa's).
type bfTerm struct {
	sa, sb int
}

// bfProd is one product of a job: C[m×n] (row stride ldc) = (or +=, when
// acc; or res +) the sum of its terms terms[t0:t1], in order, + bias.
// asum, when set, gets A's row sums in the C phase (from a over kk; when
// they were not formed while packing; one term only).
type bfProd struct {
	c, res, bias, asum  []float32
	a                   operand
	kk                  int
	m, n, ldc           int
	t0, t1              int
	acc                 bool
	then                Rows // run on each block's rows, which span C's width
	mc, nc, tilesN, cnt int  // C's blocks: mc × nc, tilesN across, cnt in all
}

// bfJob is a bf16 job: its packed operands, its products and their terms.
// It packs its operands (phase 0), each once however many terms read it,
// then computes its products' blocks of C (phase 1), in two runs on the
// pool.
type bfJob struct {
	k     *bf16.Kernel
	phase int
	segs  []bfSeg
	sides []bfSide
	terms []bfTerm
	prods []bfProd
	tmp   [][]uint16
	kp    int // the inner dimension of the segments since the last side
	// rowMajor orders phase 1's tasks by row block across the products
	// (which then all have the same rows and row blocks), perRow tasks a
	// row block; otherwise product by product.
	rowMajor bool
	perRow   int
}

// packRowsBF is the inner indices one PackAT or PackBT task packs.
const packRowsBF = 64

// packRowsAT is the rows of a transposed A one PackATRows task packs, over
// the whole inner dimension (so each row's sum is one task's).
const packRowsAT = 64

// begin starts a job on kernel k.
func (j *bfJob) begin(k *bf16.Kernel) {
	j.k, j.phase, j.kp = k, 0, 0
	j.segs, j.sides, j.terms, j.prods = j.segs[:0], j.sides[:0], j.terms[:0], j.prods[:0]
}

// seg adds operand o, of inner length kk > 0, as the next segment of the
// side being built.
func (j *bfJob) seg(o operand, kk int) {
	j.segs = append(j.segs, bfSeg{o: o, kk: kk, off: j.kp})
	j.kp += bf16.Pad(kk)
}

// side closes the side built from the segments added since the last one:
// A (b false) or B of rows rows. It returns the side's index.
func (j *bfJob) side(b bool, rows int) int {
	s0 := 0
	if n := len(j.sides); n > 0 {
		s0 = j.sides[n-1].s1
	}
	j.sides = append(j.sides, bfSide{b: b, rows: rows, kp: j.kp, s0: s0, s1: len(j.segs)})
	j.kp = 0
	return len(j.sides) - 1
}

// panels adds B packed already: the first n columns and k inner indices
// of pn's bf16 panels (PackB with a bf16 kernel). It returns the side's
// index.
func (j *bfJob) panels(pn *Panels, n, k int) int {
	if j.kp != 0 {
		panic("mat: bf16 packed panels after unclosed segments")
	}
	s := len(j.segs)
	j.sides = append(j.sides, bfSide{b: true, rows: n, kp: bf16.Pad(k), s0: s, s1: s,
		dst: pn.half, ps: bf16.BPanel(pn.kp), own: true, ready: true})
	return len(j.sides) - 1
}

// into packs side s into dst (its own buffer, a Panels') rather than the
// engine's buffers.
func (j *bfJob) into(s int, dst []uint16) {
	j.sides[s].dst, j.sides[s].own = dst, true
}

// prod adds the product C = A·Bᵀ of sides a and b (their kp equal), with
// C[m×n] at c (row stride ldc), res, bias and acc as in bfProd; asum (A's
// row sums, A one segment) is formed while packing A when the CPU can
// (A transposed), else in the C phase. term adds further terms to it.
func (j *bfJob) prod(a, b int, c, res, bias, asum []float32, ldc int, acc bool) {
	sa := &j.sides[a]
	p := bfProd{c: c, res: res, bias: bias, m: sa.rows, n: j.sides[b].rows, ldc: ldc, acc: acc,
		t0: len(j.terms), t1: len(j.terms)}
	if asum != nil {
		if sa.s1-sa.s0 != 1 {
			panic("mat: bf16 row sums of a segmented A")
		}
		sg := j.segs[sa.s0]
		if transposedA(sg.o) && bf16.PackATSums() {
			sa.sums = asum
		} else {
			p.asum, p.a, p.kk = asum, sg.o, sg.kk
		}
	}
	j.prods = append(j.prods, p)
	j.term(a, b)
}

// term adds the term A·Bᵀ of sides a and b (their kp equal, B's rows the
// product's n) to the last product, over C's first rows (A's). A term
// after the first may cover rows past the first's only when the product
// adds to C (acc, no res, no bias, no row sums).
func (j *bfJob) term(a, b int) {
	p := &j.prods[len(j.prods)-1]
	sa, sb := &j.sides[a], &j.sides[b]
	if sa.b || !sb.b || sa.kp != sb.kp || sb.rows != p.n {
		panic("mat: bf16 product of mismatched operands")
	}
	if p.t1 > p.t0 {
		if p.asum != nil || j.sides[j.terms[p.t0].sa].sums != nil {
			panic("mat: bf16 row sums of a product of several terms")
		}
		if sa.rows > p.m {
			if !p.acc || p.res != nil || p.bias != nil {
				panic("mat: bf16 term past the rows its product starts")
			}
			p.m = sa.rows
		}
	}
	j.terms = append(j.terms, bfTerm{sa: a, sb: b})
	p.t1 = len(j.terms)
}

// bfRun packs the job's sides and computes its products.
func (e *Engine) bfRun() {
	j := &e.bf.job
	kn := j.k
	// The sides' places in the buffers and their packing tasks.
	var na, nb, tmpRows int
	for i := range j.sides {
		sd := &j.sides[i]
		sd.tasks = 0
		if sd.ready {
			continue
		}
		tmpRows = max(tmpRows, sd.rows)
		if sd.b {
			panels := ceilDiv(sd.rows, bf16.NR)
			sd.ps = bf16.BPanel(sd.kp)
			if !sd.own {
				nb += panels * sd.ps
			}
			for _, sg := range j.segs[sd.s0:sd.s1] {
				if transposedA(sg.o) {
					sd.tasks += ceilDiv(bf16.Pad(sg.kk), packRowsBF)
				} else {
					sd.tasks += panels
				}
			}
			continue
		}
		blocks := ceilDiv(sd.rows, kn.MR)
		if !sd.own {
			na += blocks * kn.ABlock(sd.kp)
		}
		sd.tasks = blocks
		if sg := j.segs[sd.s0]; transposedA(sg.o) {
			if sd.s1-sd.s0 != 1 {
				panic("mat: bf16 A of several segments, one transposed")
			}
			sd.tasks = ceilDiv(sd.kp, packRowsBF)
			if bf16.PackATSums() {
				sd.tasks = ceilDiv(blocks*kn.MR, packRowsAT)
			}
		}
	}
	if len(e.bf.ap) < na {
		e.bf.ap = make([]uint16, na)
	}
	if len(e.bf.bp) < nb {
		e.bf.bp = make([]uint16, nb)
	}
	workers := 1
	if e.pool != nil {
		workers = e.pool.Size()
	}
	if need := bf16.PairsLen(tmpRows); len(e.bf.tmp) < workers || len(e.bf.tmp[0]) < need {
		e.bf.tmp = make([][]uint16, workers)
		for w := range e.bf.tmp {
			e.bf.tmp[w] = make([]uint16, need)
		}
	}
	j.tmp = e.bf.tmp
	na, nb = 0, 0
	tasks := 0
	for i := range j.sides {
		sd := &j.sides[i]
		tasks += sd.tasks
		if sd.own {
			continue
		}
		if sd.b {
			n := ceilDiv(sd.rows, bf16.NR) * sd.ps
			sd.dst = e.bf.bp[nb : nb+n]
			nb += n
		} else {
			n := ceilDiv(sd.rows, kn.MR) * kn.ABlock(sd.kp)
			sd.dst = e.bf.ap[na : na+n]
			na += n
		}
	}
	e.run(tasks, j)
	// Blocks of C of bfBlockM × bfBlockN, cut smaller (to multiples of the
	// tile) until there are minTasks for the workers.
	total := func() int {
		t := 0
		for i := range j.prods {
			p := &j.prods[i]
			t += ceilDiv(p.m, p.mc) * ceilDiv(p.n, p.nc)
		}
		return t
	}
	for i := range j.prods {
		p := &j.prods[i]
		p.mc, p.nc = bfBlockM, bfBlockN
		if p.then != nil { // whole rows: then runs on them while in cache
			p.nc = ceilDiv(p.n, bf16.NR) * bf16.NR
		}
	}
	for total() < minTasks {
		cut := false
		for i := range j.prods {
			if p := &j.prods[i]; p.mc > kn.MR {
				p.mc, cut = max(kn.MR, p.mc/2/kn.MR*kn.MR), true
			}
		}
		if !cut {
			break
		}
	}
	for total() < minTasks {
		cut := false
		for i := range j.prods {
			if p := &j.prods[i]; p.nc > bf16.NR && p.then == nil {
				p.nc, cut = max(bf16.NR, p.nc/2/bf16.NR*bf16.NR), true
			}
		}
		if !cut {
			break
		}
	}
	tasks = 0
	j.rowMajor, j.perRow = len(j.prods) > 1, 0
	for i := range j.prods {
		p := &j.prods[i]
		p.tilesN = ceilDiv(p.n, p.nc)
		p.cnt = ceilDiv(p.m, p.mc) * p.tilesN
		tasks += p.cnt
		j.perRow += p.tilesN
		if p.m != j.prods[0].m || p.mc != j.prods[0].mc {
			j.rowMajor = false
		}
	}
	j.phase = 1
	e.run(tasks, j)
	// No operands kept.
	clear(j.segs)
	clear(j.sides)
	clear(j.prods)
	j.segs, j.sides, j.terms, j.prods, j.tmp = j.segs[:0], j.sides[:0], j.terms[:0], j.prods[:0], nil
}

func (j *bfJob) Run(worker, task int) {
	if j.phase == 0 {
		for i := range j.sides {
			sd := &j.sides[i]
			if task < sd.tasks {
				j.pack(sd, worker, task)
				return
			}
			task -= sd.tasks
		}
		return
	}
	if j.rowMajor {
		// Row block by row block, every product's blocks of it in turn:
		// products of one shared A (LinearShared's) then read each block of
		// A while it is in cache.
		rb, r := task/j.perRow, task%j.perRow
		for i := range j.prods {
			p := &j.prods[i]
			if r < p.tilesN {
				j.block(p, rb*p.tilesN+r)
				return
			}
			r -= p.tilesN
		}
		return
	}
	for i := range j.prods {
		p := &j.prods[i]
		if task < p.cnt {
			j.block(p, task)
			return
		}
		task -= p.cnt
	}
}

// pack runs packing task t of side sd.
func (j *bfJob) pack(sd *bfSide, worker, t int) {
	kn := j.k
	if sd.b {
		panels := ceilDiv(sd.rows, bf16.NR)
		for _, sg := range j.segs[sd.s0:sd.s1] {
			kp := bf16.Pad(sg.kk)
			if transposedA(sg.o) {
				if n := ceilDiv(kp, packRowsBF); t >= n {
					t -= n
					continue
				}
				p0 := t * packRowsBF
				bf16.PackBTSeg(sd.dst[sg.off*bf16.NR:], sd.ps, sg.o.data, sg.o.cs, sd.rows, sg.kk, kp, p0, min(p0+packRowsBF, kp), j.tmp[worker])
				return
			}
			if t >= panels {
				t -= panels
				continue
			}
			bf16.PackB(sd.dst[t*sd.ps+sg.off*bf16.NR:], sg.o.data, sg.o.rs, sg.o.cs, t*bf16.NR, sd.rows, sg.kk, kp)
			return
		}
		return
	}
	if sg := j.segs[sd.s0]; transposedA(sg.o) {
		rowsPad := ceilDiv(sd.rows, kn.MR) * kn.MR
		if bf16.PackATSums() {
			r0 := t * packRowsAT
			r1 := min(r0+packRowsAT, rowsPad)
			kn.PackATRows(sd.dst, sg.o.data, sg.o.cs, sd.rows, sg.kk, sd.kp, 0, sd.kp, r0, r1, j.tmp[worker], sd.sums)
			return
		}
		p0 := t * packRowsBF
		p1 := min(p0+packRowsBF, sd.kp)
		kn.PackATRows(sd.dst, sg.o.data, sg.o.cs, sd.rows, sg.kk, sd.kp, p0, p1, 0, rowsPad, j.tmp[worker], nil)
		return
	}
	// A block of MR rows, all segments.
	lda := bf16.LDA(sd.kp)
	blk := sd.dst[t*kn.ABlock(sd.kp):][:kn.ABlock(sd.kp)]
	for _, sg := range j.segs[sd.s0:sd.s1] {
		kn.PackASeg(blk, lda, sg.off, sg.o.data, sg.o.rs, sg.o.cs, t*kn.MR, sd.rows, sg.kk, bf16.Pad(sg.kk))
	}
	if lda > sd.kp {
		for r := 0; r < kn.MR; r++ { // the rows' padding
			clear(blk[r*lda+sd.kp : r*lda+lda])
		}
	}
}

// block computes block task of product p's C: its terms' parts in order.
func (j *bfJob) block(p *bfProd, task int) {
	kn := j.k
	mr := kn.MR
	i0 := task / p.tilesN * p.mc
	j0 := task % p.tilesN * p.nc
	i1 := min(i0+p.mc, p.m)
	j1 := min(j0+p.nc, p.n)
	c, ldc := p.c, p.ldc
	// The block's first calls (one per panel) start C from res, or
	// overwrite it from the bias; the later ones add to it. A C that is
	// added to (or starts from res) gets the bias added after.
	biasIn := p.bias != nil && !p.acc && p.res == nil
	started := p.acc && p.res == nil // C holds what the product adds to
	for ti := p.t0; ti < p.t1; ti++ {
		sa, sb := &j.sides[j.terms[ti].sa], &j.sides[j.terms[ti].sb]
		if sa.rows <= i0 {
			continue
		}
		ti1 := min(i1, sa.rows)
		kp := sa.kp
		ab, bb := kn.ABlock(kp), bf16.BPanel(kp)
		a := sa.dst[i0/mr*ab:][:ceilDiv(ti1-i0, mr)*ab]
		for kb := 0; kb < kp; kb += bfBlockK {
			kl := min(bfBlockK, kp-kb)
			for jr := j0; jr < j1; jr += bf16.NR {
				bpan := sb.dst[jr/bf16.NR*sb.ps:][:bb]
				nr := min(bf16.NR, j1-jr)
				var src, bias []float32
				switch {
				case started:
					src = c[i0*ldc+jr:]
				case p.res != nil:
					src = p.res[i0*ldc+jr:]
				case biasIn:
					bias = p.bias[jr : jr+nr]
				}
				// All the block's rows down the panel in one call.
				kn.Tile(kp, kb, kl, a, bpan, c[i0*ldc+jr:], ldc, ti1-i0, nr, src, bias)
			}
			started = true
		}
	}
	if !started && p.res != nil { // no term reached the block: C is res
		for i := i0; i < i1; i++ {
			copy(c[i*ldc+j0:i*ldc+j1], p.res[i*ldc+j0:i*ldc+j1])
		}
	}
	if p.bias != nil && !biasIn {
		for i := i0; i < i1; i++ {
			row := c[i*ldc+j0 : i*ldc+j1]
			bb := p.bias[j0:j1]
			for x := range row {
				row[x] += bb[x]
			}
		}
	}
	if p.asum != nil && j0 == 0 {
		// A's row sums in float32 (the bias gradient, from the unrounded
		// operand): with A's rows strided (rs 1, a transposed output
		// gradient) p runs outermost over contiguous runs of rows.
		var sums [bfBlockM]float32 // mc ≤ bfBlockM
		s := sums[:i1-i0]
		a := p.a
		if a.rs == 1 {
			q, cs := 0, a.cs
			for ; q+4 <= p.kk; q += 4 { // four rows a pass: s is read and written a quarter as often
				r0 := a.data[i0+q*cs:][:len(s)]
				r1 := a.data[i0+(q+1)*cs:][:len(s)]
				r2 := a.data[i0+(q+2)*cs:][:len(s)]
				r3 := a.data[i0+(q+3)*cs:][:len(s)]
				for x := range s {
					s[x] += (r0[x] + r1[x]) + (r2[x] + r3[x])
				}
			}
			for ; q < p.kk; q++ {
				row := a.data[i0+q*cs:][:len(s)]
				for x, v := range row {
					s[x] += v
				}
			}
		} else {
			for x := range s {
				for q := 0; q < p.kk; q++ {
					s[x] += a.at(i0+x, q)
				}
			}
		}
		for x, v := range s {
			p.asum[i0+x] += v
		}
	}
	if p.then != nil {
		p.then.Rows(i0, i1)
	}
}

// gemmBF16 is gemmPacked on the bf16 kernel: C[m×n] (row stride ldc) =
// (or +=, when accumulate; or res +) A·Bᵀ + bias, asum[i] += Σ_p A(i, p),
// then then on every row: each block of C spans whole rows, and its task
// runs then on them once they are complete, while they are in its caches.
func (e *Engine) gemmBF16(c, res []float32, a, b operand, bias, asum []float32, m, n, k, ldc int, accumulate bool, then Rows) {
	j := &e.bf.job
	j.begin(e.bf.k)
	j.seg(a, k)
	sa := j.side(false, m)
	j.seg(b, k)
	sb := j.side(true, n)
	j.prod(sa, sb, c, res, bias, asum, ldc, accumulate)
	j.prods[len(j.prods)-1].then = then
	e.bfRun()
}

// mulPanelsBF16 is MulPanels on the bf16 kernel, pn packed in bf16: A
// packed, B read from pn's panels.
func (e *Engine) mulPanelsBF16(c, a []float32, pn *Panels, m, n, k int, accumulate bool) {
	j := &e.bf.job
	j.begin(e.bf.k)
	j.seg(operand{a, k, 1}, k)
	sa := j.side(false, m)
	sb := j.panels(pn, n, k)
	j.prod(sa, sb, c, nil, nil, nil, n, accumulate)
	e.bfRun()
}

// accumulateTNBF16 is AccumulateTN on the bf16 kernel: one product of a
// term per TNTerm, every term's operands packed, then one task per block
// of C, which adds the terms' parts in turn.
func (e *Engine) accumulateTNBF16(c []float32, m, n int, terms []TNTerm) {
	j := &e.bf.job
	j.begin(e.bf.k)
	for _, t := range terms {
		if t.M == 0 || t.K == 0 {
			continue
		}
		j.seg(operand{t.A, 1, t.LDA}, t.K)
		sa := j.side(false, t.M)
		j.seg(operand{t.B, 1, t.LDB}, t.K)
		sb := j.side(true, n)
		if len(j.prods) == 0 {
			j.prod(sa, sb, c, nil, nil, nil, n, true)
		} else {
			j.term(sa, sb)
		}
	}
	if len(j.prods) == 0 {
		return
	}
	e.bfRun()
}

// packPanelsBF16 packs pn's operand (PackB) into bf16 panels, in parallel:
// a job of one side, packed into pn's own buffer, and no products.
func (e *Engine) packPanelsBF16(pn *Panels) {
	n, k := pn.n, pn.k
	kp := bf16.Pad(k)
	b := operand{pn.src, 1, n}
	if pn.transposed {
		b = operand{pn.src, k, 1}
	}
	if size := ceilDiv(n, bf16.NR) * bf16.BPanel(kp); len(pn.half) < size {
		pn.half = make([]uint16, size)
	}
	j := &e.bf.job
	j.begin(e.bf.k)
	j.seg(b, k)
	j.into(j.side(true, n), pn.half)
	e.bfRun()
	pn.kp = kp
}
