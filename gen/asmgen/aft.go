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

// emitAFT emits an AFT forward: AFTFull, AFTLocal, AFTConv or AFTSimple,
// in channel blocks of as many vectors as the registers hold.
func emitAFT(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, nb int) {
		for _, b := range a.blocksOf(nb) {
			a.fwdBlock(b[0], b[1])
		}
		a.ret()
	}
	a := newAFTKit(f, op, isa)
	per := 3 // mx, num, den or r, sa, sb
	if a.mode == aftModeLocal || a.mode == aftModeConv {
		per = 6
	}
	body(a, aftFit(f, op, isa, aftDescending(min(a.nv, (a.regs-6)/per), 1), body))
}

// keyScanAdd adds the key at byte offset ko to the running scan (r, sa, sb)
// of the block's vectors from q0.
func (a *aftKit) keyScanAdd(kb, vb, ko reg.GPVirtual, q0 int, mask reg.Register, r, sa, sb []reg.VecVirtual) {
	c := a.c
	for q := range r {
		qq := q0 + q
		x := a.get(a.at(kb, ko, qq), qq, mask)
		newer := a.less(r[q], x)
		old, ex := a.scanStep(x, r[q], newer)
		c.VMAXPS(x, r[q], r[q])
		c.VMULPS(old, sa[q], sa[q])
		c.VFMADD231PS(a.src(a.at(vb, ko, qq), qq, mask), ex, sa[q])
		c.VFMADD213PS(ex, old, sb[q])
	}
}

// scanReset empties a scan: ref = ±∞ (name and value), the sums 0.
func (a *aftKit) scanReset(name string, inf float32, ref, s1, s2 []reg.VecVirtual) {
	for q := range ref {
		a.c.VBROADCASTSS(a.f.ConstF32(name, inf), ref[q])
		a.zero(s1[q])
		a.zero(s2[q])
	}
}

func (a *aftKit) fwdBlock(q0, q1 int) {
	if a.cfg.Bidirectional {
		a.fwdBlockBi(q0, q1)
		return
	}
	c, m, S, D4 := a.c, a.mode, a.op.Window, a.d4
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d).", q0*a.W, min(q1*a.W, a.cfg.DH))

	var r, sa, sb, mx, num, den []reg.VecVirtual
	if m.scan() {
		r, sa, sb = a.vecs(nq), a.vecs(nq), a.vecs(nq)
		for q := range nq {
			c.VBROADCASTSS(a.f.ConstF32("aft_ninf", float32(math.Inf(-1))), r[q])
			a.zero(sa[q])
			a.zero(sb[q])
		}
	}
	if m.window() {
		mx, num, den = a.vecs(nq), a.vecs(nq), a.vecs(nq)
	}
	t := a.gp(c.Param("t"))
	kb := a.gp(c.Param("k").Base())
	vb := a.gp(c.Param("v").Base())
	var wrow reg.GPVirtual // row i of w
	if m == aftModeFull || m == aftModeLocal {
		wrow = a.gp(c.Param("w").Base())
	}
	i, io := c.GP64(), c.GP64() // row and its byte offset i·D·4
	c.XORQ(i, i)
	c.XORQ(io, io)

	lRow := a.lbl("row")
	a.label(lRow)
	if m.scan() {
		c.Comment("The key leaving the window (i − S; aft_simple: i) joins the scan.")
		lSkip := a.lbl("noscan")
		ko := c.GP64()
		if m != aftModeSimple {
			c.CMPQ(i, synImm(S))
			c.JB(synRef(lSkip))
			c.LEAQ(operand.Mem{Base: io, Disp: -S * D4}, ko)
		} else {
			c.MOVQ(io, ko)
		}
		a.keyScanAdd(kb, vb, ko, q0, mask, r, sa, sb)
		if m != aftModeSimple {
			a.label(lSkip)
		}
	}

	if !m.window() {
		zb, mb, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
		for q := range nq {
			qq := q0 + q
			one := a.splat("aft_one", 1)
			inv, zz := a.vec(), a.vec()
			c.VDIVPS(sb[q], one, inv)
			c.VMULPS(inv, sa[q], zz)
			a.put(zz, a.at(zb, io, qq), qq, mask)
			a.put(r[q], a.at(mb, io, qq), qq, mask)
			a.put(inv, a.at(rdb, io, qq), qq, mask)
		}
	} else {
		// The window: keys j0 … i, j0 = max(i − S + 1, 0) (aft_full: 0).
		j0, cnt := c.GP64(), c.GP64()
		if m == aftModeFull {
			c.XORQ(j0, j0)
		} else {
			lPos := a.lbl("j0")
			c.MOVQ(i, j0)
			c.SUBQ(synImm(S-1), j0)
			c.JGE(synRef(lPos))
			c.XORQ(j0, j0)
			a.label(lPos)
		}
		c.MOVQ(i, cnt)
		c.SUBQ(j0, cnt)
		c.INCQ(cnt)
		jo, bp := c.GP64(), c.GP64()
		c.IMUL3Q(synImm(D4), j0, jo)
		bstep := 4
		if m == aftModeConv {
			ub := a.gp(c.Param("u").Base())
			c.LEAQ(operand.Mem{Base: ub, Index: cnt, Scale: 4, Disp: -4}, bp) // u[i − j0]
			bstep = -4
		} else {
			c.LEAQ(operand.Mem{Base: wrow, Index: j0, Scale: 4}, bp) // w[i·N + j0]
		}

		c.Comment("Pass 1: the row maximum, from the scan's and the window's keys.")
		for q := range nq {
			if m.scan() {
				c.VMOVAPS(r[q], mx[q])
			} else {
				c.VBROADCASTSS(a.f.ConstF32("aft_ninf", float32(math.Inf(-1))), mx[q])
			}
		}
		jj, pp, nn := c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(jo, jj)
		c.MOVQ(bp, pp)
		c.MOVQ(cnt, nn)
		lMax := a.lbl("max")
		a.label(lMax)
		bw := a.vec()
		c.VBROADCASTSS(operand.Mem{Base: pp}, bw)
		for q := range nq {
			qq := q0 + q
			e := a.vec()
			c.VADDPS(a.src(a.at(kb, jj, qq), qq, mask), bw, e)
			c.VMAXPS(e, mx[q], mx[q])
		}
		c.ADDQ(synImm(D4), jj)
		c.ADDQ(synImm(bstep), pp)
		c.DECQ(nn)
		c.JNZ(synRef(lMax))

		c.Comment("Pass 2: the sums of exp(k_j + b_ij − m).")
		for q := range nq {
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
		lSum := a.lbl("sum")
		a.label(lSum)
		bw2 := a.vec()
		c.VBROADCASTSS(operand.Mem{Base: bp}, bw2)
		for q := range nq {
			qq := q0 + q
			x := a.vec()
			c.VADDPS(a.src(a.at(kb, jo, qq), qq, mask), bw2, x)
			c.VSUBPS(mx[q], x, x)
			e := a.exp(x)
			c.VFMADD231PS(a.src(a.at(vb, jo, qq), qq, mask), e, num[q])
			c.VADDPS(e, den[q], den[q])
		}
		c.ADDQ(synImm(D4), jo)
		c.ADDQ(synImm(bstep), bp)
		c.DECQ(cnt)
		c.JNZ(synRef(lSum))

		zb, mb, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
		for q := range nq {
			qq := q0 + q
			one := a.splat("aft_one", 1)
			c.VDIVPS(den[q], one, den[q])
			c.VMULPS(den[q], num[q], num[q])
			a.put(num[q], a.at(zb, io, qq), qq, mask)
			a.put(mx[q], a.at(mb, io, qq), qq, mask)
			a.put(den[q], a.at(rdb, io, qq), qq, mask)
		}
	}
	c.ADDQ(synImm(D4), io)
	if wrow != nil {
		c.ADDQ(synImm(4*a.cfg.N), wrow)
	}
	c.INCQ(i)
	c.CMPQ(i, t)
	c.JB(synRef(lRow))
}

