package asmgen

import (
	"math"
	"regexp"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/printer"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The attention-free kernels (kernels.AFT*Func) at the AVX-512 and AVX2
// levels; causal linear attention (linear.go) shares their toolbox, aftKit,
// and their channel blocking and register fitting. Formulas are on
// the function types in runtime/kernels; the algorithms are those of the
// Go versions (gen/gogen/aft.go), vectorised across the DH channels of a
// head: the channels are cut into blocks of as many vectors as the
// registers hold, and each block runs the whole kernel on its own (the
// bias gradients of the blocks add up in dw/du, which accumulate anyway).
//
// AFT forward, per block, rows i in order: the key i − S leaving the window
// joins a running scan (maximum r, sums shifted by r: one exponential of
// −|k − r| and two blends per update); the window's keys get a max pass
// then an exp-sum pass; z = num/den, m and rd = 1/den are stored.
// aft_full has no scan, aft_simple no window.
//
// AFT backward, per block, keys j in reverse order: the row j + S (the
// first that sees key j with bias 0) joins suffix sums shifted by
// μ = min m_i; dk_j and dv_j start as exp(k_j − μ) times those sums; the
// window rows j ≤ i < j + S are summed directly, each adding the lane sum
// of g_ij to dw[i·N+j] (or du[i−j]).
//
// Unmasked (a bidirectional spec, as gen/gogen/aftbi.go): aft_full's
// window is every key (forward) or row (backward); aft_simple first scans
// all the keys (rows) and then writes every row (key); aft_local and
// aft_conv keep the keys outside the window as a suffix scan (a reverse
// sweep parks it in the row's z, m and rd) and a prefix scan (the forward
// sweep), and in the backward the rows outside it as a prefix scan (a
// forward sweep writes dk and dv) and a suffix scan (the reverse sweep adds
// to them, with the window's rows |i − j| < S).
//
// Tails: the last vector of a head uses lane masks (K registers on
// AVX-512, VMASKMOVPS on AVX2), so no column ≥ DH is read or written; its
// masked-off lanes hold zeros and never produce Inf or NaN.

// aftMode is the bias structure of an AFT kernel.
type aftMode int

const (
	aftModeFull   = aftMode(catalog.BiasFull)   // b_ij = w[i·N+j] for every j ≤ i
	aftModeLocal  = aftMode(catalog.BiasLocal)  // b_ij = w[i·N+j] inside the window, 0 outside
	aftModeConv   = aftMode(catalog.BiasConv)   // b_ij = u[i−j] inside the window, 0 outside
	aftModeSimple = aftMode(catalog.BiasSimple) // b_ij = 0
)

// aftModeOf is kind k's bias structure, from its catalog entry.
func aftModeOf(k catalog.Kind) aftMode { return aftMode(catalog.Of(k).Bias) }

// scan reports whether some keys have bias 0 (kept as a running scan).
func (m aftMode) scan() bool { return m != aftModeFull }

// window reports whether some keys have a learned bias.
func (m aftMode) window() bool { return m != aftModeSimple }

// aftKit is the toolbox of the attention-free emitters and linear
// attention: the vector toolbox (masks, loads, reductions, exp) and the
// head geometry.
type aftKit struct {
	*simd
	op   catalog.Op
	cfg  catalog.Config
	mode aftMode
	nv   int // vectors per head row
	tail int // lanes of the last vector (W when it is full)
	d4   int // bytes per row of a [t, D] matrix

	linFixed int // linear attention: vector registers left outside a tile's state
}

func newAFTKit(f *File, op catalog.Op, isa kernels.ISA) *aftKit {
	a := &aftKit{simd: newSIMD(f, Name(op, isa), isa), op: op, cfg: f.Config, mode: aftModeOf(op.Kind)}
	a.nv = (a.cfg.DH + a.W - 1) / a.W
	a.tail = a.cfg.DH - (a.nv-1)*a.W
	a.d4 = 4 * a.cfg.D
	return a
}

// full reports whether head vector q has all its lanes.
func (a *aftKit) full(q int) bool { return q < a.nv-1 || a.tail == a.W }

// tailMask returns the mask of the last head vector if block [q0, q1)
// holds it partially, else nil.
func (a *aftKit) tailMask(q1 int) reg.Register {
	if a.full(q1 - 1) {
		return nil
	}
	return a.lanes(a.tail)
}

// blocksOf cuts the nv head vectors into blocks of at most nb vectors, as
// even as possible.
func (a *aftKit) blocksOf(nb int) [][2]int {
	nb = max(1, min(nb, a.nv))
	n := (a.nv + nb - 1) / nb
	var out [][2]int
	q := 0
	for b := 0; b < n; b++ {
		sz := (a.nv - q) / (n - b)
		out = append(out, [2]int{q, q + sz})
		q += sz
	}
	return out
}

// aftHighReg matches the registers AVX2 code must not use.
var aftHighReg = regexp.MustCompile(`\b[XY](1[6-9]|2[0-9]|3[01])\b|\bZ[0-9]+\b|\bK[1-7]\b`)

// aftFit returns the first register budget in budgets (most ambitious first)
// with which emit's code allocates — avo does not spill, and its allocator
// may need a few more registers than are live at once — and, on AVX2, uses
// only X/Y0–15. It emits into a scratch file; the last budget is the
// fallback.
func aftFit(f *File, op catalog.Op, isa kernels.ISA, budgets []int, emit func(a *aftKit, budget int)) int {
	for _, b := range budgets[:len(budgets)-1] {
		tf := NewFile(f.Config)
		tf.Ctx.Function("fit")
		tf.Ctx.Attributes(attr.NOSPLIT)
		tf.Ctx.SignatureExpr(op.Sig())
		emit(newAFTKit(tf, op, isa), b)
		file, err := tf.Ctx.Result()
		if err == nil {
			err = Compile(file)
		}
		if err != nil {
			continue
		}
		if isa == kernels.AVX2 {
			text, err := printer.NewGoAsm(printer.Config{Pkg: "fit"}).Print(file)
			if err != nil || aftHighReg.Match(text) {
				continue
			}
		}
		return b
	}
	return budgets[len(budgets)-1]
}

// aftDescending lists hi, hi−1, …, lo.
func aftDescending(hi, lo int) []int {
	var out []int
	for b := hi; b >= lo; b-- {
		out = append(out, b)
	}
	if len(out) == 0 {
		out = []int{lo}
	}
	return out
}

// at is the address of head vector q in the row at byte offset off of base.
func (a *aftKit) at(base, off reg.Register, q int) operand.Mem {
	return operand.Mem{Base: base, Index: off, Scale: 1, Disp: 4 * a.W * q}
}

// src returns head vector q at m as an operand: the memory itself when the
// vector is full, else a masked load into a new register.
func (a *aftKit) src(m operand.Mem, q int, mask reg.Register) operand.Op {
	if a.full(q) {
		return m
	}
	x := a.vec()
	a.loadM(m, mask, x)
	return x
}

// get loads head vector q at m into a new register.
func (a *aftKit) get(m operand.Mem, q int, mask reg.Register) reg.VecVirtual {
	x := a.vec()
	if a.full(q) {
		a.loadM(m, nil, x)
	} else {
		a.loadM(m, mask, x)
	}
	return x
}

// put stores head vector q to m (masked when partial).
func (a *aftKit) put(x reg.VecVirtual, m operand.Mem, q int, mask reg.Register) {
	if a.full(q) {
		a.storeM(x, nil, m)
	} else {
		a.storeM(x, mask, m)
	}
}

// splat broadcasts a float32 constant into a new register.
func (a *aftKit) splat(name string, v float32) reg.VecVirtual {
	x := a.vec()
	a.c.VBROADCASTSS(a.f.ConstF32(name, v), x)
	return x
}

var aftSignBit = math.Float32frombits(0x80000000)

// negAbs sets x = −|x|.
func (a *aftKit) negAbs(x reg.VecVirtual) {
	a.withConst(a.c.VORPS_BCST, a.c.VORPS, "aft_sign", aftSignBit, x, x)
}

// negate sets x = −x.
func (a *aftKit) negate(x reg.VecVirtual) {
	a.withConst(a.c.VXORPS_BCST, a.c.VXORPS, "aft_sign", aftSignBit, x, x)
}

// clampNonPositive sets x = min(x, 0).
func (a *aftKit) clampNonPositive(x reg.VecVirtual) {
	a.withConst(a.c.VMINPS_BCST, a.c.VMINPS, "aft_zero", 0, x, x)
}

// less returns the mask of the lanes with x < y (ordered).
func (a *aftKit) less(x, y reg.Register) reg.Register {
	var m reg.Register
	if a.avx512() {
		m = a.c.K()
	} else {
		m = a.c.YMM()
	}
	a.c.VCMPPS(operand.U8(1), y, x, m)
	return m
}

// blend sets dst = mask ? ifSet : ifClear, lane by lane.
func (a *aftKit) blend(mask reg.Register, ifSet, ifClear, dst reg.Register) {
	if a.avx512() {
		a.c.VBLENDMPS(ifSet, ifClear, mask, dst)
	} else {
		a.c.VBLENDVPS(mask, ifSet, ifClear, dst)
	}
}

// scanStep is the numerically safe update of a running shifted sum: with
// x the new value, ref the running reference (maximum or minimum, per
// lane), it leaves in ex the factor for the new term and returns the factor
// for the old sums; both are exp(−|x − ref|) or 1 (one exponential), and
// ref moves to x in the lanes where keep(x, ref) says x is the new reference.
// newer is the mask of those lanes (x beyond ref).
func (a *aftKit) scanStep(x, ref reg.VecVirtual, newer reg.Register) (old, ex reg.VecVirtual) {
	c := a.c
	d := a.vec()
	c.VSUBPS(ref, x, d) // x − ref
	a.negAbs(d)
	ex = a.exp(d) // exp(−|x − ref|) ≤ 1
	one := a.splat("aft_one", 1)
	old = a.vec()
	a.blend(newer, ex, one, old) // reference moves: old sums scale by ex
	a.blend(newer, one, ex, ex)  // the new term scales by ex unless it is the reference
	return old, ex
}

// aftEmitBlocks emits an AFT kernel as channel blocks (block emits one) of
// as many vectors as the registers hold, with per(mode) registers per head
// vector of a block and 6 spare.
func aftEmitBlocks(f *File, op catalog.Op, isa kernels.ISA, per func(m aftMode) int, block func(a *aftKit, q0, q1 int)) {
	body := func(a *aftKit, nb int) {
		for _, b := range a.blocksOf(nb) {
			block(a, b[0], b[1])
		}
		a.ret()
	}
	a := newAFTKit(f, op, isa)
	body(a, aftFit(f, op, isa, aftDescending(min(a.nv, (a.regs-6)/per(a.mode)), 1), body))
}

// emitAFT emits an AFT forward: AFTFull, AFTLocal, AFTConv or AFTSimple,
// in channel blocks of as many vectors as the registers hold.
func emitAFT(f *File, op catalog.Op, isa kernels.ISA) {
	aftEmitBlocks(f, op, isa, func(m aftMode) int {
		if m == aftModeLocal || m == aftModeConv {
			return 6 // r, sa, sb and mx, num, den
		}
		return 3 // mx, num, den or r, sa, sb
	}, (*aftKit).fwdBlock)
}

// emitAFTBack emits an AFT backward: AFTFullBack, AFTLocalBack,
// AFTConvBack or AFTSimpleBack, in channel blocks of as many vectors as the
// registers hold.
func emitAFTBack(f *File, op catalog.Op, isa kernels.ISA) {
	aftEmitBlocks(f, op, isa, func(m aftMode) int {
		if m == aftModeFull {
			return 4 // k_j, v_j, dk_j, dv_j
		}
		return 7 // mu, r1, r2, k_j, v_j, dk_j, dv_j
	}, (*aftKit).backBlock)
}

// aftBlock is one channel block of a kernel: head vectors q0 … q0+nq−1,
// the last of them partial (mask) or full (mask nil).
type aftBlock struct {
	*aftKit
	q0, nq int
	mask   reg.Register
}

// block starts channel block [q0, q1) with its comment (note follows the
// channel range).
func (a *aftKit) block(q0, q1 int, note string) *aftBlock {
	b := &aftBlock{aftKit: a, q0: q0, nq: q1 - q0, mask: a.tailMask(q1)}
	a.c.Commentf("Channels [%d, %d)%s.", q0*a.W, min(q1*a.W, a.cfg.DH), note)
	return b
}

var (
	aftNInf = float32(math.Inf(-1)) // the empty key scan's reference (its maximum)
	aftPInf = float32(math.Inf(1))  // the empty row scan's reference (its minimum)
)

// newScan allocates an empty scan of the block: its reference ref = inf
// (constant name) and its two sums.
func (b *aftBlock) newScan(name string, inf float32) (ref, s1, s2 []reg.VecVirtual) {
	ref, s1, s2 = b.vecs(b.nq), b.vecs(b.nq), b.vecs(b.nq)
	b.scanReset(name, inf, ref, s1, s2)
	return ref, s1, s2
}

// scanReset empties a scan: ref = ±∞ (name and value), the sums 0.
func (a *aftKit) scanReset(name string, inf float32, ref, s1, s2 []reg.VecVirtual) {
	for q := range ref {
		a.c.VBROADCASTSS(a.f.ConstF32(name, inf), ref[q])
		a.zero(s1[q])
		a.zero(s2[q])
	}
}

// keyScanAdd adds the key at byte offset ko to the block's running scan
// (r, sa, sb).
func (b *aftBlock) keyScanAdd(kb, vb, ko reg.GPVirtual, r, sa, sb []reg.VecVirtual) {
	c, mask := b.c, b.mask
	for q := range r {
		qq := b.q0 + q
		x := b.get(b.at(kb, ko, qq), qq, mask)
		newer := b.less(r[q], x)
		old, ex := b.scanStep(x, r[q], newer)
		c.VMAXPS(x, r[q], r[q])
		c.VMULPS(old, sa[q], sa[q])
		c.VFMADD231PS(b.src(b.at(vb, ko, qq), qq, mask), ex, sa[q])
		c.VFMADD213PS(ex, old, sb[q])
	}
}

// aftRowIn holds the bases of the backward's row inputs m, rd, dz, z.
type aftRowIn struct{ m, rd, dz, z reg.GPVirtual }

// rowInputs loads the bases of the backward's row inputs.
func (a *aftKit) rowInputs() aftRowIn {
	return aftRowIn{m: a.param("m"), rd: a.param("rd"), dz: a.param("dz"), z: a.param("z")}
}

// rowScanAdd adds the row at byte offset io to the block's backward scan
// (mu, r1, r2).
func (b *aftBlock) rowScanAdd(in aftRowIn, io reg.GPVirtual, mu, r1, r2 []reg.VecVirtual) {
	c, mask := b.c, b.mask
	for q := range mu {
		qq := b.q0 + q
		mi := b.get(b.at(in.m, io, qq), qq, mask)
		newer := b.less(mi, mu[q])
		old, ex := b.scanStep(mi, mu[q], newer)
		c.VMINPS(mi, mu[q], mu[q])
		bz := b.get(b.at(in.dz, io, qq), qq, mask)
		c.VMULPS(b.src(b.at(in.rd, io, qq), qq, mask), bz, bz) // rd_i·dz_i
		c.VMULPS(bz, ex, ex)
		c.VFMADD213PS(ex, old, r1[q])
		c.VMULPS(b.src(b.at(in.z, io, qq), qq, mask), ex, ex)
		c.VFMADD213PS(ex, old, r2[q])
	}
}

// shifted emits add(off), off the byte offset of the key (row) x + lag
// (x at byte offset xo), guarded by 0 ≤ x + lag < t: lag < 0 checks
// x ≥ −lag, lag > 0 checks x + lag < t, lag 0 needs no check. skip names
// the label jumped to when the guard fails.
func (a *aftKit) shifted(x, xo, t reg.GPVirtual, lag int, skip string, add func(off reg.GPVirtual)) {
	c := a.c
	lSkip := a.lbl(skip)
	off := c.GP64()
	switch {
	case lag < 0:
		c.CMPQ(x, synImm(-lag))
		c.JB(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: xo, Disp: lag * a.d4}, off)
	case lag > 0:
		xl := c.GP64()
		c.LEAQ(operand.Mem{Base: x, Disp: lag}, xl)
		c.CMPQ(xl, t)
		c.JAE(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: xo, Disp: lag * a.d4}, off)
	default:
		c.MOVQ(xo, off)
	}
	add(off)
	if lag != 0 {
		a.label(lSkip)
	}
}

