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

func init() {
	implemented[catalog.SoftmaxValue] = true
	implemented[catalog.SoftmaxValueBack] = true
}

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

	i0 := c.GP64()
	c.Load(c.Param("t"), i0)
	done := s.label("sv_done")
	singles := s.label("sv_singles")
	if G := s.superBlocks(); R > 1 && G > 1 {
		// Long rows: super-blocks of G blocks from the bottom up while
		// there are G whole blocks; i0 is then the first row of the next.
		loop, rest := s.label("sv_supers"), s.label("sv_rest")
		c.SUBQ(imm(G*R), i0)
		c.Label(loop)
		c.CMPQ(i0, imm(0))
		c.JL(operand.LabelRef(rest))
		s.fwdSuper(G, R, i0)
		c.SUBQ(imm(G*R), i0)
		c.JMP(operand.LabelRef(loop))
		c.Label(rest)
		c.ADDQ(imm(G*R), i0)
	}
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
		vp := s.param("v")
		dm := s.chunkMask(c0, cw)
		j := c.GP64()
		c.XORQ(j, j)
		vv := s.vecs(cw)
		step := func(vmem operand.Mem, first, adisp int) {
			s.loadCols(vmem, c0, vv, dm)
			for r := first; r < rb; r++ {
				b := s.vec()
				c.VBROADCASTSS(operand.Mem{Base: ap, Index: j, Scale: 4, Disp: 4*N*r + adisp}, b)
				for k := range vv {
					c.VFMADD231PS(vv[k], b, acc[r][k])
				}
			}
		}
		loop := s.label("sv_prod")
		c.Label(loop)
		step(operand.Mem{Base: vp}, 0, 0)
		c.ADDQ(imm(4*D), vp)
		c.INCQ(j)
		c.CMPQ(j, i0)
		c.JLE(operand.LabelRef(loop))
		// Corner: j = i0+jj takes rows jj … rb−1.
		for jj := 1; jj < rb; jj++ {
			step(operand.Mem{Base: vp, Disp: 4 * D * (jj - 1)}, jj, 4*(jj-1))
		}
		yp := s.rowPtr("y", i0, D)
		for r := 0; r < rb; r++ {
			s.storeCols(acc[r], operand.Mem{Base: yp, Disp: 4 * D * r}, c0)
		}
	}
}

// rowGroups is the number of ri-row groups the backward's second phase
// takes per pass over V when rows are long (N ≥ svLongN): each pass
// reads V's rows j < i0 + ri·G once for all of them (the pair blocks'
// V rows come from L1 for the later groups), rather than once per ri rows.
func (s *simd) rowGroups() int {
	if s.f.Config.N < svLongN {
		return 1
	}
	return 4
}

// superBlocks is the number G of R-row blocks the forward groups into a
// super-block when rows are long (N ≥ svLongN): a block's products read V's
// head rows j ≤ i once each, 512 KiB at N 2048 with rows 1 KiB apart,
// which fill the L2 sets they map to and come from L3 for every block;
// grouped, each chunk of svChunk keys is read once for G blocks. 1 (no
// grouping) for shorter rows, where V stays in L2.
func (s *simd) superBlocks() int {
	if s.f.Config.N < svLongN {
		return 1
	}
	return 24
}

const (
	svLongN = 1024 // N from which the forward runs super-blocks
	svChunk = 256  // keys per chunk of a super-block's shared part
)

