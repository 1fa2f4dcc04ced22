package asmgen

import (
	"fmt"
	"math"

	"github.com/mmcloughlin/avo/build"
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
// softmax_panels.go). The backward is in softmax_back.go.
//
// Row tails use lane masks (K registers, or VMASKMOVPS with a mask table on
// AVX2); so does the last vector of a head when DH is not a multiple of the
// width, so no entry with j > i and no column ≥ DH is ever read or written.

// simd emits one level's vector code into a function of a File.
type simd struct {
	f    *File
	c    *build.Context
	isa  kernels.ISA
	W    int // float32 lanes per vector
	regs int // vector registers the level may use
	nlbl int

	dh, nv, part int          // head width, its vectors, lanes of the last one (0: full)
	kdh          reg.Register // AVX-512: the mask of the last head vector

	// dvCopy is, when set, the stack copy of dv's head rows (stride DH)
	// that the backward accumulates into at long rows.
	dvCopy *operand.Mem
	// vCopy is, when set, the stack copy of V's head rows (stride DH) that
	// the forward's products read at long rows.
	vCopy *operand.Mem
	// pfAhead is, when positive, how many rows above its own the forward's
	// softmax asks for b's line at the same column while it computes each
	// vector's exponentials: at long rows, the next block's rows of b, from
	// memory, during this block's softmax and products.
	pfAhead int
}

// newSIMD prepares emission at level isa (AVX2 or AVX512) for f's sizes.
func newSIMD(f *File, isa kernels.ISA) *simd {
	s := &simd{f: f, c: f.Ctx, isa: isa, W: 8, regs: 16}
	if isa == kernels.AVX512 {
		s.W, s.regs = 16, 32
	}
	s.dh = f.Config.DH
	s.nv = (s.dh + s.W - 1) / s.W
	s.part = s.dh % s.W
	return s
}

func (s *simd) vec() reg.VecVirtual {
	if s.isa == kernels.AVX512 {
		return s.c.ZMM()
	}
	return s.c.YMM()
}

func (s *simd) vecs(n int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, n)
	for i := range v {
		v[i] = s.vec()
	}
	return v
}

// label returns a label name unique within the function.
func (s *simd) label(name string) string {
	s.nlbl++
	return fmt.Sprintf("%s_%d", name, s.nlbl)
}

// splat returns a 32-byte RODATA vector of eight copies of v (AVX2 operands).
func (s *simd) splat(name string, v float32) operand.Mem {
	b := math.Float32bits(v)
	w := make([]uint32, 8)
	for i := range w {
		w[i] = b
	}
	return s.f.Table(fmt.Sprintf("%s_v8_%08x", name, b), w)
}

// bcast returns a new register holding v in every lane.
func (s *simd) bcast(name string, v float32) reg.VecVirtual {
	r := s.vec()
	if s.isa == kernels.AVX512 {
		s.c.VBROADCASTSS(s.f.ConstF32(name, v), r)
	} else {
		s.c.VMOVUPS(s.splat(name, v), r)
	}
	return r
}

// bcastFMA emits acc[k] += x·vv[k] for every k, x the float at m broadcast:
// the step of the register-blocked products.
func (s *simd) bcastFMA(m operand.Mem, vv, acc []reg.VecVirtual) {
	b := s.vec()
	s.c.VBROADCASTSS(m, b)
	for k := range vv {
		s.c.VFMADD231PS(vv[k], b, acc[k])
	}
}

// zero clears r. VXORPS (AVX512DQ on ZMM), not VPXORD: avo knows only the
// former as a zeroing idiom, and would otherwise take r as live before it.
func (s *simd) zero(r reg.VecVirtual) { s.c.VXORPS(r, r, r) }

// mask is a lane mask: a K register (AVX-512) or a vector of all-ones and
// all-zeros lanes (AVX2).
type mask struct{ r reg.Register }

// maskTable is 8 all-ones words then 8 zeros: the 8 words from index 8−n
// are the AVX2 mask of the first n lanes.
func (s *simd) maskTable() operand.Mem {
	w := make([]uint32, 16)
	for i := 0; i < 8; i++ {
		w[i] = 0xFFFFFFFF
	}
	return s.f.Table("sv_tailmask8", w)
}