// overAll emits a loop over all t keys (rows): body gets the byte offset
// of each, in order; name labels the loop.
func (a *aftKit) overAll(t reg.GPVirtual, name string, body func(off reg.GPVirtual)) {
	c := a.c
	off, cnt := c.GP64(), c.GP64()
	c.XORQ(off, off)
	c.MOVQ(t, cnt)
	l := a.lbl(name)
	a.label(l)
	body(off)
	c.ADDQ(synImm(a.d4), off)
	c.DECQ(cnt)
	c.JNZ(synRef(l))
}

// sweep emits the forward sweep x = 0 … t − 1: body gets x and its byte
// offset; wrow, unless nil, advances by a row of w with them. name labels
// the loop.
func (a *aftKit) sweep(t reg.GPVirtual, name string, wrow reg.GPVirtual, body func(x, xo reg.GPVirtual)) {
	c := a.c
	x, xo := c.GP64(), c.GP64()
	c.XORQ(x, x)
	c.XORQ(xo, xo)
	l := a.lbl(name)
	a.label(l)
	body(x, xo)
	c.ADDQ(synImm(a.d4), xo)
	if wrow != nil {
		c.ADDQ(synImm(4*a.cfg.N), wrow)
	}
	c.INCQ(x)
	c.CMPQ(x, t)
	c.JB(synRef(l))
}