// emitAFTBack emits an AFT backward: AFTFullBack, AFTLocalBack,
// AFTConvBack or AFTSimpleBack, in channel blocks of as many vectors as the
// registers hold.
func emitAFTBack(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, nb int) {
		for _, b := range a.blocksOf(nb) {
			a.backBlock(b[0], b[1])
		}
		a.ret()
	}
	a := newAFTKit(f, op, isa)
	per := 7 // mu, r1, r2, k_j, v_j, dk_j, dv_j
	if a.mode == aftModeFull {
		per = 4
	}
	body(a, aftFit(f, op, isa, aftDescending(min(a.nv, (a.regs-6)/per), 1), body))
}

// rowScanAdd adds the row at byte offset io to the backward's scan
// (mu, r1, r2) of the block's vectors from q0.
func (a *aftKit) rowScanAdd(mb, rdb, dzb, zb, io reg.GPVirtual, q0 int, mask reg.Register, mu, r1, r2 []reg.VecVirtual) {
	c := a.c
	for q := range mu {
		qq := q0 + q
		mi := a.get(a.at(mb, io, qq), qq, mask)
		newer := a.less(mi, mu[q])
		old, ex := a.scanStep(mi, mu[q], newer)
		c.VMINPS(mi, mu[q], mu[q])
		bz := a.get(a.at(dzb, io, qq), qq, mask)
		c.VMULPS(a.src(a.at(rdb, io, qq), qq, mask), bz, bz) // rd_i·dz_i
		c.VMULPS(bz, ex, ex)
		c.VFMADD213PS(ex, old, r1[q])
		c.VMULPS(a.src(a.at(zb, io, qq), qq, mask), ex, ex)
		c.VFMADD213PS(ex, old, r2[q])
	}
}

