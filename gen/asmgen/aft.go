package asmgen

import (
	"fmt"
	"math"
	"regexp"

	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/printer"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The attention-free kernels (kernels.AFT*Func) and causal linear attention
// (kernels.Linear*Func) at the AVX-512 and AVX2 levels. Formulas are on
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
// Linear: the DH×DH state does not fit in registers, so it is cut into
// tiles of P rows (the summed index) × one block of lanes; each tile is a
// pass over the sequence keeping its P×block state in registers and adding
// Σ_r γ_i[r]·X_i[r, :] into the output rows (the first pass of a lane block
// overwrites). Forward: rd first (a pass keeping z_i), then the tiles of
// y. Backward: the tiles of dfq (prefix, with z as an extra state row),
// dfk (suffix, with h as an extra row) and dv (suffix).
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

// aftKit is the toolbox of the attention-free emitters: synKit's masks,
// loads and reductions, the shared vector exp, and the head geometry.
type aftKit struct {
	*synKit
	ex   *simd // for exp
	op   catalog.Op
	cfg  catalog.Config
	mode aftMode
	regs int // vector registers this level may use
	nv   int // vectors per head row
	tail int // lanes of the last vector (V when it is full)
	d4   int // bytes per row of a [t, D] matrix

	linFixed int // linear attention: vector registers left outside a tile's state
}

func newAFTKit(f *File, op catalog.Op, isa kernels.ISA) *aftKit {
	a := &aftKit{synKit: newSynKit(f, Name(op, isa), isa), ex: newSIMD(f, isa), op: op, cfg: f.Config,
		mode: aftModeOf(op.Kind), regs: 16}
	if isa == kernels.AVX512 {
		a.regs = 32
	}
	a.nv = (a.cfg.DH + a.V - 1) / a.V
	a.tail = a.cfg.DH - (a.nv-1)*a.V
	a.d4 = 4 * a.cfg.D
	return a
}

// full reports whether head vector q has all its lanes.
func (a *aftKit) full(q int) bool { return q < a.nv-1 || a.tail == a.V }

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
	return operand.Mem{Base: base, Index: off, Scale: 1, Disp: 4 * a.V * q}
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

// constOp applies a two-operand instruction with a constant first operand:
// the embedded-broadcast form on AVX-512, a 32-byte constant on AVX2.
func (a *aftKit) constOp(zform, yform func(...operand.Op), name string, v float32, x, dst reg.Register) {
	m := a.ex.expConst(name, v)
	if a.avx512() {
		zform(m, x, dst)
	} else {
		yform(m, x, dst)
	}
}

var aftSignBit = math.Float32frombits(0x80000000)

// negAbs sets x = −|x|.
func (a *aftKit) negAbs(x reg.VecVirtual) {
	a.constOp(a.c.VORPS_BCST, a.c.VORPS, "aft_sign", aftSignBit, x, x)
}

// negate sets x = −x.
func (a *aftKit) negate(x reg.VecVirtual) {
	a.constOp(a.c.VXORPS_BCST, a.c.VXORPS, "aft_sign", aftSignBit, x, x)
}

// clampNonPositive sets x = min(x, 0).
func (a *aftKit) clampNonPositive(x reg.VecVirtual) {
	a.constOp(a.c.VMINPS_BCST, a.c.VMINPS, "aft_zero", 0, x, x)
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

// vecsN allocates n vector registers.
func (a *aftKit) vecsN(n int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, n)
	for i := range v {
		v[i] = a.vec()
	}
	return v
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
	ex = a.ex.exp(d) // exp(−|x − ref|) ≤ 1
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

func (a *aftKit) fwdBlock(q0, q1 int) {
	c, m, S, D4 := a.c, a.mode, a.op.Window, a.d4
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d).", q0*a.V, min(q1*a.V, a.cfg.DH))

	var r, sa, sb, mx, num, den []reg.VecVirtual
	if m.scan() {
		r, sa, sb = a.vecsN(nq), a.vecsN(nq), a.vecsN(nq)
		for q := range nq {
			c.VBROADCASTSS(a.f.ConstF32("aft_ninf", float32(math.Inf(-1))), r[q])
			a.zero(sa[q])
			a.zero(sb[q])
		}
	}
	if m.window() {
		mx, num, den = a.vecsN(nq), a.vecsN(nq), a.vecsN(nq)
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
		for q := range nq {
			qq := q0 + q
			x := a.get(a.at(kb, ko, qq), qq, mask)
			newer := a.less(r[q], x)
			old, ex := a.scanStep(x, r[q], newer)
			c.VMAXPS(x, r[q], r[q])
			c.VMULPS(old, sa[q], sa[q])
			c.VFMADD231PS(a.src(a.at(vb, ko, qq), qq, mask), ex, sa[q])
			c.VFMADD213PS(ex, old, sb[q])
		}
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
				e := a.ex.exp(x)
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
			e := a.ex.exp(x)
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

func (a *aftKit) backBlock(q0, q1 int) {
	c, m, S, D4, N := a.c, a.mode, a.op.Window, a.d4, a.cfg.N
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d).", q0*a.V, min(q1*a.V, a.cfg.DH))

	var mu, r1, r2 []reg.VecVirtual
	if m.scan() {
		mu, r1, r2 = a.vecsN(nq), a.vecsN(nq), a.vecsN(nq)
		for q := range nq {
			c.VBROADCASTSS(a.f.ConstF32("aft_pinf", float32(math.Inf(1))), mu[q])
			a.zero(r1[q])
			a.zero(r2[q])
		}
	}
	kj, vj, gk, gv := a.vecsN(nq), a.vecsN(nq), a.vecsN(nq), a.vecsN(nq)
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
		for q := range nq {
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
			e := a.ex.exp(x) // exp(k_j − μ) ≤ 1
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
			p := a.ex.exp(x)
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

// linTerm is one row of a linear-attention state tile: a regular row r
// (α_i[r] and γ_i[r] read from the α and γ matrices at column r) or the
// extra row (α_i = 1, γ_i = s_i for z; α_i = s_i, γ_i = 1 for h, with
// s_i = −(dy_i · y_i)).
type linTerm struct {
	r     int
	extra bool
}

// linSweep describes one product of linear attention: for every row i
// (in order, or reversed for a suffix sweep),
//
//	X_i[r, :] = Σ_{j≤i (≥i)} α_j[r] · β_j            (β_j scaled by rd_j if scaleBeta)
//	out_i     = Σ_r γ_i[r] · X_i[r, :]                (× rd_i if scaleOut)
//
// over the DH lanes of β and out, with the rows r = 0 … DH−1 and possibly
// an extra row.
type linSweep struct {
	alpha, beta, gamma, out string
	reverse                 bool
	scaleBeta, scaleOut     bool
	extra                   string // "", "z" or "h"
}

// emitLinear emits the causal linear-attention forward.
func emitLinear(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, fixed int) {
		a.linFixed = fixed
		a.linRD()
		a.linSweep(linSweep{alpha: "fk", beta: "v", gamma: "fq", out: "y", scaleOut: true})
		a.ret()
	}
	body(newAFTKit(f, op, isa), aftFit(f, op, isa, linBudgets(), body))
}

// emitLinearBack emits the causal linear-attention backward.
func emitLinearBack(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, fixed int) {
		a.linFixed = fixed
		a.linSweep(linSweep{alpha: "v", beta: "fk", gamma: "dy", out: "dfq", scaleOut: true, extra: "z"})
		a.linSweep(linSweep{alpha: "dy", beta: "fq", gamma: "v", out: "dfk", reverse: true, scaleBeta: true, extra: "h"})
		a.linSweep(linSweep{alpha: "fq", beta: "dy", gamma: "fk", out: "dv", reverse: true, scaleBeta: true})
		a.ret()
	}
	body(newAFTKit(f, op, isa), aftFit(f, op, isa, linBudgets(), body))
}

// linRD writes rd_i = 1/(fq_i · z_i + 1e-6), z_i = Σ_{j≤i} fk_j, in passes
// over blocks of the DH lanes (the partial dot products add up in rd).
func (a *aftKit) linRD() {
	c, D4, H4 := a.c, a.d4, 4*a.cfg.Heads
	bl := a.blocksOf(a.regs - 6)
	for bi, b := range bl {
		q0, q1 := b[0], b[1]
		first, last := bi == 0, bi == len(bl)-1
		mask := a.tailMask(q1)
		nq := q1 - q0
		c.Commentf("rd: lanes [%d, %d) of z_i and fq_i.", q0*a.V, min(q1*a.V, a.cfg.DH))
		zs := a.vecsN(nq)
		for q := range nq {
			a.zero(zs[q])
		}
		cnt := a.gp(c.Param("t"))
		fkb, fqb, rdb := a.gp(c.Param("fk").Base()), a.gp(c.Param("fq").Base()), a.gp(c.Param("rd").Base())
		io, ro := c.GP64(), c.GP64()
		c.XORQ(io, io)
		c.XORQ(ro, ro)
		l := a.lbl("rd")
		a.label(l)
		var p reg.VecVirtual
		for q := range nq {
			qq := q0 + q
			c.VADDPS(a.src(a.at(fkb, io, qq), qq, mask), zs[q], zs[q])
			if q == 0 {
				p = a.vec()
				c.VMULPS(a.src(a.at(fqb, io, qq), qq, mask), zs[q], p)
			} else {
				c.VFMADD231PS(a.src(a.at(fqb, io, qq), qq, mask), zs[q], p)
			}
		}
		h := a.hsum(p)
		dst := operand.Mem{Base: rdb, Index: ro, Scale: 1}
		if !first {
			c.VADDSS(dst, h, h)
		}
		if last {
			c.VADDSS(a.f.ConstF32("aft_eps", 1e-6), h, h)
			one := c.XMM()
			c.VMOVSS(a.f.ConstF32("aft_one", 1), one)
			c.VDIVSS(h, one, one)
			h = one
		}
		c.VMOVSS(h, dst)
		c.ADDQ(synImm(D4), io)
		c.ADDQ(synImm(H4), ro)
		c.DECQ(cnt)
		c.JNZ(synRef(l))
	}
}

// linBudgets are the registers a linear-attention tile leaves outside its
// state, most ambitious first.
func linBudgets() []int { return []int{5, 6, 7, 8, 10, 12} }

// linSweep emits one product, tiled as lane blocks of cbv vectors × groups
// of up to P state rows, one pass over the sequence per tile. The full lane
// blocks run in a loop (their bases shifted by a lane offset), the last,
// partial one after it; inside a lane block the first group (with the
// extra row, overwriting out) is followed by a loop over the groups of P
// rows (their α and γ columns shifted by a row offset) and a remainder
// group, so the code size does not grow with DH.
func (a *aftKit) linSweep(s linSweep) {
	c := a.c
	cbv := 1
	if a.avx512() && a.nv > 1 {
		cbv = 2
	}
	fullVecs := a.nv
	if a.tail < a.V {
		fullVecs--
	}
	nfull := fullVecs / cbv
	rest := a.nv - nfull*cbv
	switch {
	case nfull == 1:
		a.linBlock(s, 0, cbv, nil)
	case nfull > 1:
		lo := c.GP64()
		c.XORQ(lo, lo)
		l := a.lbl("lanes")
		a.label(l)
		a.linBlock(s, 0, cbv, lo)
		c.ADDQ(synImm(4*a.V*cbv), lo)
		c.CMPQ(lo, synImm(4*a.V*cbv*nfull))
		c.JB(synRef(l))
	}
	if rest > 0 {
		a.linBlock(s, nfull*cbv, rest, nil)
	}
}

// linBlock emits the tiles of the lane block of vectors [q0, q0+nq), its
// bases shifted by the byte offset in lo (nil: none).
func (a *aftKit) linBlock(s linSweep, q0, nq int, lo reg.GPVirtual) {
	c := a.c
	P := max(1, (a.regs-a.linFixed-nq)/nq)
	extra := s.extra != ""
	n0 := min(a.cfg.DH, P)
	if extra {
		n0 = min(a.cfg.DH, P-1)
	}
	a.linPass(s, q0, nq, lo, extra, 0, n0, nil, true)
	rem := a.cfg.DH - n0
	ng := rem / P
	switch {
	case ng == 1:
		a.linPass(s, q0, nq, lo, false, n0, P, nil, false)
	case ng > 1:
		ro := c.GP64()
		c.MOVQ(synImm(0), ro)
		l := a.lbl("rows")
		a.label(l)
		a.linPass(s, q0, nq, lo, false, n0, P, ro, false)
		c.ADDQ(synImm(4*P), ro)
		c.CMPQ(ro, synImm(4*P*ng))
		c.JB(synRef(l))
	}
	if r := rem - ng*P; r > 0 {
		a.linPass(s, q0, nq, lo, false, n0+ng*P, r, nil, false)
	}
}

// linPass emits one tile: state rows r0 … r0+nr−1 (shifted by the byte
// offset in ro when not nil), plus the extra row if extra; lane vectors
// [q0, q0+nq) (shifted by lo when not nil). The first tile of a lane block
// overwrites out, the others add to it.
func (a *aftKit) linPass(s linSweep, q0, nq int, lo reg.GPVirtual, extra bool, r0, nr int, ro reg.GPVirtual, first bool) {
	c, D4, H4 := a.c, a.d4, 4*a.cfg.Heads
	mask := a.tailMask(q0 + nq)
	var rows []linTerm
	if extra {
		rows = append(rows, linTerm{extra: true})
	}
	for r := r0; r < r0+nr; r++ {
		rows = append(rows, linTerm{r: r})
	}
	what := ""
	if lo != nil {
		what = " (+ lane offset)"
	}
	if ro != nil {
		what += " (+ row offset)"
	}
	c.Commentf("%s: lanes [%d, %d), state rows %s%s.", s.out, q0*a.V, min((q0+nq)*a.V, a.cfg.DH), linRows(rows), what)
	X := make([][]reg.VecVirtual, len(rows))
	for k := range rows {
		X[k] = a.vecsN(nq)
		for q := range nq {
			a.zero(X[k][q])
		}
	}
	shifted := func(name string, off reg.GPVirtual) reg.GPVirtual {
		b := a.gp(c.Param(name).Base())
		if off != nil {
			c.ADDQ(off, b)
		}
		return b
	}
	cnt := a.gp(c.Param("t"))
	ab, gb := shifted(s.alpha, ro), shifted(s.gamma, ro)
	bb, ob := shifted(s.beta, lo), shifted(s.out, lo)
	var rdb reg.GPVirtual
	if s.scaleBeta || s.scaleOut {
		rdb = a.gp(c.Param("rd").Base())
	}
	io, rdo := c.GP64(), c.GP64()
	if s.reverse {
		c.MOVQ(cnt, io)
		c.DECQ(io)
		c.IMUL3Q(synImm(H4), io, rdo)
		c.IMUL3Q(synImm(D4), io, io)
	} else {
		c.XORQ(io, io)
		c.XORQ(rdo, rdo)
	}
	l := a.lbl("lin")
	a.label(l)
	var rdv, sd reg.VecVirtual
	if rdb != nil {
		rdv = a.vec()
		c.VBROADCASTSS(operand.Mem{Base: rdb, Index: rdo, Scale: 1}, rdv)
	}
	if extra {
		// s_i = −(dy_i · y_i), over the whole head.
		dyb, yb := a.gp(c.Param("dy").Base()), a.gp(c.Param("y").Base())
		mk := a.tailMask(a.nv)
		var p reg.VecVirtual
		for q := range a.nv {
			x := a.get(a.at(dyb, io, q), q, mk)
			if q == 0 {
				p = x
				c.VMULPS(a.src(a.at(yb, io, q), q, mk), x, p)
			} else {
				c.VFMADD231PS(a.src(a.at(yb, io, q), q, mk), x, p)
			}
		}
		h := a.hsum(p)
		sd = a.vec()
		c.VBROADCASTSS(h, sd)
		a.negate(sd)
	}
	beta := make([]reg.VecVirtual, nq)
	for q := range nq {
		qq := q0 + q
		beta[q] = a.get(a.at(bb, io, qq), qq, mask)
		if s.scaleBeta {
			c.VMULPS(rdv, beta[q], beta[q])
		}
	}
	// State update: X[r] += α_i[r]·β_i.
	for k, row := range rows {
		switch {
		case row.extra && s.extra == "z":
			for q := range nq {
				c.VADDPS(beta[q], X[k][q], X[k][q])
			}
		case row.extra:
			for q := range nq {
				c.VFMADD231PS(sd, beta[q], X[k][q])
			}
		default:
			am := operand.Mem{Base: ab, Index: io, Scale: 1, Disp: 4 * row.r}
			if a.avx512() {
				for q := range nq {
					c.VFMADD231PS_BCST(am, beta[q], X[k][q])
				}
			} else {
				al := a.vec()
				c.VBROADCASTSS(am, al)
				for q := range nq {
					c.VFMADD231PS(al, beta[q], X[k][q])
				}
			}
		}
	}
	// Output: Σ_r γ_i[r]·X[r].
	acc := a.vecsN(nq)
	for k, row := range rows {
		switch {
		case row.extra && s.extra == "z":
			for q := range nq {
				if k == 0 {
					c.VMULPS(sd, X[k][q], acc[q])
				} else {
					c.VFMADD231PS(sd, X[k][q], acc[q])
				}
			}
		case row.extra:
			for q := range nq {
				if k == 0 {
					c.VMOVAPS(X[k][q], acc[q])
				} else {
					c.VADDPS(X[k][q], acc[q], acc[q])
				}
			}
		default:
			gm := operand.Mem{Base: gb, Index: io, Scale: 1, Disp: 4 * row.r}
			if a.avx512() {
				for q := range nq {
					if k == 0 {
						c.VMULPS_BCST(gm, X[k][q], acc[q])
					} else {
						c.VFMADD231PS_BCST(gm, X[k][q], acc[q])
					}
				}
			} else {
				gl := a.vec()
				c.VBROADCASTSS(gm, gl)
				for q := range nq {
					if k == 0 {
						c.VMULPS(gl, X[k][q], acc[q])
					} else {
						c.VFMADD231PS(gl, X[k][q], acc[q])
					}
				}
			}
		}
	}
	for q := range nq {
		qq := q0 + q
		if s.scaleOut {
			c.VMULPS(rdv, acc[q], acc[q])
		}
		om := a.at(ob, io, qq)
		if !first {
			c.VADDPS(a.src(om, qq, mask), acc[q], acc[q])
		}
		a.put(acc[q], om, qq, mask)
	}
	if s.reverse {
		c.SUBQ(synImm(D4), io)
		c.SUBQ(synImm(H4), rdo)
	} else {
		c.ADDQ(synImm(D4), io)
		c.ADDQ(synImm(H4), rdo)
	}
	c.DECQ(cnt)
	c.JNZ(synRef(l))
}

// linRows describes a tile's state rows for the comments.
func linRows(rows []linTerm) string {
	s := ""
	lo := -1
	for _, r := range rows {
		if r.extra {
			s += "extra "
			continue
		}
		if lo < 0 {
			lo = r.r
		}
	}
	if lo >= 0 {
		s += fmt.Sprintf("[%d, %d]", lo, rows[len(rows)-1].r)
	}
	return s
}