// sweepBack emits the reverse sweep x = t − 1 … 0: body gets x and its
// byte offset; name labels the loop.
func (a *aftKit) sweepBack(t reg.GPVirtual, name string, body func(x, xo reg.GPVirtual)) {
	c := a.c
	x, xo := c.GP64(), c.GP64()
	c.MOVQ(t, x)
	c.DECQ(x)
	c.IMUL3Q(synImm(a.d4), x, xo)
	l := a.lbl(name)
	a.label(l)
	body(x, xo)
	c.SUBQ(synImm(a.d4), xo)
	c.DECQ(x)
	c.JGE(synRef(l))
}

// windowLo sets lo = max(x − S + 1, 0), the first key (row) of the window
// around x (aft_full: 0); name labels the clamp.
func (a *aftKit) windowLo(x, lo reg.GPVirtual, name string) {
	c := a.c
	if a.mode == aftModeFull {
		c.XORQ(lo, lo)
		return
	}
	lPos := a.lbl(name)
	c.MOVQ(x, lo)
	c.SUBQ(synImm(a.op.Window-1), lo)
	c.JGE(synRef(lPos))
	c.XORQ(lo, lo)
	a.label(lPos)
}

// windowAround sets lo and cnt to the unmasked window around x, the keys
// (rows) lo … lo + cnt − 1 with lo = max(x − S + 1, 0) and
// lo + cnt = min(x + S, t) (aft_full: all t); loName and hiName label the
// clamps.
func (a *aftKit) windowAround(x, t, lo, cnt reg.GPVirtual, loName, hiName string) {
	c := a.c
	a.windowLo(x, lo, loName)
	if a.mode == aftModeFull {
		c.MOVQ(t, cnt)
		return
	}
	lEnd := a.lbl(hiName)
	c.LEAQ(operand.Mem{Base: x, Disp: a.op.Window}, cnt)
	c.CMPQ(cnt, t)
	c.JBE(synRef(lEnd))
	c.MOVQ(t, cnt)
	a.label(lEnd)
	c.SUBQ(lo, cnt)
}