// fwdSuper emits softmax and Y for the G blocks of R rows from row s0 up
// (rows s0 … s0+G·R−1): the softmax of every row; then Y over the keys
// j ≤ s0, which every row sees, in chunks of svChunk keys, the G blocks'
// products of a chunk one after another (its V rows are still in L2 for
// the later ones); then each block's own keys s0 < j ≤ its first row, and
// its corner, as fwdBlock does. Y starts at zero and gathers the chunks in
// increasing j: the additions are fwdBlock's, in its order.
func (s *simd) fwdSuper(G, R int, s0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	blk, g := c.GP64(), c.GP64()
	// forBlocks emits body once, run for blk = s0, s0+R, …, s0+(G−1)·R.
	forBlocks := func(name string, body func()) {
		loop := s.label(name)
		c.MOVQ(s0, blk)
		c.MOVQ(imm(G), g)
		c.Label(loop)
		body()
		c.ADDQ(imm(R), blk)
		c.DECQ(g)
		c.JNZ(operand.LabelRef(loop))
	}
	forBlocks("svs_softmax", func() {
		for g0 := 0; g0 < R; g0 += s.group() {
			s.softmaxRows(blk, g0, min(s.group(), R-g0))
		}
	})
	// Y rows of the super-block = 0.
	{
		z := s.vec()
		s.zero(z)
		forBlocks("svs_zero", func() {
			yp := s.rowPtr("y", blk, D)
			for r := 0; r < R; r++ {
				zs := make([]reg.VecVirtual, s.nv)
				for k := range zs {
					zs[k] = z
				}
				s.storeCols(zs, operand.Mem{Base: yp, Disp: 4 * D * r}, 0)
			}
		})
	}
	// products emits, for every column chunk of the head, Y rows blk … blk+R−1
	// += Σ_j a_ij v_j over j from the register j while j < end (or j ≤ end
	// with incl), then, with corner, the keys blk+1 … blk+R−1.
	products := func(j0 reg.GPVirtual, end reg.GPVirtual, incl, corner bool) {
		for _, ch := range s.chunks(cv) {
			c0, cw := ch[0], ch[1]
			yp := s.rowPtr("y", blk, D)
			dm := s.chunkMask(c0, cw)
			acc := make([][]reg.VecVirtual, R)
			for r := range acc {
				acc[r] = s.vecs(cw)
				s.loadCols(operand.Mem{Base: yp, Disp: 4 * D * r}, c0, acc[r], dm)
			}
			ap := s.rowPtr("a", blk, N)
			vp, j := c.GP64(), c.GP64()
			c.MOVQ(j0, j)
			c.IMUL3Q(imm(4*D), j, vp)
			c.ADDQ(s.param("v"), vp)
			vv := s.vecs(cw)
			step := func(vmem operand.Mem, first, adisp int) {
				s.loadCols(vmem, c0, vv, dm)
				for r := first; r < R; r++ {
					b := s.vec()
					c.VBROADCASTSS(operand.Mem{Base: ap, Index: j, Scale: 4, Disp: 4*N*r + adisp}, b)
					for k := range vv {
						c.VFMADD231PS(vv[k], b, acc[r][k])
					}
				}
			}
			loop, out := s.label("svs_prod"), s.label("svs_prod_out")
			c.Label(loop)
			c.CMPQ(j, end)
			if incl {
				c.JG(operand.LabelRef(out))
			} else {
				c.JGE(operand.LabelRef(out))
			}
			step(operand.Mem{Base: vp}, 0, 0)
			c.ADDQ(imm(4*D), vp)
			c.INCQ(j)
			c.JMP(operand.LabelRef(loop))
			c.Label(out)
			if corner {
				// j = blk+1 here: key blk+jj takes rows jj … R−1.
				for jj := 1; jj < R; jj++ {
					step(operand.Mem{Base: vp, Disp: 4 * D * (jj - 1)}, jj, 4*(jj-1))
				}
			}
			for r := 0; r < R; r++ {
				s.storeCols(acc[r], operand.Mem{Base: yp, Disp: 4 * D * r}, c0)
			}
		}
	}
	// The shared keys j ≤ s0, chunk by chunk.
	jc, end := c.GP64(), c.GP64()
	c.XORQ(jc, jc)
	chunks, tail := s.label("svs_chunks"), s.label("svs_tail")
	c.Label(chunks)
	c.CMPQ(jc, s0)
	c.JG(operand.LabelRef(tail))
	{
		lim := c.GP64()
		c.LEAQ(operand.Mem{Base: jc, Disp: svChunk}, end)
		c.LEAQ(operand.Mem{Base: s0, Disp: 1}, lim)
		c.CMPQ(end, lim)
		c.CMOVQGT(lim, end) // end = min(jc + svChunk, s0 + 1)
	}
	forBlocks("svs_rect", func() { products(jc, end, false, false) })
	c.ADDQ(imm(svChunk), jc)
	c.JMP(operand.LabelRef(chunks))
	c.Label(tail)
	// Each block's own keys s0 < j ≤ blk, then its corner.
	c.LEAQ(operand.Mem{Base: s0, Disp: 1}, jc)
	forBlocks("svs_own", func() { products(jc, blk, true, true) })
}

