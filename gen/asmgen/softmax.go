package asmgen

import (
	"math"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The softmax-value kernels (kernels.SoftmaxValueFunc and
// kernels.SoftmaxValueBackFunc) at the AVX-512 and AVX2 levels.
//
// Forward, per block of R rows from the bottom up (R and the column chunk cv
// from blocking; the t mod R shortest rows at the top go one at a time):
// the softmax of the block's rows, a group of rows interleaved so their
// reductions overlap, in three passes (max; exp, sum and store; scale by
// 1/sum), then Y for the R rows at once with R × cv vector accumulators per
// chunk of cv column vectors: per j, the cv vectors of v_j are loaded once
// and each a_ij is broadcast once. The j ≤ i0 part of the block is a loop;
// the triangle's corner (j = i0+1 … i0+R−1, where only the lower rows take
// part) is unrolled.
//
// Backward, phase 1: dv = aᵀ·dy in blocks of R rows of dv (the corner
// unrolled at the start, then a loop over i down the rest of the columns);
// it reads every row of a. Phase 2, for blocks of ri rows (pairBlock): the
// gradient rows g_ij = dy_i·v_j go to a stack buffer in blocks of ri × rj
// pairs, W dot products over the c axis in W accumulators that a shuffle
// tree (reduceW) sums into one vector; then per row s_i = Σ_j a_ij g_ij and
// db_ij = a_ij (g_ij − s_i). Rows left over (and every row when t < 16) go
// one at a time with W columns per block. Row i of a is read for the last
// time right before db's row i is written, so db may alias a.
//
// From N = 1024 on (softmax_long.go), the forward reads V from a stack
// copy of stride DH and asks for the next block's rows of b during each
// block's softmax, and the backward has no phase 1: it computes dv in
// phase 2, from each block's rows of a before they turn into db (dvRows),
// into a stack copy of stride DH, takes svLongRows rows per block, and
// computes their gradient rows from a transposed copy of V (gPanels,
// softmax_panels.go). The backward is in softmax_back.go. The softmax
// alone and its backward (softmax_rows.go) reuse softmaxRows and dbRow.
//
// For a bidirectional spec (Config.Bidirectional) every row has the t
// entries j < t: the forward's rows share one length (each has one masked
// tail vector) and its products take j < t for every row of a block, with
// no corner; the backward's dv sums run over every row i < t and its
// gradient rows, s_i and db over j < t (at long rows, dvRows and gPanels
// likewise).
//
// Row tails use lane masks (K registers, or VMASKMOVPS with a mask table on
// AVX2); so does the last vector of a head when DH is not a multiple of the
// width, so no entry with j > i and no column ≥ DH is ever read or written.

// svKit is the toolbox of the softmax-value emitters: the vector toolbox
// (simd) and the head geometry, with the state of the long-row variants.
type svKit struct {
	*simd

	dh, nv, part int          // head width, its vectors, lanes of the last one (0: full)
	kdh          reg.Register // AVX-512: the mask of the last head vector

	// dvCopy is, when set, the stack copy of dv's head rows (stride DH)
	// that the backward accumulates into at long rows.
	dvCopy *operand.Mem
	// vCopy is, when set, the stack copy of V's head rows (stride DH) that
	// the forward's products read at long rows.
	vCopy *operand.Mem
	// rowOrg is, when set, the Int parameter holding the row of the block
	// that the row slices start at (a strip kind's i0): rowPtr addresses
	// row i at i − rowOrg. Row lengths and masks still take the absolute
	// row.
	rowOrg string
	// pfAhead is, when positive, how many rows above its own the forward's
	// softmax asks for b's line at the same column while it computes each
	// vector's exponentials: at long rows, the next block's rows of b, from
	// memory, during this block's softmax and products.
	pfAhead int
}

// newSVKit prepares emission of function fn at level isa (AVX2 or AVX512)
// for f's sizes.
func newSVKit(f *File, fn string, isa kernels.ISA) *svKit {
	s := &svKit{simd: newSIMD(f, fn, isa)}
	s.movupsMasks = true
	s.dh = f.Config.DH
	s.nv = (s.dh + s.W - 1) / s.W
	s.part = s.dh % s.W
	return s
}

// bcastFMA emits acc[k] += x·vv[k] for every k, x the float at m broadcast:
// the step of the register-blocked products.
func (s *svKit) bcastFMA(m operand.Mem, vv, acc []reg.VecVirtual) {
	b := s.vec()
	s.c.VBROADCASTSS(m, b)
	for k := range vv {
		s.c.VFMADD231PS(vv[k], b, acc[k])
	}
}

// initDH prepares the last head vector's mask: on AVX-512 one K register
// for the whole function (call first); AVX2 loads it where it is used.
func (s *svKit) initDH() {
	if s.isa == kernels.AVX512 && s.part != 0 {
		s.kdh = s.lanes(s.part)
	}
}

func (s *svKit) dhMask() reg.Register {
	if s.isa == kernels.AVX512 {
		return s.kdh
	}
	return s.lanes(s.part)
}

// partial reports whether column vector cv of a head is its masked last one.
func (s *svKit) partial(cv int) bool { return s.part != 0 && cv == s.nv-1 }

// blocking picks the rows R and column vectors cv per chunk of the
// register-blocked products: R·cv accumulators, cv row vectors, a broadcast
// register and (AVX2) a mask must fit the register file; among those the
// choice minimises loads per FMA, 1/R + chunks/nv.
func (s *svKit) blocking() (rows, cvecs int) {
	reserve := 1
	if s.isa == kernels.AVX2 {
		reserve = 2
	}
	best := math.Inf(1)
	for cv := 1; cv <= s.nv && cv <= 8; cv++ {
		r := (s.regs - reserve - cv) / cv
		if r > 8 {
			r = 8
		}
		if r < 1 {
			continue
		}
		chunks := (s.nv + cv - 1) / cv
		cost := 1/float64(r) + float64(chunks)/float64(s.nv)
		if cost < best-1e-9 {
			best, rows, cvecs = cost, r, cv
		}
	}
	return rows, cvecs
}

// chunks splits the head's nv column vectors into runs of at most cv.
func (s *svKit) chunks(cv int) [][2]int {
	var out [][2]int
	for c0 := 0; c0 < s.nv; c0 += cv {
		w := cv
		if c0+w > s.nv {
			w = s.nv - c0
		}
		out = append(out, [2]int{c0, w})
	}
	return out
}

// rowPtr returns base(name) + row·stride floats, or, with a row origin
// (rowOrg), base(name) + (row − origin)·stride: row ≥ origin, so never a
// pointer before the slice's start.
func (s *svKit) rowPtr(name string, row reg.GPVirtual, stride int) reg.GPVirtual {
	p, off := s.param(name), s.c.GP64()
	if s.rowOrg != "" {
		s.c.MOVQ(row, off)
		s.c.SUBQ(s.addr(s.c.Param(s.rowOrg), s.rowOrg), off)
		s.c.IMUL3Q(imm(4*stride), off, off)
	} else {
		s.c.IMUL3Q(imm(4*stride), row, off)
	}
	s.c.ADDQ(off, p)
	return p
}

// loadCols loads column vectors [c0, c0+n) of the head row at mem into dst.
func (s *svKit) loadCols(mem operand.Mem, c0 int, dst []reg.VecVirtual, dm reg.Register) {
	for k, r := range dst {
		m := mem.Offset(4 * s.W * (c0 + k))
		if s.partial(c0 + k) {
			s.loadM(m, dm, r)
		} else {
			s.c.VMOVUPS(m, r)
		}
	}
}

// storeCols stores src as column vectors [c0, c0+n) of the head row at mem.
func (s *svKit) storeCols(src []reg.VecVirtual, mem operand.Mem, c0 int) {
	for k, r := range src {
		m := mem.Offset(4 * s.W * (c0 + k))
		if s.partial(c0 + k) {
			s.storeM(r, s.dhMask(), m)
		} else {
			s.c.VMOVUPS(r, m)
		}
	}
}

// chunkMask returns the head mask if columns [c0, c0+n) include the partial
// vector (loaded once for the chunk on AVX2).
func (s *svKit) chunkMask(c0, n int) reg.Register {
	if s.partial(c0 + n - 1) {
		return s.dhMask()
	}
	return nil
}

// group is the number of rows whose softmax passes run interleaved: their
// maxima, sums and exps are independent, which hides the latency of each
// row's reductions. Pass 2 holds 2·group vectors plus exp's temporaries.
func (s *svKit) group() int {
	if s.isa == kernels.AVX512 {
		return 8
	}
	return 4
}

// tailMasks returns the masks of a row's last two vectors and the lane
// count of the second: the row has rem = base+r (0 ≤ rem < 2W) entries
// from the common whole-vector part on, so the first vector takes
// min(rem, W) lanes, the second the rest.
func (s *svKit) tailMasks(base reg.GPVirtual, r int) (reg.Register, reg.Register, reg.GPVirtual) {
	c := s.c
	n1, n2, sg := c.GP64(), c.GP64(), c.GP64()
	c.LEAQ(operand.Mem{Base: base, Disp: r}, n1)
	c.LEAQ(operand.Mem{Base: base, Disp: r - s.W}, n2)
	c.MOVQ(n2, sg)
	c.SARQ(operand.U8(63), sg)
	c.NOTQ(sg)
	c.ANDQ(sg, n2) // max(rem−W, 0)
	c.SUBQ(n2, n1) // min(rem, W)
	return s.dynLanes(n1), s.dynLanes(n2), n2
}

// softmaxRows emits the softmax of rows i0+g0 … i0+g0+n−1 (row i has i+1
// entries; rows addressed from the row origin, if any) from b to a: for
// all n rows at once, m = max_j b_ij (at least −MaxFloat32, so an all −Inf
// row gives exp(−Inf) = 0, not NaN), then e = exp(b − m) to a with sum Σ e,
// then a = e / max(sum, MinNormal) (sum ≥ 1 unless the row is all −Inf).
// The whole vectors all rows share are a loop; each row's remaining 0 …
// W+n−2 entries take two masked vectors.
func (s *svKit) softmaxRows(i0 reg.GPVirtual, g0, n int) {
	c, W, N := s.c, s.W, s.f.Config.N
	bp := s.rowPtr("b", i0, N)
	ap := s.rowPtr("a", i0, N)
	full, base := c.GP64(), c.GP64()
	bidi := s.f.Config.Bidirectional
	if bidi {
		c.Load(c.Param("t"), full) // every row's length
	} else {
		c.LEAQ(operand.Mem{Base: i0, Disp: g0 + 1}, full) // shortest row's length
	}
	c.MOVQ(full, base)
	c.ANDQ(imm(^(W - 1)), full)
	c.SUBQ(full, base) // entries of the shortest row past full
	at := func(p, j reg.Register, r, vec int) operand.Mem {
		return operand.Mem{Base: p, Index: j, Scale: 4, Disp: 4*N*(g0+r) + 4*W*vec}
	}
	// pass emits the loop over the shared whole vectors, then each row's
	// two masked tail vectors.
	pass := func(name string, body func(j reg.GPVirtual, r int), tail func(j reg.GPVirtual, r, vec int, m reg.Register)) {
		j := c.GP64()
		loop, done := s.lbl(name), s.lbl(name+"_tail")
		c.XORQ(j, j)
		c.Label(loop)
		c.CMPQ(j, full)
		c.JAE(operand.LabelRef(done))
		for r := 0; r < n; r++ {
			body(j, r)
		}
		c.ADDQ(imm(W), j)
		c.JMP(operand.LabelRef(loop))
		c.Label(done)
		for r := 0; r < n; r++ {
			if bidi { // every row: base < W entries past full
				tail(j, r, 0, s.dynLanes(base))
				continue
			}
			m1, m2, n2 := s.tailMasks(base, r)
			tail(j, r, 0, m1)
			if r > 0 { // the second vector is empty unless rem = base+r ≥ W
				skip := s.lbl(name + "_one")
				c.CMPQ(n2, imm(0))
				c.JE(operand.LabelRef(skip))
				tail(j, r, 1, m2)
				c.Label(skip)
			}
		}
	}

	// Pass 1: maxima.
	mx := make([]reg.VecVirtual, n)
	for r := range mx {
		mx[r] = s.constVec("sv_ninf", float32(math.Inf(-1)))
	}
	pass("sv_max", func(j reg.GPVirtual, r int) {
		c.VMAXPS(at(bp, j, r, 0), mx[r], mx[r])
	}, func(j reg.GPVirtual, r, vec int, m reg.Register) {
		x := s.vec()
		s.loadM(at(bp, j, r, vec), m, x)
		if s.isa == kernels.AVX512 {
			c.VMAXPS(x, mx[r], m, mx[r])
		} else {
			ninf := s.constVec("sv_ninf", float32(math.Inf(-1)))
			c.VBLENDVPS(m, x, ninf, x)
			c.VMAXPS(x, mx[r], mx[r])
		}
	})
	for r := range mx {
		s.allReduce(mx[r], func(a, b, dst operand.Op) { c.VMAXPS(a, b, dst) })
		lo := s.constVec("sv_nmax", -math.MaxFloat32)
		c.VMAXPS(mx[r], lo, mx[r])
	}

	// Pass 2: e = exp(b − m) to a, and the sums.
	sum := s.vecs(n)
	for _, x := range sum {
		s.zero(x)
	}
	pass("sv_exp", func(j reg.GPVirtual, r int) {
		x := s.vec()
		c.VMOVUPS(at(bp, j, r, 0), x)
		c.VSUBPS(mx[r], x, x)
		e := s.exp(x)
		c.VADDPS(e, sum[r], sum[r])
		c.VMOVUPS(e, at(ap, j, r, 0))
		if s.pfAhead > 0 {
			c.PREFETCHT0(at(bp, j, r, 0).Offset(-4 * N * s.pfAhead))
		}
	}, func(j reg.GPVirtual, r, vec int, m reg.Register) {
		x := s.vec()
		s.loadM(at(bp, j, r, vec), m, x)
		c.VSUBPS(mx[r], x, x)
		e := s.exp(x)
		if s.isa == kernels.AVX512 {
			c.VADDPS(e, sum[r], m, sum[r])
		} else {
			c.VANDPS(m, e, e)
			c.VADDPS(e, sum[r], sum[r])
		}
		s.storeM(e, m, at(ap, j, r, vec))
	})
	inv := make([]reg.VecVirtual, n)
	for r := range sum {
		s.allReduce(sum[r], func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
		tiny := s.constVec("sv_fltmin", 0x1p-126)
		c.VMAXPS(sum[r], tiny, sum[r])
		inv[r] = s.constVec("sv_one", 1)
		c.VDIVPS(sum[r], inv[r], inv[r])
	}

	// Pass 3: a *= 1/sum.
	pass("sv_scale", func(j reg.GPVirtual, r int) {
		x := s.vec()
		c.VMULPS(at(ap, j, r, 0), inv[r], x)
		c.VMOVUPS(x, at(ap, j, r, 0))
	}, func(j reg.GPVirtual, r, vec int, m reg.Register) {
		x := s.vec()
		s.loadM(at(ap, j, r, vec), m, x)
		c.VMULPS(x, inv[r], x)
		s.storeM(x, m, at(ap, j, r, vec))
	})
}

// emitSoftmaxValue writes the body of the forward kernel
// func(t int, b, a, v, y []float32).
func emitSoftmaxValue(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSVKit(f, Name(op, isa), isa)
	c := s.c
	s.initDH()
	R, _ := s.blocking()
	if f.Config.N >= svLongN {
		s.copyV()
		s.pfAhead = R
	}

	i0 := c.GP64()
	c.Load(c.Param("t"), i0)
	done := s.lbl("sv_done")
	singles := s.lbl("sv_singles")
	if R > 1 {
		// Blocks of R rows from the bottom up; the t mod R top rows remain.
		loop := s.lbl("sv_blocks")
		c.SUBQ(imm(R), i0)
		c.Label(loop)
		c.CMPQ(i0, imm(0))
		c.JL(operand.LabelRef(singles))
		s.fwdBlock(R, i0)
		c.SUBQ(imm(R), i0)
		c.JMP(operand.LabelRef(loop))
		c.Label(singles)
		c.ADDQ(imm(R), i0)
	} else {
		c.Label(singles)
	}
	// Rows 0 … i0−1 one at a time.
	i := c.GP64()
	loop := s.lbl("sv_single")
	c.XORQ(i, i)
	c.Label(loop)
	c.CMPQ(i, i0)
	c.JGE(operand.LabelRef(done))
	s.fwdBlock(1, i)
	c.INCQ(i)
	c.JMP(operand.LabelRef(loop))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}

// fwdBlock emits softmax and Y for rows i0 … i0+rb−1.
func (s *svKit) fwdBlock(rb int, i0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()

	// Softmax of the rows, a group at a time.
	for g0 := 0; g0 < rb; g0 += s.group() {
		s.softmaxRows(i0, g0, min(s.group(), rb-g0))
	}

	// y rows i0 … i0+rb−1 = Σ_j a_ij v_j, per chunk of columns.
	for _, ch := range s.chunks(cv) {
		c0, cw := ch[0], ch[1]
		acc := make([][]reg.VecVirtual, rb)
		for r := range acc {
			acc[r] = s.vecs(cw)
			for _, x := range acc[r] {
				s.zero(x)
			}
		}
		ap := s.rowPtr("a", i0, N)
		vp, vs := s.headRowPtr("v", s.vCopy), s.headStride(s.vCopy)
		dm := s.chunkMask(c0, cw)
		j := c.GP64()
		c.XORQ(j, j)
		vv := s.vecs(cw)
		step := func(vmem operand.Mem, first, adisp int) {
			s.loadCols(vmem, c0, vv, dm)
			for r := first; r < rb; r++ {
				s.bcastFMA(operand.Mem{Base: ap, Index: j, Scale: 4, Disp: 4*N*r + adisp}, vv, acc[r])
			}
		}
		loop := s.lbl("sv_prod")
		if s.f.Config.Bidirectional {
			// Every key j < t for every row of the block; no corner.
			t := c.GP64()
			c.Load(c.Param("t"), t)
			c.Label(loop)
			step(operand.Mem{Base: vp}, 0, 0)
			c.ADDQ(imm(4*vs), vp)
			c.INCQ(j)
			c.CMPQ(j, t)
			c.JL(operand.LabelRef(loop))
		} else {
			c.Label(loop)
			step(operand.Mem{Base: vp}, 0, 0)
			c.ADDQ(imm(4*vs), vp)
			c.INCQ(j)
			c.CMPQ(j, i0)
			c.JLE(operand.LabelRef(loop))
			// Corner: j = i0+jj takes rows jj … rb−1.
			for jj := 1; jj < rb; jj++ {
				step(operand.Mem{Base: vp, Disp: 4 * vs * (jj - 1)}, jj, 4*(jj-1))
			}
		}
		yp := s.rowPtr("y", i0, D)
		for r := 0; r < rb; r++ {
			s.storeCols(acc[r], operand.Mem{Base: yp, Disp: 4 * D * r}, c0)
		}
	}
}
