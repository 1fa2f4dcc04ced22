package mat

import (
	"github.com/synthgen/synthgen/runtime/bf16"
)

// The bf16 path (SetBF16): the linear layers' products — Linear and its
// forms, LinearBackX and LinearBackW, and the shared forms of shared.go —
// with bf16 operands (rounded to nearest even) and float32 accumulation
// and output, through a runtime/bf16 micro-kernel. A job packs all its
// operands whole, in parallel, in one run on the pool (B into panels of
// bf16.NR columns, A into blocks of the kernel's MR rows, the inner
// dimension padded with zeros to bf16.Step; an operand several products
// read is packed once, and an inner dimension may be concatenated from
// several operands, each padded), then computes its products: C is cut
// into blocks of bfBlockM × bfBlockN (smaller when that makes fewer than
// minTasks), one task each, walking the inner dimension bfBlockK at a
// time. An element's sum depends only on bfBlockK, so results are
// bit-identical for any number of workers. Bias, residual, row sums (the
// bias gradient) and the Rows callback stay float32, as on the float32
// paths. MulNT, MulPanels and AccumulateTN (attention's and aft_full's
// products) stay float32.

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

// SetBF16 runs the linear layers' products through bf16 kernel k (nil:
// back to float32).
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

// A bf16 job packs its operands (phase 0), each once however many of its
// products read it, then computes its products' blocks of C (phase 1),
// all in two runs on the pool.

// bfSeg is one segment of a packed operand's inner dimension: the
// operand's inner indices p < kk land at off+p of the packed layout (off a
// multiple of bf16.Step; the segment is padded with zeros to Pad(kk)).
type bfSeg struct {
	o       operand
	kk, off int
}

// bfSide is one packed operand: A, in blocks of MR rows, or B, in panels of
// bf16.NR columns, over an inner dimension of kp (padded) made of the
// segments segs[s0:s1] of the job.
type bfSide struct {
	b      bool // B (panels), else A (blocks)
	rows   int  // A's m, B's n
	kp     int
	s0, s1 int
	dst    []uint16
	sums   []float32 // A's row sums, formed while packing (PackATRows)
	tasks  int
}

// bfProd is one product of a job: C[m×n] (row stride ldc) = (or +=, when
// acc; or res +) A·Bᵀ + bias over packed blocks ap and panels bp of inner
// dimension kp. asum, when set, gets A's row sums in the C phase (from a
// over kk; when they were not formed while packing).
type bfProd struct {
	c, res, bias, asum  []float32
	a                   operand
	kk                  int
	m, n, ldc, kp       int
	sa, sb              int      // its sides
	ap, bp              []uint16 // their packed blocks and panels
	acc                 bool
	then                Rows // run on each block's rows, which span C's width
	mc, nc, tilesN, cnt int  // C's blocks: mc × nc, tilesN across, cnt in all
}

// bfJob is a bf16 job: its packed operands and its products.
type bfJob struct {
	k     *bf16.Kernel
	phase int
	segs  []bfSeg
	sides []bfSide
	prods []bfProd
	tmp   [][]uint16
	kp    int // the inner dimension of the segments since the last side
}

// packRowsBF is the inner indices one PackAT or PackBT task packs.
const packRowsBF = 64

// packRowsAT is the rows of a transposed A one PackATRows task packs, over
// the whole inner dimension (so each row's sum is one task's).
const packRowsAT = 64

// transposed reports whether an operand's rows run along the inner
// dimension (rs 1): it is packed from its rows p (PackAT, PackBT).
func (o operand) transposed() bool { return o.rs == 1 && o.cs > 1 }

// begin starts a job on kernel k.
func (j *bfJob) begin(k *bf16.Kernel) {
	j.k, j.phase, j.kp = k, 0, 0
	j.segs, j.sides, j.prods = j.segs[:0], j.sides[:0], j.prods[:0]
}

// seg adds operand o, of inner length kk > 0, as the next segment of the
// side being built.
func (j *bfJob) seg(o operand, kk int) {
	j.segs = append(j.segs, bfSeg{o: o, kk: kk, off: j.kp})
	j.kp += bf16.Pad(kk)
}

// side closes the side built from the segments added since the last one:
// A (b false) or B of rows rows; sums (A with one transposed segment
// only) gets A's row sums while packing when the CPU can (else the
// product's C phase forms them: prod's asum). It returns the side's index.
func (j *bfJob) side(b bool, rows int) int {
	s0 := 0
	if n := len(j.sides); n > 0 {
		s0 = j.sides[n-1].s1
	}
	j.sides = append(j.sides, bfSide{b: b, rows: rows, kp: j.kp, s0: s0, s1: len(j.segs)})
	j.kp = 0
	return len(j.sides) - 1
}

// prod adds the product C = A·Bᵀ of sides a and b (their kp equal), with
// C[m×n] at c (row stride ldc), res, bias and acc as in bfProd; asum (A's
// row sums, A one transposed segment) is formed while packing A when the
// CPU can, else in the C phase.
func (j *bfJob) prod(a, b int, c, res, bias, asum []float32, ldc int, acc bool) {
	sa, sb := &j.sides[a], &j.sides[b]
	if sa.b || !sb.b || sa.kp != sb.kp {
		panic("mat: bf16 product of mismatched operands")
	}
	p := bfProd{c: c, res: res, bias: bias, m: sa.rows, n: sb.rows, ldc: ldc, kp: sa.kp, acc: acc, sa: a, sb: b}
	if asum != nil {
		sg := j.segs[sa.s0]
		if sa.s1-sa.s0 != 1 {
			panic("mat: bf16 row sums of a segmented A")
		}
		if sg.o.transposed() && bf16.PackATSums() {
			sa.sums = asum
		} else {
			p.asum, p.a, p.kk = asum, sg.o, sg.kk
		}
	}
	j.prods = append(j.prods, p)
}