// emitSoftmaxValueBack writes the body of the backward kernel
// func(t int, a, v, dy, db, dv []float32).
func emitSoftmaxValueBack(f *File, op catalog.Op, isa kernels.ISA) {
	s := newSIMD(f, isa)
	c := s.c
	N := f.Config.N
	// The gradient rows buffer, RB rows of N floats; a frame over 512
	// bytes drops NOSPLIT (the assembler then adds the stack check).
	ri, _ := s.pairBlock()
	RB := ri * s.rowGroups()
	frame := (4*N*RB + 7) &^ 7
	gbuf := c.AllocLocal(frame)
	if frame > 512 {
		c.Attributes(0)
	}
	s.initDH()
	R, _ := s.blocking()

	// Phase 1: dv = aᵀ·dy, blocks of R rows of dv from the top; the t mod R
	// last rows one at a time.
	j0 := c.GP64()
	c.XORQ(j0, j0)
	singles := s.label("svb_singles")
	if G := s.superBlocks(); R > 1 && G > 1 {
		// Long rows: super-blocks of G blocks while G whole blocks remain.
		loop, rest := s.label("svb_supers"), s.label("svb_rest")
		c.Label(loop)
		t, e := c.GP64(), c.GP64()
		c.Load(c.Param("t"), t)
		c.LEAQ(operand.Mem{Base: j0, Disp: G * R}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(rest))
		s.dvSuper(G, R, j0)
		c.ADDQ(imm(G*R), j0)
		c.JMP(operand.LabelRef(loop))
		c.Label(rest)
	}
	if R > 1 {
		loop := s.label("svb_blocks")
		c.Label(loop)
		t, e := c.GP64(), c.GP64()
		c.Load(c.Param("t"), t)
		c.LEAQ(operand.Mem{Base: j0, Disp: R}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(singles))
		s.dvBlock(R, j0)
		c.ADDQ(imm(R), j0)
		c.JMP(operand.LabelRef(loop))
	}
	c.Label(singles)
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(j0, t)
		phase2 := s.label("svb_phase2")
		c.JGE(operand.LabelRef(phase2))
		s.dvBlock(1, j0)
		c.INCQ(j0)
		c.JMP(operand.LabelRef(singles))
		c.Label(phase2)
	}

	// Phase 2: g rows to gbuf, then s and db row by row. Blocks of RB rows
	// from the top while t ≥ 16, the rest one row at a time.
	i0 := c.GP64()
	c.XORQ(i0, i0)
	rows, single, done := s.label("svb_rows"), s.label("svb_row"), s.label("svb_done")
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(t, imm(16))
		c.JL(operand.LabelRef(single))
	}
	c.Label(rows)
	{
		t, e := c.GP64(), c.GP64()
		c.Load(c.Param("t"), t)
		c.LEAQ(operand.Mem{Base: i0, Disp: RB}, e)
		c.CMPQ(e, t)
		c.JG(operand.LabelRef(single))
	}
	s.gRows(i0, gbuf)
	if RB == ri {
		for r := 0; r < ri; r++ {
			row := c.GP64()
			c.LEAQ(operand.Mem{Base: i0, Disp: r}, row)
			s.finishRow(row, gbuf.Offset(4*N*r))
		}
	} else {
		// A loop over the block's rows: RB copies would bloat the code.
		rr, loop := c.GP64(), s.label("svb_finish")
		c.XORQ(rr, rr)
		c.Label(loop)
		row, gp, off := c.GP64(), c.GP64(), c.GP64()
		c.LEAQ(operand.Mem{Base: i0, Index: rr, Scale: 1}, row)
		c.LEAQ(gbuf, gp)
		c.IMUL3Q(imm(4*N), rr, off)
		c.ADDQ(off, gp)
		s.finishRow(row, operand.Mem{Base: gp})
		c.INCQ(rr)
		c.CMPQ(rr, imm(RB))
		c.JL(operand.LabelRef(loop))
	}
	c.ADDQ(imm(RB), i0)
	c.JMP(operand.LabelRef(rows))
	c.Label(single)
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(i0, t)
		c.JGE(operand.LabelRef(done))
	}
	s.backRow(i0, gbuf)
	c.INCQ(i0)
	c.JMP(operand.LabelRef(single))
	c.Label(done)
	c.VZEROUPPER()
	c.RET()
}