// windowMax raises mx to the window's keys k_j + b_ij: cnt keys from byte
// offset jo, their biases from bp in steps of bstep bytes. It leaves jo,
// bp and cnt as they are.
func (b *aftBlock) windowMax(kb, jo, bp, cnt reg.GPVirtual, bstep int, mx []reg.VecVirtual) {
	c := b.c
	jj, pp, nn := c.GP64(), c.GP64(), c.GP64()
	c.MOVQ(jo, jj)
	c.MOVQ(bp, pp)
	c.MOVQ(cnt, nn)
	b.windowKeys("max", jj, pp, nn, bstep, func(bw reg.VecVirtual, q, qq int) {
		e := b.vec()
		c.VADDPS(b.src(b.at(kb, jj, qq), qq, b.mask), bw, e)
		c.VMAXPS(e, mx[q], mx[q])
	})
}

// windowSum adds the window's keys (as windowMax's) to num and den,
// shifted by the row maximum mx; it consumes jo, bp and cnt.
func (b *aftBlock) windowSum(kb, vb, jo, bp, cnt reg.GPVirtual, bstep int, mx, num, den []reg.VecVirtual) {
	c := b.c
	b.windowKeys("sum", jo, bp, cnt, bstep, func(bw reg.VecVirtual, q, qq int) {
		x := b.vec()
		c.VADDPS(b.src(b.at(kb, jo, qq), qq, b.mask), bw, x)
		c.VSUBPS(mx[q], x, x)
		e := b.exp(x)
		c.VFMADD231PS(b.src(b.at(vb, jo, qq), qq, b.mask), e, num[q])
		c.VADDPS(e, den[q], den[q])
	})
}