// tailMask returns the mask of the first n lanes, n a register in [0, W].
func (s *simd) tailMask(n reg.GPVirtual) mask {
	c := s.c
	if s.isa == kernels.AVX512 {
		ones, k := c.GP32(), c.K()
		c.MOVL(operand.U32(0xFFFF), ones)
		c.BZHIL(n.As32(), ones, ones)
		c.KMOVW(ones, k)
		return mask{k}
	}
	base, neg, m := c.GP64(), c.GP64(), c.YMM()
	c.LEAQ(s.maskTable(), base)
	c.MOVQ(n, neg)
	c.NEGQ(neg)
	c.VMOVUPS(operand.Mem{Base: base, Index: neg, Scale: 4, Disp: 32}, m)
	return mask{m}
}

// constMask returns the mask of the first n lanes, 0 < n < W.
func (s *simd) constMask(n int) mask {
	c := s.c
	if s.isa == kernels.AVX512 {
		g, k := c.GP32(), c.K()
		c.MOVL(operand.U32(uint32(1)<<n-1), g)
		c.KMOVW(g, k)
		return mask{k}
	}
	m := c.YMM()
	c.VMOVUPS(s.maskTable().Offset(4*(8-n)), m)
	return mask{m}
}

// initDH prepares the last head vector's mask: on AVX-512 one K register
// for the whole function (call first); AVX2 loads it where it is used.
func (s *simd) initDH() {
	if s.isa == kernels.AVX512 && s.part != 0 {
		s.kdh = s.constMask(s.part).r
	}
}

func (s *simd) dhMask() mask {
	if s.isa == kernels.AVX512 {
		return mask{s.kdh}
	}
	return s.constMask(s.part)
}

// partial reports whether column vector cv of a head is its masked last one.
func (s *simd) partial(cv int) bool { return s.part != 0 && cv == s.nv-1 }

// loadZ loads the lanes of m from mem into dst, zeroing the others; lanes
// outside m are not accessed.
func (s *simd) loadZ(m mask, mem operand.Mem, dst reg.VecVirtual) {
	if s.isa == kernels.AVX512 {
		s.c.VMOVUPS_Z(mem, m.r, dst)
	} else {
		s.c.VMASKMOVPS(mem, m.r, dst)
	}
}

// storeM stores the lanes of m of src to mem; lanes outside m are not accessed.
func (s *simd) storeM(m mask, src reg.VecVirtual, mem operand.Mem) {
	if s.isa == kernels.AVX512 {
		s.c.VMOVUPS(src, m.r, mem)
	} else {
		s.c.VMASKMOVPS(src, m.r, mem)
	}
}

// allReduce leaves op over all lanes of x in every lane of x;
// op(a, b, dst) computes dst = op(b, a) with a register or memory a.
func (s *simd) allReduce(x reg.VecVirtual, op func(a, b, dst operand.Op)) {
	c := s.c
	t := s.vec()
	if s.isa == kernels.AVX512 {
		c.VSHUFF64X2(operand.U8(0x4E), x, x, t) // swap 256-bit halves
		op(t, x, x)
		c.VSHUFF64X2(operand.U8(0xB1), x, x, t) // swap 128-bit lanes in pairs
		op(t, x, x)
	} else {
		c.VPERM2F128(operand.U8(0x01), x, x, t)
		op(t, x, x)
	}
	c.VPERMILPS(operand.U8(0x4E), x, t)
	op(t, x, x)
	c.VPERMILPS(operand.U8(0xB1), x, t)
	op(t, x, x)
}