// dvSuper emits dv rows J0 … J0+G·R−1 (G blocks of R rows) as G dvBlocks
// would, with their shared rows i ≥ J0+G·R taken in chunks of svChunk,
// the G blocks' products of a chunk one after another (its dy rows, and
// a's lines, still in L2 for the later ones): per block first its own rows
// J0+b·R ≤ i < J0+G·R (the corner, then a loop), kept in dv, then the
// chunks added in increasing i — dvBlock's additions in its order.
func (s *simd) dvSuper(G, R int, J0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	blk, g := c.GP64(), c.GP64()
	forBlocks := func(name string, body func()) {
		loop := s.label(name)
		c.MOVQ(J0, blk)
		c.MOVQ(imm(G), g)
		c.Label(loop)
		body()
		c.ADDQ(imm(R), blk)
		c.DECQ(g)
		c.JNZ(operand.LabelRef(loop))
	}
	top := c.GP64() // J0 + G·R, the first shared row
	c.LEAQ(operand.Mem{Base: J0, Disp: G * R}, top)
	// products emits, per column chunk, dv rows blk … blk+R−1 (+)= Σ_i a_i,blk+r dy_i:
	// own: from zero over the corner and the rows up to top; else over rows
	// i0 ≤ i < end, added to dv.
	products := func(own bool, i0, end reg.GPVirtual) {
		for _, ch := range s.chunks(cv) {
			c0, cw := ch[0], ch[1]
			dm := s.chunkMask(c0, cw)
			dvp := s.rowPtr("dv", blk, D)
			acc := make([][]reg.VecVirtual, R)
			for r := range acc {
				acc[r] = s.vecs(cw)
				if own {
					for _, x := range acc[r] {
						s.zero(x)
					}
				} else {
					s.loadCols(operand.Mem{Base: dvp, Disp: 4 * D * r}, c0, acc[r], dm)
				}
			}
			// ap = &a[row][blk], dyp = &dy[row] for the first row taken.
			first := blk
			if !own {
				first = i0
			}
			ap, dyp := s.rowPtr("a", first, N), s.rowPtr("dy", first, D)
			c.LEAQ(operand.Mem{Base: ap, Index: blk, Scale: 4}, ap)
			vv := s.vecs(cw)
			step := func(ii, last int) {
				s.loadCols(operand.Mem{Base: dyp, Disp: 4 * D * ii}, c0, vv, dm)
				for r := 0; r <= last; r++ {
					b := s.vec()
					c.VBROADCASTSS(operand.Mem{Base: ap, Disp: 4*N*ii + 4*r}, b)
					for k := range vv {
						c.VFMADD231PS(vv[k], b, acc[r][k])
					}
				}
			}
			i := c.GP64()
			if own {
				for ii := 0; ii < R-1; ii++ { // row blk+ii feeds dv rows 0 … ii
					step(ii, ii)
				}
				c.LEAQ(operand.Mem{Base: blk, Disp: R - 1}, i)
				c.ADDQ(imm(4*N*(R-1)), ap)
				c.ADDQ(imm(4*D*(R-1)), dyp)
				end = top
			} else {
				c.MOVQ(i0, i)
			}
			loop, out := s.label("svs_dv"), s.label("svs_dv_out")
			c.Label(loop)
			c.CMPQ(i, end)
			c.JGE(operand.LabelRef(out))
			step(0, R-1)
			c.ADDQ(imm(4*N), ap)
			c.ADDQ(imm(4*D), dyp)
			c.INCQ(i)
			c.JMP(operand.LabelRef(loop))
			c.Label(out)
			for r := 0; r < R; r++ {
				s.storeCols(acc[r], operand.Mem{Base: dvp, Disp: 4 * D * r}, c0)
			}
		}
	}
	forBlocks("svbs_own", func() { products(true, nil, nil) })
	ic, end, t := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(top, ic)
	chunks, done := s.label("svbs_chunks"), s.label("svbs_done")
	c.Label(chunks)
	c.Load(c.Param("t"), t)
	c.CMPQ(ic, t)
	c.JGE(operand.LabelRef(done))
	c.LEAQ(operand.Mem{Base: ic, Disp: svChunk}, end)
	c.CMPQ(end, t)
	c.CMOVQGT(t, end) // end = min(ic + svChunk, t)
	forBlocks("svbs_rect", func() { products(false, ic, end) })
	c.ADDQ(imm(svChunk), ic)
	c.JMP(operand.LabelRef(chunks))
	c.Label(done)
}

