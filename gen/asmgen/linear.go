package asmgen

import (
	"fmt"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// Causal linear attention (kernels.LinearFunc and kernels.LinearBackFunc)
// at the AVX-512 and AVX2 levels, with the attention-free kernels' toolbox
// (aftKit, aft.go): the algorithm is that of the Go version
// (gen/gogen/aft.go), vectorised across the DH channels of a head.
//
// The DH×DH state does not fit in registers, so it is cut into tiles of P
// rows (the summed index) × one block of lanes; each tile is a pass over
// the sequence keeping its P×block state in registers and adding Σ_r
// γ_i[r]·X_i[r, :] into the output rows (the first pass of a lane block
// overwrites). Forward: rd first (a pass keeping z_i), then the tiles of y.
// Backward: the tiles of dfq (prefix, with z as an extra state row), dfk
// (suffix, with h as an extra row) and dv (suffix).
//
// Unmasked (a bidirectional spec): S, z and the backward's states are
// global sums over j < t, so each tile (and rd's z) is built by a first
// pass over the sequence and applied by a second.
//
// Tails: the last vector of a head uses lane masks, as in aft.go.

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
	// global (a bidirectional spec) sums over all the rows j < t: a first
	// loop builds X, a second writes every out_i from it.
	global bool
}

// emitLinear emits the causal linear-attention forward.
func emitLinear(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, fixed int) {
		a.linFixed = fixed
		g := a.cfg.Bidirectional
		a.linRD()
		a.linSweep(linSweep{alpha: "fk", beta: "v", gamma: "fq", out: "y", scaleOut: true, global: g})
		a.ret()
	}
	body(newAFTKit(f, op, isa), aftFit(f, op, isa, linBudgets(), body))
}