// blocking picks the rows R and column vectors cv per chunk of the
// register-blocked products: R·cv accumulators, cv row vectors, a broadcast
// register and (AVX2) a mask must fit the register file; among those the
// choice minimises loads per FMA, 1/R + chunks/nv.
func (s *simd) blocking() (rows, cvecs int) {
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
func (s *simd) chunks(cv int) [][2]int {
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

// param loads a slice argument's base pointer.
func (s *simd) param(name string) reg.GPVirtual {
	r := s.c.GP64()
	s.c.Load(s.c.Param(name).Base(), r)
	return r
}

// rowPtr returns base(name) + row·stride floats.
func (s *simd) rowPtr(name string, row reg.GPVirtual, stride int) reg.GPVirtual {
	p, off := s.param(name), s.c.GP64()
	s.c.IMUL3Q(imm(4*stride), row, off)
	s.c.ADDQ(off, p)
	return p
}

// loadCols loads column vectors [c0, c0+n) of the head row at mem into dst.
func (s *simd) loadCols(mem operand.Mem, c0 int, dst []reg.VecVirtual, dm mask) {
	for k, r := range dst {
		m := mem.Offset(4 * s.W * (c0 + k))
		if s.partial(c0 + k) {
			s.loadZ(dm, m, r)
		} else {
			s.c.VMOVUPS(m, r)
		}
	}
}

// storeCols stores src as column vectors [c0, c0+n) of the head row at mem.
func (s *simd) storeCols(src []reg.VecVirtual, mem operand.Mem, c0 int) {
	for k, r := range src {
		m := mem.Offset(4 * s.W * (c0 + k))
		if s.partial(c0 + k) {
			s.storeM(s.dhMask(), r, m)
		} else {
			s.c.VMOVUPS(r, m)
		}
	}
}

// chunkMask returns the head mask if columns [c0, c0+n) include the partial
// vector (loaded once for the chunk on AVX2).
func (s *simd) chunkMask(c0, n int) mask {
	if s.partial(c0 + n - 1) {
		return s.dhMask()
	}
	return mask{}
}

// group is the number of rows whose softmax passes run interleaved: their
// maxima, sums and exps are independent, which hides the latency of each
// row's reductions. Pass 2 holds 2·group vectors plus exp's temporaries.
func (s *simd) group() int {
	if s.isa == kernels.AVX512 {
		return 8
	}
	return 4
}

// tailMasks returns the masks of a row's last two vectors and the lane
// count of the second: the row has rem = base+r (0 ≤ rem < 2W) entries
// from the common whole-vector part on, so the first vector takes
// min(rem, W) lanes, the second the rest.
func (s *simd) tailMasks(base reg.GPVirtual, r int) (mask, mask, reg.GPVirtual) {
	c := s.c
	n1, n2, sg := c.GP64(), c.GP64(), c.GP64()
	c.LEAQ(operand.Mem{Base: base, Disp: r}, n1)
	c.LEAQ(operand.Mem{Base: base, Disp: r - s.W}, n2)
	c.MOVQ(n2, sg)
	c.SARQ(operand.U8(63), sg)
	c.NOTQ(sg)
	c.ANDQ(sg, n2) // max(rem−W, 0)
	c.SUBQ(n2, n1) // min(rem, W)
	return s.tailMask(n1), s.tailMask(n2), n2
}

// softmaxRows emits the softmax of rows i0+g0 … i0+g0+n−1 (row i has i+1
// entries) from b to a: for all n rows at once, m = max_j b_ij (at least
// −MaxFloat32, so an all −Inf row gives exp(−Inf) = 0, not NaN), then
// e = exp(b − m) to a with sum Σ e, then a = e / max(sum, MinNormal)
// (sum ≥ 1 unless the row is all −Inf). The whole vectors all rows share
// are a loop; each row's remaining 0 … W+n−2 entries take two masked vectors.
func (s *simd) softmaxRows(i0 reg.GPVirtual, g0, n int) {
	c, W, N := s.c, s.W, s.f.Config.N
	bp := s.rowPtr("b", i0, N)
	ap := s.rowPtr("a", i0, N)
	full, base := c.GP64(), c.GP64()
	c.LEAQ(operand.Mem{Base: i0, Disp: g0 + 1}, full) // shortest row's length
	c.MOVQ(full, base)
	c.ANDQ(imm(^(W - 1)), full)
	c.SUBQ(full, base) // entries of the shortest row past full
	at := func(p, j reg.Register, r, vec int) operand.Mem {
		return operand.Mem{Base: p, Index: j, Scale: 4, Disp: 4*N*(g0+r) + 4*W*vec}
	}
	// pass emits the loop over the shared whole vectors, then each row's
	// two masked tail vectors.
	pass := func(name string, body func(j reg.GPVirtual, r int), tail func(j reg.GPVirtual, r, vec int, m mask)) {
		j := c.GP64()
		loop, done := s.label(name), s.label(name+"_tail")
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
			m1, m2, n2 := s.tailMasks(base, r)
			tail(j, r, 0, m1)
			if r > 0 { // the second vector is empty unless rem = base+r ≥ W
				skip := s.label(name + "_one")
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
		mx[r] = s.bcast("sv_ninf", float32(math.Inf(-1)))
	}
	pass("sv_max", func(j reg.GPVirtual, r int) {
		c.VMAXPS(at(bp, j, r, 0), mx[r], mx[r])
	}, func(j reg.GPVirtual, r, vec int, m mask) {
		x := s.vec()
		s.loadZ(m, at(bp, j, r, vec), x)
		if s.isa == kernels.AVX512 {
			c.VMAXPS(x, mx[r], m.r, mx[r])
		} else {
			ninf := s.bcast("sv_ninf", float32(math.Inf(-1)))
			c.VBLENDVPS(m.r, x, ninf, x)
			c.VMAXPS(x, mx[r], mx[r])
		}
	})
	for r := range mx {
		s.allReduce(mx[r], func(a, b, dst operand.Op) { c.VMAXPS(a, b, dst) })
		lo := s.bcast("sv_nmax", -math.MaxFloat32)
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
	}, func(j reg.GPVirtual, r, vec int, m mask) {
		x := s.vec()
		s.loadZ(m, at(bp, j, r, vec), x)
		c.VSUBPS(mx[r], x, x)
		e := s.exp(x)
		if s.isa == kernels.AVX512 {
			c.VADDPS(e, sum[r], m.r, sum[r])
		} else {
			c.VANDPS(m.r, e, e)
			c.VADDPS(e, sum[r], sum[r])
		}
		s.storeM(m, e, at(ap, j, r, vec))
	})
	inv := make([]reg.VecVirtual, n)
	for r := range sum {
		s.allReduce(sum[r], func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
		tiny := s.bcast("sv_fltmin", 0x1p-126)
		c.VMAXPS(sum[r], tiny, sum[r])
		inv[r] = s.bcast("sv_one", 1)
		c.VDIVPS(sum[r], inv[r], inv[r])
	}

	// Pass 3: a *= 1/sum.
	pass("sv_scale", func(j reg.GPVirtual, r int) {
		x := s.vec()
		c.VMULPS(at(ap, j, r, 0), inv[r], x)
		c.VMOVUPS(x, at(ap, j, r, 0))
	}, func(j reg.GPVirtual, r, vec int, m mask) {
		x := s.vec()
		s.loadZ(m, at(ap, j, r, vec), x)
		c.VMULPS(x, inv[r], x)
		s.storeM(m, x, at(ap, j, r, vec))
	})
}

// emitSoftmaxValue writes the body of the forward kernel
// func(t int, b, a, v, y []float32).
func emitSoftmaxValue(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSIMD(f, isa)
	c := s.c
	s.initDH()
	R, _ := s.blocking()
	if f.Config.N >= svLongN {
		s.copyV()
		s.pfAhead = R
	}

	i0 := c.GP64()
	c.Load(c.Param("t"), i0)
	done := s.label("sv_done")
	singles := s.label("sv_singles")
	if R > 1 {
		// Blocks of R rows from the bottom up; the t mod R top rows remain.
		loop := s.label("sv_blocks")
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
	loop := s.label("sv_single")
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
func (s *simd) fwdBlock(rb int, i0 reg.GPVirtual) {
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
		loop := s.label("sv_prod")
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
		yp := s.rowPtr("y", i0, D)
		for r := 0; r < rb; r++ {
			s.storeCols(acc[r], operand.Mem{Base: yp, Disp: 4 * D * r}, c0)
		}
	}
}

func imm(x int) operand.U32 { return operand.U32(uint32(x)) }