// dvBlock emits dv rows j0 … j0+rb−1 = Σ_{i ≥ j} a_ij dy_i.
func (s *simd) dvBlock(rb int, j0 reg.GPVirtual) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	_, cv := s.blocking()
	for _, ch := range s.chunks(cv) {
		c0, cw := ch[0], ch[1]
		acc := make([][]reg.VecVirtual, rb)
		for r := range acc {
			acc[r] = s.vecs(cw)
			for _, x := range acc[r] {
				s.zero(x)
			}
		}
		ap := s.rowPtr("a", j0, N+1) // &a[j0][j0]
		dyp := s.rowPtr("dy", j0, D)
		dm := s.chunkMask(c0, cw)
		vv := s.vecs(cw)
		step := func(ii, last int) { // row i = j0+ii (relative to the pointers) for dv rows ≤ last
			s.loadCols(operand.Mem{Base: dyp, Disp: 4 * D * ii}, c0, vv, dm)
			for r := 0; r <= last; r++ {
				b := s.vec()
				c.VBROADCASTSS(operand.Mem{Base: ap, Disp: 4*N*ii + 4*r}, b)
				for k := range vv {
					c.VFMADD231PS(vv[k], b, acc[r][k])
				}
			}
		}
		// Corner: row i = j0+ii feeds dv rows 0 … ii.
		for ii := 0; ii < rb-1; ii++ {
			step(ii, ii)
		}
		i := c.GP64()
		c.LEAQ(operand.Mem{Base: j0, Disp: rb - 1}, i)
		if rb > 1 {
			c.ADDQ(imm(4*N*(rb-1)), ap)
			c.ADDQ(imm(4*D*(rb-1)), dyp)
		}
		t := c.GP64()
		c.Load(c.Param("t"), t)
		loop := s.label("svb_dv")
		c.Label(loop)
		step(0, rb-1)
		c.ADDQ(imm(4*N), ap)
		c.ADDQ(imm(4*D), dyp)
		c.INCQ(i)
		c.CMPQ(i, t)
		c.JL(operand.LabelRef(loop))
		dvp := s.rowPtr("dv", j0, D)
		for r := 0; r < rb; r++ {
			s.storeCols(acc[r], operand.Mem{Base: dvp, Disp: 4 * D * r}, c0)
		}
	}
}

// sigma is the lane order of reduceW: the sum of accumulator k lands in
// lane sigma[k] (an involution), so slot k accumulates the dot product
// wanted in lane sigma[k] and the reduced vector comes out in order.
func (s *simd) sigma() []int {
	if s.isa == kernels.AVX512 {
		return []int{0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15}
	}
	return []int{0, 2, 1, 3, 4, 6, 5, 7}
}

// reduceW reduces W accumulators (slot order) to one vector of their sums.
func (s *simd) reduceW(z []reg.VecVirtual) reg.VecVirtual {
	c := s.c
	pair := func(a, b reg.VecVirtual, shuf func(imm uint8, a, b, dst reg.VecVirtual), lo, hi uint8) reg.VecVirtual {
		t1, t2 := s.vec(), s.vec()
		shuf(lo, a, b, t1)
		shuf(hi, a, b, t2)
		c.VADDPS(t2, t1, t1)
		return t1
	}
	level := func(z []reg.VecVirtual, shuf func(imm uint8, a, b, dst reg.VecVirtual), lo, hi uint8) []reg.VecVirtual {
		h := len(z) / 2
		out := make([]reg.VecVirtual, h)
		for k := 0; k < h; k++ {
			out[k] = pair(z[k], z[k+h], shuf, lo, hi)
		}
		return out
	}
	lanes128 := func(imm uint8, a, b, dst reg.VecVirtual) { c.VSHUFF32X4(operand.U8(imm), b, a, dst) }
	halves := func(imm uint8, a, b, dst reg.VecVirtual) { c.VPERM2F128(operand.U8(imm), b, a, dst) }
	within := func(imm uint8, a, b, dst reg.VecVirtual) { c.VSHUFPS(operand.U8(imm), b, a, dst) }
	if s.isa == kernels.AVX512 {
		z = level(z, lanes128, 0x44, 0xEE)
		z = level(z, lanes128, 0x88, 0xDD)
	} else {
		z = level(z, halves, 0x20, 0x31)
	}
	z = level(z, within, 0x88, 0xDD)
	z = level(z, within, 0x88, 0xDD)
	return z[0]
}

