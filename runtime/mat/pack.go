package mat

import (
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The packed path: when the engine has a GEMM micro-kernel (SetGemm), every
// product is cut into blocks of C, one task each, and each task walks the
// inner dimension kcBlock at a time: it packs its mc×kc block of A into
// panels of MR rows and its nc×kc block of B into panels of NR columns
// (zero-padded, in the worker's own buffers) and runs the micro-kernel over
// every MR×NR tile of its block, B panel outermost so a panel stays in L1.
//
// An element of C is the sum of its kc-blocks' partial sums, added in
// increasing order, each partial sum formed over p in increasing order by
// the micro-kernel: its value depends on kcBlock only, not on mc, nc, the
// task count or which worker ran it, so results are bit-identical for any
// number of workers.

const (
	kcBlock  = 256 // inner-dimension block: a B panel of NR·kcBlock floats stays in L1
	mcTarget = 128 // rows of a C block, rounded down to MR (the packed A block fits L2)
	ncTarget = 256 // columns of a C block, rounded down to NR
	minTasks = 4   // cut blocks smaller until there are this many, for the workers
)

// micro is the engine's GEMM micro-kernel and its tile shape.
type micro struct {
	tile   kernels.GemmTileFunc
	mr, nr int
	mc, nc int // full block sizes
}

// SetGemm gives the engine a GEMM micro-kernel and its tile shape function
// (kernels.GemmTileFunc, kernels.GemmShapeFunc, from the same level); the
// products then run on packed panels through it. Either nil returns the
// engine to the plain-Go products. It reserves the packing buffers for the
// engine's current pool, so calls afterwards do not allocate.
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

// reservePacks makes sure every worker has packing buffers for full blocks.
func (e *Engine) reservePacks() {
	if e.mk.tile == nil {
		return
	}
	workers := 1
	if e.pool != nil {
		workers = e.pool.Size()
	}
	per := (e.mk.mc + e.mk.nc) * kcBlock
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
// with the micro-kernel; C has row stride ldc.
type packedJob struct {
	e              *Engine
	c, bias, asum  []float32
	a, b           operand
	m, n, k, ldc   int
	mc, nc, tilesN int
	acc            bool
}

// gemmPacked is gemm through the micro-kernel, for operands in any layout.
func (e *Engine) gemmPacked(c []float32, a, b operand, bias, asum []float32, m, n, k, ldc int, accumulate bool) {
	mk := &e.mk
	e.reservePacks()
	mc, nc := mk.mc, mk.nc
	tiles := func() int { return ceilDiv(m, mc) * ceilDiv(n, nc) }
	for tiles() < minTasks && mc > mk.mr {
		mc = max(mk.mr, mc/2/mk.mr*mk.mr)
	}
	for tiles() < minTasks && nc > mk.nr {
		nc = max(mk.nr, nc/2/mk.nr*mk.nr)
	}
	j := &e.pj
	*j = packedJob{e: e, c: c, bias: bias, asum: asum, a: a, b: b, m: m, n: n, k: k, ldc: ldc,
		mc: mc, nc: nc, tilesN: ceilDiv(n, nc), acc: accumulate}
	e.run(tiles(), j)
	*j = packedJob{}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// Run computes one mc×nc block of C.
func (g *packedJob) Run(worker, task int) {
	mk := &g.e.mk
	mr, nr := mk.mr, mk.nr
	i0 := task / g.tilesN * g.mc
	j0 := task % g.tilesN * g.nc
	i1 := min(i0+g.mc, g.m)
	j1 := min(j0+g.nc, g.n)
	c, ldc := g.c, g.ldc
	if !g.acc {
		for i := i0; i < i1; i++ {
			clear(c[i*ldc+j0 : i*ldc+j1])
		}
	}
	if g.bias != nil {
		bb := g.bias[j0:j1]
		for i := i0; i < i1; i++ {
			row := c[i*ldc+j0 : i*ldc+j1]
			for q, v := range bb {
				row[q] += v
			}
		}
	}
	buf := g.e.packs[worker]
	panelsM := ceilDiv(i1-i0, mr)
	for kb := 0; kb < g.k; kb += kcBlock {
		kl := min(kcBlock, g.k-kb)
		ap := buf[:panelsM*mr*kl]
		bp := buf[panelsM*mr*kl:]
		pack(ap, g.a, i0, i1, kb, kl, mr)
		pack(bp, g.b, j0, j1, kb, kl, nr)
		for jr := j0; jr < j1; jr += nr {
			bpan := bp[(jr-j0)/nr*kl*nr:][:kl*nr]
			nv := min(nr, j1-jr)
			for ir := i0; ir < i1; ir += mr {
				apan := ap[(ir-i0)/mr*kl*mr:][:kl*mr]
				mv := min(mr, i1-ir)
				mk.tile(kl, apan, bpan, c[ir*ldc+jr:], ldc, mv, nv)
			}
		}
	}
	if g.asum != nil && j0 == 0 {
		for i := i0; i < i1; i++ {
			var s float32
			for p := 0; p < g.k; p++ {
				s += g.a.at(i, p)
			}
			g.asum[i] += s
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