// bfRun packs the job's sides and computes its products.
func (e *Engine) bfRun() {
	j := &e.bf.job
	kn := j.k
	// The sides' places in the buffers and their packing tasks.
	var na, nb, tmpRows int
	for i := range j.sides {
		sd := &j.sides[i]
		tmpRows = max(tmpRows, sd.rows)
		if sd.b {
			panels := ceilDiv(sd.rows, bf16.NR)
			nb += panels * bf16.BPanel(sd.kp)
			sd.tasks = 0
			for _, sg := range j.segs[sd.s0:sd.s1] {
				if sg.o.transposed() {
					sd.tasks += ceilDiv(bf16.Pad(sg.kk), packRowsBF)
				} else {
					sd.tasks += panels
				}
			}
			continue
		}
		blocks := ceilDiv(sd.rows, kn.MR)
		na += blocks * kn.ABlock(sd.kp)
		sd.tasks = blocks
		if sg := j.segs[sd.s0]; sg.o.transposed() {
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
		if sd.b {
			n := ceilDiv(sd.rows, bf16.NR) * bf16.BPanel(sd.kp)
			sd.dst = e.bf.bp[nb : nb+n]
			nb += n
		} else {
			n := ceilDiv(sd.rows, kn.MR) * kn.ABlock(sd.kp)
			sd.dst = e.bf.ap[na : na+n]
			na += n
		}
		tasks += sd.tasks
	}
	for i := range j.prods {
		p := &j.prods[i]
		p.ap, p.bp = j.sides[p.sa].dst, j.sides[p.sb].dst
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
	for i := range j.prods {
		p := &j.prods[i]
		p.tilesN = ceilDiv(p.n, p.nc)
		p.cnt = ceilDiv(p.m, p.mc) * p.tilesN
		tasks += p.cnt
	}
	j.phase = 1
	e.run(tasks, j)
	clear(j.segs)
	clear(j.sides)
	clear(j.prods)
	j.segs, j.sides, j.prods, j.tmp = j.segs[:0], j.sides[:0], j.prods[:0], nil
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
		pl := bf16.BPanel(sd.kp)
		panels := ceilDiv(sd.rows, bf16.NR)
		for _, sg := range j.segs[sd.s0:sd.s1] {
			kp := bf16.Pad(sg.kk)
			if sg.o.transposed() {
				if n := ceilDiv(kp, packRowsBF); t >= n {
					t -= n
					continue
				}
				p0 := t * packRowsBF
				bf16.PackBTSeg(sd.dst[sg.off*bf16.NR:], pl, sg.o.data, sg.o.cs, sd.rows, sg.kk, kp, p0, min(p0+packRowsBF, kp), j.tmp[worker])
				return
			}
			if t >= panels {
				t -= panels
				continue
			}
			bf16.PackB(sd.dst[t*pl+sg.off*bf16.NR:], sg.o.data, sg.o.rs, sg.o.cs, t*bf16.NR, sd.rows, sg.kk, kp)
			return
		}
		return
	}
	if sg := j.segs[sd.s0]; sg.o.transposed() {
		if bf16.PackATSums() {
			r0 := t * packRowsAT
			rowsPad := ceilDiv(sd.rows, kn.MR) * kn.MR
			kn.PackATRows(sd.dst, sg.o.data, sg.o.cs, sd.rows, sg.kk, sd.kp, 0, sd.kp, r0, min(r0+packRowsAT, rowsPad), j.tmp[worker], sd.sums)
			return
		}
		p0 := t * packRowsBF
		kn.PackAT(sd.dst, sg.o.data, sg.o.cs, sd.rows, sg.kk, sd.kp, p0, min(p0+packRowsBF, sd.kp), j.tmp[worker])
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

// block computes block task of product p's C.
func (j *bfJob) block(p *bfProd, task int) {
	kn := j.k
	mr := kn.MR
	i0 := task / p.tilesN * p.mc
	j0 := task % p.tilesN * p.nc
	i1 := min(i0+p.mc, p.m)
	j1 := min(j0+p.nc, p.n)
	c, ldc := p.c, p.ldc
	if p.res != nil {
		for i := i0; i < i1; i++ {
			copy(c[i*ldc+j0:i*ldc+j1], p.res[i*ldc+j0:i*ldc+j1])
		}
	}
	ab, bb := kn.ABlock(p.kp), bf16.BPanel(p.kp)
	// An overwritten C starts from the bias in the kernel; one that is
	// added to (or starts from res) gets the bias added after.
	biasIn := p.bias != nil && !p.acc && p.res == nil
	for kb := 0; kb < p.kp; kb += bfBlockK {
		kl := min(bfBlockK, p.kp-kb)
		load := p.acc || p.res != nil || kb > 0
		for jr := j0; jr < j1; jr += bf16.NR {
			bpan := p.bp[jr/bf16.NR*bb:][:bb]
			nr := min(bf16.NR, j1-jr)
			var bias []float32
			if biasIn {
				bias = p.bias[jr : jr+nr]
			}
			// All the block's rows down the panel in one call.
			kn.Tile(p.kp, kb, kl, p.ap[i0/mr*ab:][:ceilDiv(i1-i0, mr)*ab], bpan, c[i0*ldc+jr:], ldc, i1-i0, nr, load, bias)
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
