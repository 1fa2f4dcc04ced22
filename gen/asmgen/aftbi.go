package asmgen

import (
	"math"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The unmasked (bidirectional) AFT kernels' channel blocks; the algorithms
// are those of gen/gogen/aftbi.go, see aft.go's overview.

// fwdBlockBi is fwdBlock for a bidirectional spec: every row sees every
// key j < t.
func (a *aftKit) fwdBlockBi(q0, q1 int) {
	c, m, S, D4 := a.c, a.mode, a.op.Window, a.d4
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d), unmasked.", q0*a.W, min(q1*a.W, a.cfg.DH))
	ninf := float32(math.Inf(-1))

	t := a.gp(c.Param("t"))
	kb := a.gp(c.Param("k").Base())
	vb := a.gp(c.Param("v").Base())
	var r, sa, sb []reg.VecVirtual
	if m.scan() {
		r, sa, sb = a.vecs(nq), a.vecs(nq), a.vecs(nq)
		a.scanReset("aft_ninf", ninf, r, sa, sb)
	}

	if m == aftModeSimple {
		c.Comment("One scan over all the keys.")
		jo, cnt := c.GP64(), c.GP64()
		c.XORQ(jo, jo)
		c.MOVQ(t, cnt)
		lKey := a.lbl("keys")
		a.label(lKey)
		a.keyScanAdd(kb, vb, jo, q0, mask, r, sa, sb)
		c.ADDQ(synImm(D4), jo)
		c.DECQ(cnt)
		c.JNZ(synRef(lKey))
		c.Comment("Every row gets its result.")
		for q := range nq {
			one := a.splat("aft_one", 1)
			c.VDIVPS(sb[q], one, sb[q])
			c.VMULPS(sb[q], sa[q], sa[q])
		}
		zb, mb, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
		io, cnt2 := c.GP64(), c.GP64()
		c.XORQ(io, io)
		c.MOVQ(t, cnt2)
		lRow := a.lbl("rows")
		a.label(lRow)
		for q := range nq {
			qq := q0 + q
			a.put(sa[q], a.at(zb, io, qq), qq, mask)
			a.put(r[q], a.at(mb, io, qq), qq, mask)
			a.put(sb[q], a.at(rdb, io, qq), qq, mask)
		}
		c.ADDQ(synImm(D4), io)
		c.DECQ(cnt2)
		c.JNZ(synRef(lRow))
		return
	}

	if m.scan() {
		c.Comment("Reverse sweep: the suffix scan over the keys j ≥ i + S, parked in row i (r in m, sa in z, sb in rd).")
		i, io := c.GP64(), c.GP64()
		c.MOVQ(t, i)
		c.DECQ(i)
		c.IMUL3Q(synImm(D4), i, io)
		lRev := a.lbl("suffix")
		a.label(lRev)
		lSkip := a.lbl("nosuffix")
		ii, ko := c.GP64(), c.GP64()
		c.LEAQ(operand.Mem{Base: i, Disp: S}, ii)
		c.CMPQ(ii, t)
		c.JAE(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: io, Disp: S * D4}, ko)
		a.keyScanAdd(kb, vb, ko, q0, mask, r, sa, sb)
		a.label(lSkip)
		zb, mb, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
		for q := range nq {
			qq := q0 + q
			a.put(sa[q], a.at(zb, io, qq), qq, mask)
			a.put(r[q], a.at(mb, io, qq), qq, mask)
			a.put(sb[q], a.at(rdb, io, qq), qq, mask)
		}
		c.SUBQ(synImm(D4), io)
		c.DECQ(i)
		c.JGE(synRef(lRev))
		c.Comment("Forward sweep: the prefix scan over the keys j ≤ i − S.")
		a.scanReset("aft_ninf", ninf, r, sa, sb)
	}

	mx, num, den := a.vecs(nq), a.vecs(nq), a.vecs(nq)
	var wrow reg.GPVirtual // row i of w
	if m == aftModeFull || m == aftModeLocal {
		wrow = a.gp(c.Param("w").Base())
	}
	i, io := c.GP64(), c.GP64()
	c.XORQ(i, i)
	c.XORQ(io, io)
	lRow := a.lbl("row")
	a.label(lRow)
	if m.scan() {
		c.Comment("The key i − S, which leaves the window at row i, joins the prefix scan.")
		lSkip := a.lbl("noprefix")
		ko := c.GP64()
		c.CMPQ(i, synImm(S))
		c.JB(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: io, Disp: -S * D4}, ko)
		a.keyScanAdd(kb, vb, ko, q0, mask, r, sa, sb)
		a.label(lSkip)
	}

	// The window: keys j0 … j1 − 1, j0 = max(i − S + 1, 0), j1 = min(i + S, t)
	// (aft_full: 0 … t − 1).
	j0, cnt := c.GP64(), c.GP64()
	if m == aftModeFull {
		c.XORQ(j0, j0)
		c.MOVQ(t, cnt)
	} else {
		lPos := a.lbl("j0")
		c.MOVQ(i, j0)
		c.SUBQ(synImm(S-1), j0)
		c.JGE(synRef(lPos))
		c.XORQ(j0, j0)
		a.label(lPos)
		lEnd := a.lbl("j1")
		c.LEAQ(operand.Mem{Base: i, Disp: S}, cnt)
		c.CMPQ(cnt, t)
		c.JBE(synRef(lEnd))
		c.MOVQ(t, cnt)
		a.label(lEnd)
		c.SUBQ(j0, cnt)
	}
	jo, bp := c.GP64(), c.GP64()
	c.IMUL3Q(synImm(D4), j0, jo)
	bstep := 4
	if m == aftModeConv {
		ub, x := a.gp(c.Param("u").Base()), c.GP64()
		c.MOVQ(i, x)
		c.SUBQ(j0, x)
		c.LEAQ(operand.Mem{Base: ub, Index: x, Scale: 4, Disp: 4 * (S - 1)}, bp) // u[i − j0 + S − 1]
		bstep = -4
	} else {
		c.LEAQ(operand.Mem{Base: wrow, Index: j0, Scale: 4}, bp) // w[i·N + j0]
	}

	c.Comment("Pass 1: the row maximum, from the scans' and the window's keys.")
	var mb reg.GPVirtual
	if m.scan() {
		mb = a.gp(c.Param("m").Base())
	}
	for q := range nq {
		qq := q0 + q
		if m.scan() {
			c.VMAXPS(a.src(a.at(mb, io, qq), qq, mask), r[q], mx[q])
		} else {
			c.VBROADCASTSS(a.f.ConstF32("aft_ninf", ninf), mx[q])
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

	c.Comment("Pass 2: the scans rescaled to m, plus the sums of exp(k_j + b_ij − m).")
	if m.scan() {
		zb, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("rd").Base())
		for q := range nq {
			qq := q0 + q
			x := a.vec()
			c.VSUBPS(mx[q], r[q], x)
			e := a.exp(x)
			c.VMULPS(e, sa[q], num[q])
			c.VMULPS(e, sb[q], den[q])
			y := a.get(a.at(mb, io, qq), qq, mask)
			c.VSUBPS(mx[q], y, y)
			es := a.exp(y)
			c.VFMADD231PS(a.src(a.at(zb, io, qq), qq, mask), es, num[q])
			c.VFMADD231PS(a.src(a.at(rdb, io, qq), qq, mask), es, den[q])
		}
	} else {
		for q := range nq {
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

	zb, mb2, rdb := a.gp(c.Param("z").Base()), a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
	for q := range nq {
		qq := q0 + q
		one := a.splat("aft_one", 1)
		c.VDIVPS(den[q], one, den[q])
		c.VMULPS(den[q], num[q], num[q])
		a.put(num[q], a.at(zb, io, qq), qq, mask)
		a.put(mx[q], a.at(mb2, io, qq), qq, mask)
		a.put(den[q], a.at(rdb, io, qq), qq, mask)
	}
	c.ADDQ(synImm(D4), io)
	if wrow != nil {
		c.ADDQ(synImm(4*a.cfg.N), wrow)
	}
	c.INCQ(i)
	c.CMPQ(i, t)
	c.JB(synRef(lRow))
}

// scanGrad sets gv = exp(k_j − μ)·r1 and gk = exp(k_j − μ)·(v_j·r1 − r2),
// key j's gradients from the rows of a backward scan.
func (a *aftKit) scanGrad(kj, vj, mu, r1, r2, gk, gv reg.VecVirtual) {
	c := a.c
	x := a.vec()
	c.VSUBPS(mu, kj, x)
	e := a.exp(x) // exp(k_j − μ) ≤ 1
	c.VMULPS(e, r1, gv)
	d := a.vec()
	c.VMULPS(r1, vj, d)
	c.VSUBPS(r2, d, d)
	c.VMULPS(d, e, gk)
}

// backBlockBi is backBlock for a bidirectional spec: every key j < t is
// seen by every row.
func (a *aftKit) backBlockBi(q0, q1 int) {
	c, m, S, D4, N := a.c, a.mode, a.op.Window, a.d4, a.cfg.N
	mask := a.tailMask(q1)
	nq := q1 - q0
	c.Commentf("Channels [%d, %d), unmasked.", q0*a.W, min(q1*a.W, a.cfg.DH))
	pinf := float32(math.Inf(1))

	var mu, r1, r2 []reg.VecVirtual
	if m.scan() {
		mu, r1, r2 = a.vecs(nq), a.vecs(nq), a.vecs(nq)
		a.scanReset("aft_pinf", pinf, mu, r1, r2)
	}
	kj, vj, gk, gv := a.vecs(nq), a.vecs(nq), a.vecs(nq), a.vecs(nq)
	t := a.gp(c.Param("t"))
	mb, rdb := a.gp(c.Param("m").Base()), a.gp(c.Param("rd").Base())
	dzb, zb := a.gp(c.Param("dz").Base()), a.gp(c.Param("z").Base())
	kb, vb := a.gp(c.Param("k").Base()), a.gp(c.Param("v").Base())

	// keyFromScan loads key j (byte offset jo) and sets gk, gv from the scan.
	keyFromScan := func(jo reg.GPVirtual) {
		for q := range nq {
			qq := q0 + q
			a.loadInto(a.at(kb, jo, qq), qq, mask, kj[q])
			a.loadInto(a.at(vb, jo, qq), qq, mask, vj[q])
			a.scanGrad(kj[q], vj[q], mu[q], r1[q], r2[q], gk[q], gv[q])
		}
	}
	store := func(jo reg.GPVirtual) {
		dkb, dvb := a.gp(c.Param("dk").Base()), a.gp(c.Param("dv").Base())
		for q := range nq {
			qq := q0 + q
			a.put(gk[q], a.at(dkb, jo, qq), qq, mask)
			a.put(gv[q], a.at(dvb, jo, qq), qq, mask)
		}
	}

	if m == aftModeSimple {
		c.Comment("Every row sees every key: one scan over all the rows.")
		io, cnt := c.GP64(), c.GP64()
		c.XORQ(io, io)
		c.MOVQ(t, cnt)
		lRows := a.lbl("rows")
		a.label(lRows)
		a.rowScanAdd(mb, rdb, dzb, zb, io, q0, mask, mu, r1, r2)
		c.ADDQ(synImm(D4), io)
		c.DECQ(cnt)
		c.JNZ(synRef(lRows))
		jo, cnt2 := c.GP64(), c.GP64()
		c.XORQ(jo, jo)
		c.MOVQ(t, cnt2)
		lKeys := a.lbl("keys")
		a.label(lKeys)
		keyFromScan(jo)
		store(jo)
		c.ADDQ(synImm(D4), jo)
		c.DECQ(cnt2)
		c.JNZ(synRef(lKeys))
		return
	}

	if m.scan() {
		c.Comment("Forward sweep: the rows i ≤ j − S (bias 0) write dk and dv.")
		j, jo := c.GP64(), c.GP64()
		c.XORQ(j, j)
		c.XORQ(jo, jo)
		lFwd := a.lbl("prefix")
		a.label(lFwd)
		lSkip := a.lbl("noprefix")
		io := c.GP64()
		c.CMPQ(j, synImm(S))
		c.JB(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: jo, Disp: -S * D4}, io)
		a.rowScanAdd(mb, rdb, dzb, zb, io, q0, mask, mu, r1, r2)
		a.label(lSkip)
		keyFromScan(jo)
		store(jo)
		c.ADDQ(synImm(D4), jo)
		c.INCQ(j)
		c.CMPQ(j, t)
		c.JB(synRef(lFwd))
		c.Comment("Reverse sweep: the rows i ≥ j + S and the window's rows add theirs.")
		a.scanReset("aft_pinf", pinf, mu, r1, r2)
	}

	j, jo := c.GP64(), c.GP64()
	c.MOVQ(t, j)
	c.DECQ(j)
	c.IMUL3Q(synImm(D4), j, jo)
	lKey := a.lbl("key")
	a.label(lKey)
	if m.scan() {
		lSkip := a.lbl("nosuffix")
		ii, io := c.GP64(), c.GP64()
		c.LEAQ(operand.Mem{Base: j, Disp: S}, ii)
		c.CMPQ(ii, t)
		c.JAE(synRef(lSkip))
		c.LEAQ(operand.Mem{Base: jo, Disp: S * D4}, io)
		a.rowScanAdd(mb, rdb, dzb, zb, io, q0, mask, mu, r1, r2)
		a.label(lSkip)
		keyFromScan(jo)
		dkb, dvb := a.gp(c.Param("dk").Base()), a.gp(c.Param("dv").Base())
		for q := range nq {
			qq := q0 + q
			c.VADDPS(a.src(a.at(dkb, jo, qq), qq, mask), gk[q], gk[q])
			c.VADDPS(a.src(a.at(dvb, jo, qq), qq, mask), gv[q], gv[q])
		}
	} else {
		for q := range nq {
			qq := q0 + q
			a.loadInto(a.at(kb, jo, qq), qq, mask, kj[q])
			a.loadInto(a.at(vb, jo, qq), qq, mask, vj[q])
			a.zero(gk[q])
			a.zero(gv[q])
		}
	}

	c.Comment("The rows i0 … i1 − 1 whose window holds key j: i0 = max(j − S + 1, 0), i1 = min(j + S, t) (aft_full: all).")
	i0, cnt, io, bp, dbp := c.GP64(), c.GP64(), c.GP64(), c.GP64(), c.GP64()
	if m == aftModeFull {
		c.XORQ(i0, i0)
		c.MOVQ(t, cnt)
	} else {
		lPos := a.lbl("i0")
		c.MOVQ(j, i0)
		c.SUBQ(synImm(S-1), i0)
		c.JGE(synRef(lPos))
		c.XORQ(i0, i0)
		a.label(lPos)
		lEnd := a.lbl("i1")
		c.LEAQ(operand.Mem{Base: j, Disp: S}, cnt)
		c.CMPQ(cnt, t)
		c.JBE(synRef(lEnd))
		c.MOVQ(t, cnt)
		a.label(lEnd)
		c.SUBQ(i0, cnt)
	}
	c.IMUL3Q(synImm(D4), i0, io)
	step := 4 * N
	off := c.GP64()
	if m == aftModeConv {
		c.MOVQ(i0, off)
		c.SUBQ(j, off) // u[i0 − j + S − 1]
		a.c.Load(c.Param("u").Base(), bp)
		a.c.Load(c.Param("du").Base(), dbp)
		c.LEAQ(operand.Mem{Base: bp, Index: off, Scale: 4, Disp: 4 * (S - 1)}, bp)
		c.LEAQ(operand.Mem{Base: dbp, Index: off, Scale: 4, Disp: 4 * (S - 1)}, dbp)
		step = 4
	} else {
		c.IMUL3Q(synImm(N), i0, off)
		c.ADDQ(j, off) // w[i0·N + j]
		a.c.Load(c.Param("w").Base(), bp)
		a.c.Load(c.Param("dw").Base(), dbp)
		c.LEAQ(operand.Mem{Base: bp, Index: off, Scale: 4}, bp)
		c.LEAQ(operand.Mem{Base: dbp, Index: off, Scale: 4}, dbp)
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

	store(jo)
	c.SUBQ(synImm(D4), jo)
	c.DECQ(j)
	c.JGE(synRef(lKey))
}
