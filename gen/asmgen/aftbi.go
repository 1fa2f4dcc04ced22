package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// The unmasked (bidirectional) AFT kernels' channel blocks; the algorithms
// are those of gen/gogen/aftbi.go, see aft.go's overview.

// fwdBlockBi is fwdBlock for a bidirectional spec: every row sees every
// key j < t.
func (a *aftKit) fwdBlockBi(q0, q1 int) {
	c, m, S, D4 := a.c, a.mode, a.op.Window, a.d4
	b := a.block(q0, q1, ", unmasked")

	t := a.gp(c.Param("t"))
	kb, vb := a.param("k"), a.param("v")
	var r, sa, sb []reg.VecVirtual
	if m.scan() {
		r, sa, sb = b.newScan("aft_ninf", aftNInf)
	}
	addKey := func(ko reg.GPVirtual) { b.keyScanAdd(kb, vb, ko, r, sa, sb) }

	if m == aftModeSimple {
		c.Comment("One scan over all the keys.")
		a.overAll(t, "keys", addKey)
		c.Comment("Every row gets its result.")
		for q := range b.nq {
			one := a.splat("aft_one", 1)
			c.VDIVPS(sb[q], one, sb[q])
			c.VMULPS(sb[q], sa[q], sa[q])
		}
		o := a.outputs()
		a.overAll(t, "rows", func(io reg.GPVirtual) { b.putRow(o, io, sa, r, sb) })
		return
	}

	if m.scan() {
		c.Comment("Reverse sweep: the suffix scan over the keys j ≥ i + S, parked in row i (r in m, sa in z, sb in rd).")
		a.sweepBack(t, "suffix", func(i, io reg.GPVirtual) {
			a.shifted(i, io, t, S, "nosuffix", addKey)
			b.putRow(a.outputs(), io, sa, r, sb)
		})
		c.Comment("Forward sweep: the prefix scan over the keys j ≤ i − S.")
		a.scanReset("aft_ninf", aftNInf, r, sa, sb)
	}

	mx, num, den := a.vecs(b.nq), a.vecs(b.nq), a.vecs(b.nq)
	var wrow reg.GPVirtual // row i of w
	if m == aftModeFull || m == aftModeLocal {
		wrow = a.param("w")
	}
	a.sweep(t, "row", wrow, func(i, io reg.GPVirtual) {
		if m.scan() {
			c.Comment("The key i − S, which leaves the window at row i, joins the prefix scan.")
			a.shifted(i, io, t, -S, "noprefix", addKey)
		}

		// The window: keys j0 … j1 − 1, j0 = max(i − S + 1, 0), j1 = min(i + S, t)
		// (aft_full: 0 … t − 1).
		j0, cnt := c.GP64(), c.GP64()
		a.windowAround(i, t, j0, cnt, "j0", "j1")
		jo, bp := c.GP64(), c.GP64()
		c.IMUL3Q(synImm(D4), j0, jo)
		bstep := 4
		if m == aftModeConv {
			ub, x := a.param("u"), c.GP64()
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
			mb = a.param("m")
		}
		for q := range b.nq {
			qq := q0 + q
			if m.scan() {
				c.VMAXPS(a.src(a.at(mb, io, qq), qq, b.mask), r[q], mx[q])
			} else {
				c.VBROADCASTSS(a.f.ConstF32("aft_ninf", aftNInf), mx[q])
			}
		}
		b.windowMax(kb, jo, bp, cnt, bstep, mx)

		c.Comment("Pass 2: the scans rescaled to m, plus the sums of exp(k_j + b_ij − m).")
		if m.scan() {
			zb, rdb := a.param("z"), a.param("rd")
			for q := range b.nq {
				qq := q0 + q
				x := a.vec()
				c.VSUBPS(mx[q], r[q], x)
				e := a.exp(x)
				c.VMULPS(e, sa[q], num[q])
				c.VMULPS(e, sb[q], den[q])
				y := a.get(a.at(mb, io, qq), qq, b.mask)
				c.VSUBPS(mx[q], y, y)
				es := a.exp(y)
				c.VFMADD231PS(a.src(a.at(zb, io, qq), qq, b.mask), es, num[q])
				c.VFMADD231PS(a.src(a.at(rdb, io, qq), qq, b.mask), es, den[q])
			}
		} else {
			for q := range b.nq {
				a.zero(num[q])
				a.zero(den[q])
			}
		}
		b.windowSum(kb, vb, jo, bp, cnt, bstep, mx, num, den)
		b.storeRow(io, num, mx, den, false)
	})
}

// backBlockBi is backBlock for a bidirectional spec: every key j < t is
// seen by every row.
func (a *aftKit) backBlockBi(q0, q1 int) {
	c, m, S, D4, N := a.c, a.mode, a.op.Window, a.d4, a.cfg.N
	b := a.block(q0, q1, ", unmasked")

	var mu, r1, r2 []reg.VecVirtual
	if m.scan() {
		mu, r1, r2 = b.newScan("aft_pinf", aftPInf)
	}
	key := b.newKey()
	t := a.gp(c.Param("t"))
	in := a.rowInputs()
	kb, vb := a.param("k"), a.param("v")
	addRow := func(io reg.GPVirtual) { b.rowScanAdd(in, io, mu, r1, r2) }

	if m == aftModeSimple {
		c.Comment("Every row sees every key: one scan over all the rows.")
		a.overAll(t, "rows", addRow)
		a.overAll(t, "keys", func(jo reg.GPVirtual) {
			b.loadKey(kb, vb, jo, key, mu, r1, r2)
			b.storeKey(jo, key)
		})
		return
	}

	if m.scan() {
		c.Comment("Forward sweep: the rows i ≤ j − S (bias 0) write dk and dv.")
		a.sweep(t, "prefix", nil, func(j, jo reg.GPVirtual) {
			a.shifted(j, jo, t, -S, "noprefix", addRow)
			b.loadKey(kb, vb, jo, key, mu, r1, r2)
			b.storeKey(jo, key)
		})
		c.Comment("Reverse sweep: the rows i ≥ j + S and the window's rows add theirs.")
		a.scanReset("aft_pinf", aftPInf, mu, r1, r2)
	}

	a.sweepBack(t, "key", func(j, jo reg.GPVirtual) {
		if m.scan() {
			a.shifted(j, jo, t, S, "nosuffix", addRow)
		}
		b.loadKey(kb, vb, jo, key, mu, r1, r2)
		if m.scan() {
			dkb, dvb := a.param("dk"), a.param("dv")
			for q := range b.nq {
				qq := q0 + q
				c.VADDPS(a.src(a.at(dkb, jo, qq), qq, b.mask), key.gk[q], key.gk[q])
				c.VADDPS(a.src(a.at(dvb, jo, qq), qq, b.mask), key.gv[q], key.gv[q])
			}
		}

		c.Comment("The rows i0 … i1 − 1 whose window holds key j: i0 = max(j − S + 1, 0), i1 = min(j + S, t) (aft_full: all).")
		i0, cnt, io, bp, dbp := c.GP64(), c.GP64(), c.GP64(), c.GP64(), c.GP64()
		a.windowAround(j, t, i0, cnt, "i0", "i1")
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
		b.windowRows(in, io, bp, dbp, cnt, step, key)
		b.storeKey(jo, key)
	})
}