// gBlock emits gbuf[jb … jb+W−1] = dy_i · v_j for the W rows of v at vp.
func (s *simd) gBlock(dyp, vp, gp reg.GPVirtual) {
	c, D := s.c, s.f.Config.D
	sig := s.sigma()
	acc := s.vecs(s.W)
	for _, x := range acc {
		s.zero(x)
	}
	for cv := 0; cv < s.nv; cv++ {
		x := s.vec()
		if s.partial(cv) {
			dm := s.dhMask()
			s.loadZ(dm, operand.Mem{Base: dyp, Disp: 4 * s.W * cv}, x)
			for q := range acc {
				m := operand.Mem{Base: vp, Disp: 4*D*sig[q] + 4*s.W*cv}
				if s.isa == kernels.AVX512 {
					c.VFMADD231PS(m, x, dm.r, acc[q]) // masked lanes: no access
				} else {
					y := s.vec()
					s.loadZ(dm, m, y)
					c.VFMADD231PS(y, x, acc[q])
				}
			}
			continue
		}
		c.VMOVUPS(operand.Mem{Base: dyp, Disp: 4 * s.W * cv}, x)
		for q := range acc {
			c.VFMADD231PS(operand.Mem{Base: vp, Disp: 4*D*sig[q] + 4*s.W*cv}, x, acc[q])
		}
	}
	g := s.reduceW(acc)
	c.VMOVUPS(g, operand.Mem{Base: gp})
}

// pairBlock is the shape of gRows' blocks: ri rows of g by rj columns,
// ri·rj = W pairs whose W dot products reduceW sums into one vector, lane
// rj·r + q holding g[i0+r][jb+q].
func (s *simd) pairBlock() (ri, rj int) {
	if s.isa == kernels.AVX512 {
		return 4, 4
	}
	return 2, 4
}

// gRows emits rows i0 … i0+ri−1 of g (columns up to i0+ri−1, some past
// their row's diagonal) to the ri rows of gbuf (stride N): blocks of rj
// columns, the last one ending at the longest row's diagonal and
// overlapping its predecessor; it reads rows < max(i0+ri, rj) ≤ t of v.
func (s *simd) gRows(i0 reg.GPVirtual, gbuf operand.Mem) {
	c, D := s.c, s.f.Config.D
	ri, rj := s.pairBlock()
	G := s.rowGroups()
	dyp := s.rowPtr("dy", i0, D)
	L := c.GP64()
	c.LEAQ(operand.Mem{Base: i0, Disp: ri * G}, L)
	jb, vp, gp := c.GP64(), s.param("v"), c.GP64()
	c.XORQ(jb, jb)
	c.LEAQ(gbuf, gp)
	blocks, tail, done := s.label("svb_pblocks"), s.label("svb_ptail"), s.label("svb_pdone")
	c.Label(blocks)
	{
		e := c.GP64()
		c.LEAQ(operand.Mem{Base: jb, Disp: rj}, e)
		c.CMPQ(e, L)
		c.JG(operand.LabelRef(tail))
	}
	for g := 0; g < G; g++ {
		s.gPairs(dyp, vp, gp, g)
	}
	c.ADDQ(imm(rj), jb)
	c.ADDQ(imm(4*rj), gp)
	c.ADDQ(imm(4*rj*D), vp)
	c.JMP(operand.LabelRef(blocks))
	c.Label(tail)
	c.CMPQ(jb, L)
	c.JE(operand.LabelRef(done))
	pos := s.label("svb_ppos")
	c.MOVQ(L, jb)
	c.SUBQ(imm(rj), jb)
	c.JGE(operand.LabelRef(pos))
	c.XORQ(jb, jb) // max(L−rj, 0)
	c.Label(pos)
	vp2, gp2 := s.rowPtr("v", jb, D), c.GP64()
	c.LEAQ(gbuf, gp2)
	c.LEAQ(operand.Mem{Base: gp2, Index: jb, Scale: 4}, gp2)
	for g := 0; g < G; g++ {
		s.gPairs(dyp, vp2, gp2, g)
	}
	c.Label(done)
}