// windowKeys emits a loop over cnt window keys from byte offset jo, their
// biases from bp in steps of bstep bytes: body(bw, q, qq) for each head
// vector of the block, bw the key's bias broadcast; name labels the loop.
// It consumes jo, bp and cnt.
func (b *aftBlock) windowKeys(name string, jo, bp, cnt reg.GPVirtual, bstep int, body func(bw reg.VecVirtual, q, qq int)) {
	c := b.c
	l := b.lbl(name)
	b.label(l)
	bw := b.vec()
	c.VBROADCASTSS(operand.Mem{Base: bp}, bw)
	for q := range b.nq {
		body(bw, q, b.q0+q)
	}
	c.ADDQ(synImm(b.d4), jo)
	c.ADDQ(synImm(bstep), bp)
	c.DECQ(cnt)
	c.JNZ(synRef(l))
}

// aftOut holds the bases of the forward's outputs z, m, rd.
type aftOut struct{ z, m, rd reg.GPVirtual }

// outputs loads the bases of the forward's outputs.
func (a *aftKit) outputs() aftOut {
	return aftOut{z: a.param("z"), m: a.param("m"), rd: a.param("rd")}
}

// putOut stores head vector qq of the row at byte offset io: z, m, rd.
func (b *aftBlock) putOut(o aftOut, io reg.GPVirtual, qq int, z, m, rd reg.VecVirtual) {
	b.put(z, b.at(o.z, io, qq), qq, b.mask)
	b.put(m, b.at(o.m, io, qq), qq, b.mask)
	b.put(rd, b.at(o.rd, io, qq), qq, b.mask)
}

