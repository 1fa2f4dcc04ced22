package mat

import (
	"github.com/synthgen/synthgen/runtime/bf16"
)

// The bf16 path (SetBF16): the linear layers' products — Linear and its
// forms, LinearBackX and LinearBackW — with bf16 operands (rounded to
// nearest even) and float32 accumulation and output, through a
// runtime/bf16 micro-kernel. Both operands are packed whole, in parallel,
// before the products (B into panels of bf16.NR columns, A into blocks of
// the kernel's MR rows, the inner dimension padded with zeros to
// bf16.Step), then C is cut into blocks of bfBlockM × bfBlockN (smaller
// when that makes fewer than minTasks), one task each, walking the inner
// dimension bfBlockK at a time. An element's sum
// depends only on bfBlockK, so results are bit-identical for any number
// of workers. Bias, residual, row sums (the bias gradient) and the Rows
// callback stay float32, as on the float32 paths. MulNT, MulPanels and
// AccumulateTN (attention's and aft_full's products) stay float32.

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

// bfJob packs the operands (phase 0: B's panels then A's blocks) or
// computes the blocks of C (phase 1).
type bfJob struct {
	k                  *bf16.Kernel
	phase              int
	c, res, bias, asum []float32
	a, b               operand
	m, n, kk, kp, ldc  int
	ap, bp             []uint16
	panels, blocks     int  // B panels, A blocks
	bTasks, aTasks     int  // packing tasks of B, then A
	bT, aT             bool // B, A packed from rows p (PackBT: a task per packRowsBF p; PackATRows)
	aSums              bool // A's row sums formed while packing it (PackATRows, a task per packRowsAT rows)
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
		if task < j.bTasks {
			if j.bT {
				p0 := task * packRowsBF
				bf16.PackBT(j.bp, j.b.data, j.b.cs, j.n, j.kk, j.kp, p0, min(p0+packRowsBF, j.kp), j.tmp[worker])
				return
			}
			bf16.PackB(j.bp[task*bf16.BPanel(j.kp):], j.b.data, j.b.rs, j.b.cs, task*bf16.NR, j.n, j.kk, j.kp)
			return
		}
		t := task - j.bTasks
		if j.aSums {
			r0 := t * packRowsAT
			rowsPad := j.blocks * j.k.MR
			r1 := min(r0+packRowsAT, rowsPad)
			j.k.PackATRows(j.ap, j.a.data, j.a.cs, j.m, j.kk, j.kp, 0, j.kp, r0, r1, j.tmp[worker], j.asum)
			return
		}
		if j.aT {
			p0 := t * packRowsBF
			j.k.PackAT(j.ap, j.a.data, j.a.cs, j.m, j.kk, j.kp, p0, min(p0+packRowsBF, j.kp), j.tmp[worker])
			return
		}
		j.k.PackA(j.ap[t*j.k.ABlock(j.kp):], j.a.data, j.a.rs, j.a.cs, t*j.k.MR, j.m, j.kk, j.kp)
		return
	}
	mr := j.k.MR
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
	ab, bb := j.k.ABlock(j.kp), bf16.BPanel(j.kp)
	// An overwritten C starts from the bias in the kernel; one that is
	// added to (or starts from res) gets the bias added after.
	biasIn := j.bias != nil && !j.acc && j.res == nil
	for kb := 0; kb < j.kp; kb += bfBlockK {
		kl := min(bfBlockK, j.kp-kb)
		load := j.acc || j.res != nil || kb > 0
		for jr := j0; jr < j1; jr += bf16.NR {
			bpan := j.bp[jr/bf16.NR*bb:][:bb]
			nr := min(bf16.NR, j1-jr)
			var bias []float32
			if biasIn {
				bias = j.bias[jr : jr+nr]
			}
			// All the block's rows down the panel in one call.
			j.k.Tile(j.kp, kb, kl, j.ap[i0/mr*ab:][:ceilDiv(i1-i0, mr)*ab], bpan, c[i0*ldc+jr:], ldc, i1-i0, nr, load, bias)
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
	if j.asum != nil && j0 == 0 && !j.aSums {
		// A's row sums in float32 (the bias gradient, from the unrounded
		// operand): with A's rows strided (rs 1, a transposed output
		// gradient) p runs outermost over contiguous runs of rows.
		var sums [bfBlockM]float32 // mc ≤ bfBlockM
		s := sums[:i1-i0]
		if j.a.rs == 1 {
			p, cs := 0, j.a.cs
			for ; p+4 <= j.kk; p += 4 { // four rows a pass: s is read and written a quarter as often
				r0 := j.a.data[i0+p*cs:][:len(s)]
				r1 := j.a.data[i0+(p+1)*cs:][:len(s)]
				r2 := j.a.data[i0+(p+2)*cs:][:len(s)]
				r3 := j.a.data[i0+(p+3)*cs:][:len(s)]
				for x := range s {
					s[x] += (r0[x] + r1[x]) + (r2[x] + r3[x])
				}
			}
			for ; p < j.kk; p++ {
				row := j.a.data[i0+p*cs:][:len(s)]
				for x, v := range row {
					s[x] += v
				}
			}
		} else {
			for x := range s {
				for p := 0; p < j.kk; p++ {
					s[x] += j.a.at(i0+x, p)
				}
			}
		}
		for x, v := range s {
			j.asum[i0+x] += v
		}
	}
}

// gemmBF16 is gemmPacked on the bf16 kernel: C[m×n] (row stride ldc) =
// (or +=, when accumulate; or res +) A·Bᵀ + bias, asum[i] += Σ_p A(i, p),
// then then on every row.
func (e *Engine) gemmBF16(c, res []float32, a, b operand, bias, asum []float32, m, n, k, ldc int, accumulate bool, then Rows) {
	kn := e.bf.k
	kp := bf16.Pad(k)
	panels, blocks := ceilDiv(n, bf16.NR), ceilDiv(m, kn.MR)
	if need := panels * bf16.BPanel(kp); len(e.bf.bp) < need {
		e.bf.bp = make([]uint16, need)
	}
	if need := blocks * kn.ABlock(kp); len(e.bf.ap) < need {
		e.bf.ap = make([]uint16, need)
	}
	workers := 1
	if e.pool != nil {
		workers = e.pool.Size()
	}
	if need := bf16.PairsLen(max(m, n)); len(e.bf.tmp) < workers || len(e.bf.tmp[0]) < need {
		e.bf.tmp = make([][]uint16, workers)
		for w := range e.bf.tmp {
			e.bf.tmp[w] = make([]uint16, need)
		}
	}
	j := &e.bf.job
	*j = bfJob{k: kn, c: c, res: res, bias: bias, asum: asum, a: a, b: b, m: m, n: n, kk: k, kp: kp, ldc: ldc,
		ap: e.bf.ap, bp: e.bf.bp, panels: panels, blocks: blocks, acc: accumulate,
		bT: b.rs == 1 && b.cs > 1, aT: a.rs == 1 && a.cs > 1, tmp: e.bf.tmp, bTasks: panels, aTasks: blocks}
	if j.bT {
		j.bTasks = ceilDiv(kp, packRowsBF)
	}
	if j.aT {
		j.aTasks = ceilDiv(kp, packRowsBF)
		if bf16.PackATSums() {
			j.aSums = true
			j.aTasks = ceilDiv(blocks*kn.MR, packRowsAT)
		}
	}
	e.run(j.bTasks+j.aTasks, j)
	// Blocks of bfBlockM × bfBlockN, cut smaller (to multiples of the
	// tile) until there are minTasks for the workers.
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
	if then != nil {
		e.thenRows(then, m)
	}
}