// gPairs emits one ri × rj block of g: the rows of dy at dyp, of v at vp,
// to gbuf at gp (row stride N).
func (s *simd) gPairs(dyp, vp, gp reg.GPVirtual, grp int) {
	c, N, D := s.c, s.f.Config.N, s.f.Config.D
	ri, rj := s.pairBlock()
	r0 := ri * grp // the first row of the pointers' block this call takes
	sig := s.sigma()
	acc := s.vecs(s.W)
	for _, x := range acc {
		s.zero(x)
	}
	for cv := 0; cv < s.nv; cv++ {
		d, w := s.vecs(ri), s.vecs(rj)
		var dm mask
		if s.partial(cv) {
			dm = s.dhMask()
		}
		load := func(m operand.Mem, x reg.VecVirtual) {
			if s.partial(cv) {
				s.loadZ(dm, m, x)
			} else {
				c.VMOVUPS(m, x)
			}
		}
		for r := range d {
			load(operand.Mem{Base: dyp, Disp: 4*D*(r0+r) + 4*s.W*cv}, d[r])
		}
		for q := range w {
			load(operand.Mem{Base: vp, Disp: 4*D*q + 4*s.W*cv}, w[q])
		}
		for k, x := range acc {
			c.VFMADD231PS(w[sig[k]%rj], d[sig[k]/rj], x)
		}
	}
	g := s.reduceW(acc)
	for r := 0; r < ri; r++ {
		m := operand.Mem{Base: gp, Disp: 4 * N * (r0 + r)}
		if s.isa == kernels.AVX512 {
			c.VEXTRACTF32X4(operand.U8(r), g, m)
		} else {
			c.VEXTRACTF128(operand.U8(r), g, m)
		}
	}
}