// putRow stores the block's z, m, rd at the row at byte offset io.
func (b *aftBlock) putRow(o aftOut, io reg.GPVirtual, z, m, rd []reg.VecVirtual) {
	for q := range z {
		b.putOut(o, io, b.q0+q, z[q], m[q], rd[q])
	}
}

// storeRow stores the row at byte offset io from the sums num, den shifted
// by the row maximum mx: z = num/den, m = mx, rd = 1/den; in place (num
// and den become z and rd) unless keep.
func (b *aftBlock) storeRow(io reg.GPVirtual, num, mx, den []reg.VecVirtual, keep bool) {
	c := b.c
	o := b.outputs()
	for q := range num {
		one := b.splat("aft_one", 1)
		inv, z := den[q], num[q]
		if keep {
			inv, z = b.vec(), b.vec()
		}
		c.VDIVPS(den[q], one, inv)
		c.VMULPS(inv, num[q], z)
		b.putOut(o, io, b.q0+q, z, mx[q], inv)
	}
}

func (a *aftKit) fwdBlock(q0, q1 int) {
	if a.cfg.Bidirectional {
		a.fwdBlockBi(q0, q1)
		return
	}
	c, m, S, D4 := a.c, a.mode, a.op.Window, a.d4
	b := a.block(q0, q1, "")
	var r, sa, sb, mx, num, den []reg.VecVirtual
	if m.scan() {
		r, sa, sb = b.newScan("aft_ninf", aftNInf)
	}
	if m.window() {
		mx, num, den = a.vecs(b.nq), a.vecs(b.nq), a.vecs(b.nq)
	}
	t := a.gp(c.Param("t"))
	kb, vb := a.param("k"), a.param("v")
	var wrow reg.GPVirtual // row i of w
	if m == aftModeFull || m == aftModeLocal {
		wrow = a.param("w")
	}
	a.sweep(t, "row", wrow, func(i, io reg.GPVirtual) {
		if m.scan() {
			c.Comment("The key leaving the window (i − S; aft_simple: i) joins the scan.")
			lag := -S
			if m == aftModeSimple {
				lag = 0
			}
			a.shifted(i, io, t, lag, "noscan", func(ko reg.GPVirtual) { b.keyScanAdd(kb, vb, ko, r, sa, sb) })
		}
		if !m.window() {
			b.storeRow(io, sa, r, sb, true)
			return
		}
		// The window: keys j0 … i, j0 = max(i − S + 1, 0) (aft_full: 0).
		j0, cnt := c.GP64(), c.GP64()
		a.windowLo(i, j0, "j0")
		c.MOVQ(i, cnt)
		c.SUBQ(j0, cnt)
		c.INCQ(cnt)
		jo, bp := c.GP64(), c.GP64()
		c.IMUL3Q(synImm(D4), j0, jo)
		bstep := 4
		if m == aftModeConv {
			ub := a.param("u")
			c.LEAQ(operand.Mem{Base: ub, Index: cnt, Scale: 4, Disp: -4}, bp) // u[i − j0]
			bstep = -4
		} else {
			c.LEAQ(operand.Mem{Base: wrow, Index: j0, Scale: 4}, bp) // w[i·N + j0]
		}

		c.Comment("Pass 1: the row maximum, from the scan's and the window's keys.")
		for q := range b.nq {
			if m.scan() {
				c.VMOVAPS(r[q], mx[q])
			} else {
				c.VBROADCASTSS(a.f.ConstF32("aft_ninf", aftNInf), mx[q])
			}
		}
		b.windowMax(kb, jo, bp, cnt, bstep, mx)

		c.Comment("Pass 2: the sums of exp(k_j + b_ij − m).")
		for q := range b.nq {
			if m.scan() {
				x := a.vec()
				c.VSUBPS(mx[q], r[q], x)
				e := a.exp(x)
				c.VMULPS(e, sa[q], num[q])
				c.VMULPS(e, sb[q], den[q])
			} else {
				a.zero(num[q])
				a.zero(den[q])
			}
		}
		b.windowSum(kb, vb, jo, bp, cnt, bstep, mx, num, den)
		b.storeRow(io, num, mx, den, false)
	})
}