// emitLinearBack emits the causal linear-attention backward.
func emitLinearBack(f *File, op catalog.Op, isa kernels.ISA) {
	body := func(a *aftKit, fixed int) {
		a.linFixed = fixed
		g := a.cfg.Bidirectional
		a.linSweep(linSweep{alpha: "v", beta: "fk", gamma: "dy", out: "dfq", scaleOut: true, extra: "z", global: g})
		a.linSweep(linSweep{alpha: "dy", beta: "fq", gamma: "v", out: "dfk", reverse: true, scaleBeta: true, extra: "h", global: g})
		a.linSweep(linSweep{alpha: "fq", beta: "dy", gamma: "fk", out: "dv", reverse: true, scaleBeta: true, global: g})
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
		c.Commentf("rd: lanes [%d, %d) of z_i and fq_i.", q0*a.W, min(q1*a.W, a.cfg.DH))
		zs := a.vecs(nq)
		for q := range nq {
			a.zero(zs[q])
		}
		cnt := a.gp(c.Param("t"))
		fkb, fqb, rdb := a.gp(c.Param("fk").Base()), a.gp(c.Param("fq").Base()), a.gp(c.Param("rd").Base())
		io, ro := c.GP64(), c.GP64()
		c.XORQ(io, io)
		c.XORQ(ro, ro)
		global := a.cfg.Bidirectional
		if global {
			c.Comment("Unmasked: z = Σ_{j<t} fk_j first.")
			zc := c.GP64()
			c.MOVQ(cnt, zc)
			lz := a.lbl("z")
			a.label(lz)
			for q := range nq {
				qq := q0 + q
				c.VADDPS(a.src(a.at(fkb, io, qq), qq, mask), zs[q], zs[q])
			}
			c.ADDQ(synImm(D4), io)
			c.DECQ(zc)
			c.JNZ(synRef(lz))
			c.XORQ(io, io)
		}
		l := a.lbl("rd")
		a.label(l)
		var p reg.VecVirtual
		for q := range nq {
			qq := q0 + q
			if !global {
				c.VADDPS(a.src(a.at(fkb, io, qq), qq, mask), zs[q], zs[q])
			}
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
	if a.tail < a.W {
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
		c.ADDQ(synImm(4*a.W*cbv), lo)
		c.CMPQ(lo, synImm(4*a.W*cbv*nfull))
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
	c.Commentf("%s: lanes [%d, %d), state rows %s%s.", s.out, q0*a.W, min((q0+nq)*a.W, a.cfg.DH), linRows(rows), what)
	X := make([][]reg.VecVirtual, len(rows))
	for k := range rows {
		X[k] = a.vecs(nq)
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
	reverse := s.reverse && !s.global
	if reverse {
		c.MOVQ(cnt, io)
		c.DECQ(io)
		c.IMUL3Q(synImm(H4), io, rdo)
		c.IMUL3Q(synImm(D4), io, io)
	} else {
		c.XORQ(io, io)
		c.XORQ(rdo, rdo)
	}
	var cnt2 reg.GPVirtual // global: the second loop's count
	if s.global {
		cnt2 = c.GP64()
		c.MOVQ(cnt, cnt2)
	}
	// loop emits one pass over the rows: the state update (update), the
	// output (output) or both (causal).
	loop := func(cnt reg.GPVirtual, update, output bool) {
		l := a.lbl("lin")
		a.label(l)
		a.linRow(s, rows, X, q0, nq, mask, io, rdo, rdb, ab, gb, bb, ob, extra, first, update, output)
		if reverse {
			c.SUBQ(synImm(D4), io)
			c.SUBQ(synImm(H4), rdo)
		} else {
			c.ADDQ(synImm(D4), io)
			c.ADDQ(synImm(H4), rdo)
		}
		c.DECQ(cnt)
		c.JNZ(synRef(l))
	}
	if !s.global {
		loop(cnt, true, true)
		return
	}
	loop(cnt, true, false)
	c.XORQ(io, io)
	c.XORQ(rdo, rdo)
	loop(cnt2, false, true)
}

// linRow emits linPass's work on row i (byte offsets io in the [t, D]
// matrices, rdo in rd): the state update X[r] += α_i[r]·β_i (update) and
// the output out_i (+)= Σ_r γ_i[r]·X[r] (output).
func (a *aftKit) linRow(s linSweep, rows []linTerm, X [][]reg.VecVirtual, q0, nq int, mask reg.Register,
	io, rdo, rdb, ab, gb, bb, ob reg.GPVirtual, extra, first, update, output bool) {
	c := a.c
	var rdv, sd reg.VecVirtual
	if rdb != nil && ((update && s.scaleBeta) || (output && s.scaleOut)) {
		rdv = a.vec()
		c.VBROADCASTSS(operand.Mem{Base: rdb, Index: rdo, Scale: 1}, rdv)
	}
	if extra && ((update && s.extra == "h") || (output && s.extra == "z")) {
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
	if update {
		a.linUpdate(s, rows, X, q0, nq, mask, io, ab, bb, rdv, sd)
	}
	if output {
		a.linOutput(s, rows, X, q0, nq, mask, io, gb, ob, rdv, sd, first)
	}
}

// linUpdate is the state update of row i: X[r] += α_i[r]·β_i.
func (a *aftKit) linUpdate(s linSweep, rows []linTerm, X [][]reg.VecVirtual, q0, nq int, mask reg.Register,
	io, ab, bb reg.GPVirtual, rdv, sd reg.VecVirtual) {
	c := a.c
	beta := make([]reg.VecVirtual, nq)
	for q := range nq {
		qq := q0 + q
		beta[q] = a.get(a.at(bb, io, qq), qq, mask)
		if s.scaleBeta {
			c.VMULPS(rdv, beta[q], beta[q])
		}
	}
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
}

// linOutput is the output of row i: out_i (+)= Σ_r γ_i[r]·X[r].
func (a *aftKit) linOutput(s linSweep, rows []linTerm, X [][]reg.VecVirtual, q0, nq int, mask reg.Register,
	io, gb, ob reg.GPVirtual, rdv, sd reg.VecVirtual, first bool) {
	c := a.c
	acc := a.vecs(nq)
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