// backRow emits db's row i alone: g_i to gbuf (W columns at a time), then
// finishRow.
func (s *simd) backRow(i reg.GPVirtual, gbuf operand.Mem) {
	c, W, D := s.c, s.W, s.f.Config.D
	L := c.GP64()
	c.LEAQ(operand.Mem{Base: i, Disp: 1}, L)
	dyp := s.rowPtr("dy", i, D)
	gb := c.GP64()
	c.LEAQ(gbuf, gb)

	gdone, gsingle := s.label("svb_gdone"), s.label("svb_gsingle")
	{
		t := c.GP64()
		c.Load(c.Param("t"), t)
		c.CMPQ(t, imm(W))
		c.JL(operand.LabelRef(gsingle))
	}
	// t ≥ W: whole blocks of W columns, then one block ending at column i
	// (or starting at 0), overlapping the last whole block; its rows of v
	// are all < max(i+1, W) ≤ t.
	jb, vp, gp := c.GP64(), s.param("v"), c.GP64()
	c.XORQ(jb, jb)
	c.MOVQ(gb, gp)
	blocks, tail := s.label("svb_gblocks"), s.label("svb_gtail")
	c.Label(blocks)
	{
		e := c.GP64()
		c.LEAQ(operand.Mem{Base: jb, Disp: W}, e)
		c.CMPQ(e, L)
		c.JG(operand.LabelRef(tail))
	}
	s.gBlock(dyp, vp, gp)
	c.ADDQ(imm(W), jb)
	c.ADDQ(imm(4*W), gp)
	c.ADDQ(imm(4*W*D), vp)
	c.JMP(operand.LabelRef(blocks))
	c.Label(tail)
	c.CMPQ(jb, L)
	c.JE(operand.LabelRef(gdone))
	{
		pos := s.label("svb_gpos")
		c.MOVQ(L, jb)
		c.SUBQ(imm(W), jb)
		c.JGE(operand.LabelRef(pos))
		c.XORQ(jb, jb) // max(L−W, 0)
		c.Label(pos)
		vp2 := s.rowPtr("v", jb, D)
		gp2 := c.GP64()
		c.LEAQ(operand.Mem{Base: gb, Index: jb, Scale: 4}, gp2)
		s.gBlock(dyp, vp2, gp2)
		c.JMP(operand.LabelRef(gdone))
	}

	// t < W: one dot product per column.
	c.Label(gsingle)
	{
		j, vp := c.GP64(), s.param("v")
		c.XORQ(j, j)
		loop := s.label("svb_gdot")
		c.Label(loop)
		acc := s.vec()
		s.zero(acc)
		for cv := 0; cv < s.nv; cv++ {
			x, y := s.vec(), s.vec()
			if s.partial(cv) {
				dm := s.dhMask()
				s.loadZ(dm, operand.Mem{Base: dyp, Disp: 4 * W * cv}, x)
				s.loadZ(dm, operand.Mem{Base: vp, Disp: 4 * W * cv}, y)
			} else {
				c.VMOVUPS(operand.Mem{Base: dyp, Disp: 4 * W * cv}, x)
				c.VMOVUPS(operand.Mem{Base: vp, Disp: 4 * W * cv}, y)
			}
			c.VFMADD231PS(y, x, acc)
		}
		s.allReduce(acc, func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
		s.storeM(s.constMask(1), acc, operand.Mem{Base: gb, Index: j, Scale: 4})
		c.ADDQ(imm(4*D), vp)
		c.INCQ(j)
		c.CMPQ(j, L)
		c.JL(operand.LabelRef(loop))
	}
	c.Label(gdone)
	s.finishRow(i, gbuf)
}

// finishRow emits db's row i from its gradient row at gbuf:
// s_i = Σ_j a_ij g_ij, then db_ij = a_ij (g_ij − s_i).
func (s *simd) finishRow(i reg.GPVirtual, gbuf operand.Mem) {
	c, W, N := s.c, s.W, s.f.Config.N
	L, gb := c.GP64(), c.GP64()
	c.LEAQ(operand.Mem{Base: i, Disp: 1}, L)
	c.LEAQ(gbuf, gb)
	ap := s.rowPtr("a", i, N)
	full, rem := c.GP64(), c.GP64()
	c.MOVQ(L, full)
	c.MOVQ(L, rem)
	c.ANDQ(imm(W-1), rem)
	c.SUBQ(rem, full)
	tm := s.tailMask(rem)
	at := func(p, j reg.Register) operand.Mem { return operand.Mem{Base: p, Index: j, Scale: 4} }
	pass := func(name string, body func(j reg.GPVirtual), tailf func(j reg.GPVirtual)) {
		j := c.GP64()
		loop, done := s.label(name), s.label(name+"_tail")
		c.XORQ(j, j)
		c.Label(loop)
		c.CMPQ(j, full)
		c.JAE(operand.LabelRef(done))
		body(j)
		c.ADDQ(imm(W), j)
		c.JMP(operand.LabelRef(loop))
		c.Label(done)
		tailf(j)
	}
	sacc := s.vec()
	s.zero(sacc)
	pass("svb_dot", func(j reg.GPVirtual) {
		x := s.vec()
		c.VMOVUPS(at(gb, j), x)
		c.VFMADD231PS(at(ap, j), x, sacc)
	}, func(j reg.GPVirtual) {
		x, y := s.vec(), s.vec()
		s.loadZ(tm, at(gb, j), x)
		s.loadZ(tm, at(ap, j), y)
		c.VFMADD231PS(y, x, sacc)
	})
	s.allReduce(sacc, func(a, b, dst operand.Op) { c.VADDPS(a, b, dst) })
	dbp := s.rowPtr("db", i, N)
	pass("svb_db", func(j reg.GPVirtual) {
		x := s.vec()
		c.VMOVUPS(at(gb, j), x)
		c.VSUBPS(sacc, x, x)
		c.VMULPS(at(ap, j), x, x)
		c.VMOVUPS(x, at(dbp, j))
	}, func(j reg.GPVirtual) {
		x, y := s.vec(), s.vec()
		s.loadZ(tm, at(gb, j), x)
		c.VSUBPS(sacc, x, x)
		s.loadZ(tm, at(ap, j), y)
		c.VMULPS(y, x, x)
		s.storeM(tm, x, at(dbp, j))
	})
}

// imm is a 32-bit immediate (the Go assembler picks the encoding).
func imm(x int) operand.U32 { return operand.U32(uint32(x)) }