// aftKey holds key j's vectors in a backward block: k_j, v_j and their
// gradients.
type aftKey struct{ k, v, gk, gv []reg.VecVirtual }

// newKey allocates key j's vectors for the block.
func (b *aftBlock) newKey() aftKey {
	return aftKey{b.vecs(b.nq), b.vecs(b.nq), b.vecs(b.nq), b.vecs(b.nq)}
}

// loadKey loads key j (byte offset jo) and starts its gradients: from the
// row scan (mu, r1, r2) when the kernel has one, else 0.
func (b *aftBlock) loadKey(kb, vb, jo reg.GPVirtual, key aftKey, mu, r1, r2 []reg.VecVirtual) {
	c := b.c
	for q := range key.k {
		qq := b.q0 + q
		b.loadInto(b.at(kb, jo, qq), qq, b.mask, key.k[q])
		b.loadInto(b.at(vb, jo, qq), qq, b.mask, key.v[q])
		if !b.mode.scan() {
			b.zero(key.gk[q])
			b.zero(key.gv[q])
			continue
		}
		// gv = exp(k_j − μ)·r1, gk = exp(k_j − μ)·(v_j·r1 − r2).
		x := b.vec()
		c.VSUBPS(mu[q], key.k[q], x)
		e := b.exp(x) // exp(k_j − μ) ≤ 1
		c.VMULPS(e, r1[q], key.gv[q])
		d := b.vec()
		c.VMULPS(r1[q], key.v[q], d)
		c.VSUBPS(r2[q], d, d)
		c.VMULPS(d, e, key.gk[q])
	}
}

// storeKey stores key j's gradients (byte offset jo) to dk and dv.
func (b *aftBlock) storeKey(jo reg.GPVirtual, key aftKey) {
	dkb, dvb := b.param("dk"), b.param("dv")
	for q := range key.gk {
		qq := b.q0 + q
		b.put(key.gk[q], b.at(dkb, jo, qq), qq, b.mask)
		b.put(key.gv[q], b.at(dvb, jo, qq), qq, b.mask)
	}
}