func (a *aftKit) backBlock(q0, q1 int) {
	if a.cfg.Bidirectional {
		a.backBlockBi(q0, q1)
		return
	}
	c, m, S, D4, N := a.c, a.mode, a.op.Window, a.d4, a.cfg.N
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d).", q0*a.W, min(q1*a.W, a.cfg.DH))

	var mu, r1, r2 []reg.VecVirtual
	if m.scan() {
		mu, r1, r2 = a.vecs(nq), a.vecs(nq), a.vecs(nq)
		for q := range nq {
			c.VBROADCASTSS(a.f.ConstF32("aft_pinf", float32(math.Inf(1))), mu[q])
			a.zero(r1[q])
			a.zero(r2[q])
		}
	}
	kj, vj, gk, gv := a.vecs(nq), a.vecs(nq), a.vecs(nq), a.vecs(nq)
	t := a.gp(c.Param("t"))
	mb, rdb := a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
	dzb, zb := a.gp(c.Param("dz").Base()), a.gp(c.Param("z").Base())
	j, jo := c.GP64(), c.GP64()
	c.MOVQ(t, j)
	c.DECQ(j)
	c.IMUL3Q(synImm(D4), j, jo)

	lKey := a.lbl("key")
	a.label(lKey)
	if m.scan() {
		c.Comment("The row j + S (aft_simple: j), the first to see key j without bias, joins the suffix sums.")
		lSkip := a.lbl("noscan")
		io := c.GP64()
		if m != aftModeSimple {
			ii := c.GP64()
			c.LEAQ(operand.Mem{Base: j, Disp: S}, ii)
			c.CMPQ(ii, t)
			c.JAE(synRef(lSkip))
			c.LEAQ(operand.Mem{Base: jo, Disp: S * D4}, io)
		} else {
			c.MOVQ(jo, io)
		}
		a.rowScanAdd(mb, rdb, dzb, zb, io, q0, mask, mu, r1, r2)
		if m != aftModeSimple {
			a.label(lSkip)
		}
	}

	kb, vb := a.gp(c.Param("k").Base()), a.gp(c.Param("v").Base())
	for q := range nq {
		qq := q0 + q
		a.loadInto(a.at(kb, jo, qq), qq, mask, kj[q])
		a.loadInto(a.at(vb, jo, qq), qq, mask, vj[q])
		if m.scan() {
			x := a.vec()
			c.VSUBPS(mu[q], kj[q], x)
			e := a.exp(x) // exp(k_j − μ) ≤ 1
			c.VMULPS(e, r1[q], gv[q])
			d := a.vec()
			c.VMULPS(r1[q], vj[q], d)
			c.VSUBPS(r2[q], d, d)
			c.VMULPS(d, e, gk[q])
		} else {
			a.zero(gk[q])
			a.zero(gv[q])
		}
	}

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
		lWin := a.lbl("win")
		a.label(lWin)
		bw := a.vec()
		c.VBROADCASTSS(operand.Mem{Base: bp}, bw)
		var gs reg.VecVirtual
		for q := range nq {
			qq := q0 + q
			x := a.vec()
			c.VADDPS(bw, kj[q], x)
			c.VSUBPS(a.src(a.at(mb, io, qq), qq, mask), x, x)
			if !a.full(qq) {
				a.clampNonPositive(x) // masked-off lanes: keep exp finite
			}
			p := a.exp(x)
			c.VMULPS(a.src(a.at(rdb, io, qq), qq, mask), p, p)
			c.VMULPS(a.src(a.at(dzb, io, qq), qq, mask), p, p) // p_ij·dz_i
			c.VADDPS(p, gv[q], gv[q])
			g := a.vec()
			c.VSUBPS(a.src(a.at(zb, io, qq), qq, mask), vj[q], g)
			c.VMULPS(p, g, g)
			c.VADDPS(g, gk[q], gk[q])
			if q == 0 {
				gs = g
			} else {
				c.VADDPS(g, gs, gs)
			}
		}
		h := a.hsum(gs)
		c.VADDSS(operand.Mem{Base: dbp}, h, h)
		c.VMOVSS(h, operand.Mem{Base: dbp})
		c.ADDQ(synImm(D4), io)
		c.ADDQ(synImm(step), bp)
		c.ADDQ(synImm(step), dbp)
		c.DECQ(cnt)
		c.JNZ(synRef(lWin))
	}

	dkb, dvb := a.gp(c.Param("dk").Base()), a.gp(c.Param("dv").Base())
	for q := range nq {
		qq := q0 + q
		a.put(gk[q], a.at(dkb, jo, qq), qq, mask)
		a.put(gv[q], a.at(dvb, jo, qq), qq, mask)
	}
	c.SUBQ(synImm(D4), jo)
	c.DECQ(j)
	c.JGE(synRef(lKey))
}

// loadInto loads head vector q at m into dst.
func (a *aftKit) loadInto(m operand.Mem, q int, mask reg.Register, dst reg.VecVirtual) {
	if a.full(q) {
		a.loadM(m, nil, dst)
	} else {
		a.loadM(m, mask, dst)
	}
}