// windowRows adds to key j's gradients those of the cnt rows from byte
// offset io whose window holds it, and the lane sum of each row's g_ij to
// the bias gradient at dbp (the bias at bp), both stepping by step bytes.
func (b *aftBlock) windowRows(in aftRowIn, io, bp, dbp, cnt reg.GPVirtual, step int, key aftKey) {
	c, mask := b.c, b.mask
	lWin := b.lbl("win")
	b.label(lWin)
	bw := b.vec()
	c.VBROADCASTSS(operand.Mem{Base: bp}, bw)
	var gs reg.VecVirtual
	for q := range key.k {
		qq := b.q0 + q
		x := b.vec()
		c.VADDPS(bw, key.k[q], x)
		c.VSUBPS(b.src(b.at(in.m, io, qq), qq, mask), x, x)
		if !b.full(qq) {
			b.clampNonPositive(x) // masked-off lanes: keep exp finite
		}
		p := b.exp(x)
		c.VMULPS(b.src(b.at(in.rd, io, qq), qq, mask), p, p)
		c.VMULPS(b.src(b.at(in.dz, io, qq), qq, mask), p, p) // p_ij·dz_i
		c.VADDPS(p, key.gv[q], key.gv[q])
		g := b.vec()
		c.VSUBPS(b.src(b.at(in.z, io, qq), qq, mask), key.v[q], g)
		c.VMULPS(p, g, g)
		c.VADDPS(g, key.gk[q], key.gk[q])
		if q == 0 {
			gs = g
		} else {
			c.VADDPS(g, gs, gs)
		}
	}
	h := b.hsum(gs)
	c.VADDSS(operand.Mem{Base: dbp}, h, h)
	c.VMOVSS(h, operand.Mem{Base: dbp})
	c.ADDQ(synImm(b.d4), io)
	c.ADDQ(synImm(step), bp)
	c.ADDQ(synImm(step), dbp)
	c.DECQ(cnt)
	c.JNZ(synRef(lWin))
}

func (a *aftKit) backBlock(q0, q1 int) {
	if a.cfg.Bidirectional {
		a.backBlockBi(q0, q1)
		return
	}
	c, m, S, N := a.c, a.mode, a.op.Window, a.cfg.N
	b := a.block(q0, q1, "")
	var mu, r1, r2 []reg.VecVirtual
	if m.scan() {
		mu, r1, r2 = b.newScan("aft_pinf", aftPInf)
	}
	key := b.newKey()
	t := a.gp(c.Param("t"))
	in := a.rowInputs()
	a.sweepBack(t, "key", func(j, jo reg.GPVirtual) {
		if m.scan() {
			c.Comment("The row j + S (aft_simple: j), the first to see key j without bias, joins the suffix sums.")
			lead := S
			if m == aftModeSimple {
				lead = 0
			}
			a.shifted(j, jo, t, lead, "noscan", func(io reg.GPVirtual) { b.rowScanAdd(in, io, mu, r1, r2) })
		}
		kb, vb := a.param("k"), a.param("v")
		b.loadKey(kb, vb, jo, key, mu, r1, r2)

		if m.window() {
			c.Comment("The rows j … min(j + S, t) − 1, whose window holds key j.")
			cnt, io, bp, dbp := c.GP64(), c.GP64(), c.GP64(), c.GP64()
			c.MOVQ(t, cnt)
			c.SUBQ(j, cnt)
			if m != aftModeFull {
				lMin := a.lbl("cnt")
				c.CMPQ(cnt, synImm(S))
				c.JLE(synRef(lMin))
				c.MOVQ(synImm(S), cnt)
				a.label(lMin)
			}
			c.MOVQ(jo, io)
			step := 4 * N
			if m == aftModeConv {
				a.c.Load(c.Param("u").Base(), bp)
				a.c.Load(c.Param("du").Base(), dbp)
				step = 4
			} else {
				off := c.GP64()
				c.IMUL3Q(synImm(4*(N+1)), j, off) // w[j·N + j]
				a.c.Load(c.Param("w").Base(), bp)
				a.c.Load(c.Param("dw").Base(), dbp)
				c.ADDQ(off, bp)
				c.ADDQ(off, dbp)
			}
			b.windowRows(in, io, bp, dbp, cnt, step, key)
		}
		b.storeKey(jo, key)
	})
}

// loadInto loads head vector q at m into dst.
func (a *aftKit) loadInto(m operand.Mem, q int, mask reg.Register, dst reg.VecVirtual) {
	if a.full(q) {
		a.loadM(m, nil, dst)
	} else {
		a.loadM(m, mask, dst)
	}
}
