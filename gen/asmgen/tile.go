package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The factorized-dense tiling (kernels.TileFunc, TileBackFunc). Row i of
// c is FA segments of FB columns, segment p being fa[i,p]·fb[i,:]. With
// len = i+1 entries in the row, the first len/FB segments are whole and the
// next one has len%FB entries; both counts are carried from row to row, so
// no division happens at run time. For a bidirectional spec every row has
// len = t entries: the counts are t/FB and t%FB for every row, found once
// by subtraction (tileSquareCounts).

// synTileKeep is the largest number of vectors of fb kept in registers.
const synTileKeep = 4

// tileCounts emits, at the top of a row, the update of nf = (i+1)/FB and
// r = (i+1)%FB from the previous row's values.
func (k *simd) tileCounts(nf, r reg.GPVirtual, FB int) {
	c := k.c
	lNoWrap := k.lbl("nowrap")
	c.INCQ(r)
	c.CMPQ(r, synImm(FB))
	c.JNE(synRef(lNoWrap))
	c.XORQ(r, r)
	c.INCQ(nf)
	k.label(lNoWrap)
}

// tileSquareCounts sets nf = t/FB and r = t%FB, t ≥ 0 in register t (not
// modified): a bidirectional spec's counts, the same for every row.
func (k *simd) tileSquareCounts(t, nf, r reg.GPVirtual, FB int) {
	c := k.c
	c.XORQ(nf, nf)
	c.MOVQ(t, r)
	lLoop, lDone := k.lbl("divfb"), k.lbl("divfbdone")
	k.label(lLoop)
	c.CMPQ(r, synImm(FB))
	c.JLT(synRef(lDone))
	c.SUBQ(synImm(FB), r)
	c.INCQ(nf)
	c.JMP(synRef(lLoop))
	k.label(lDone)
}

// tileMask is the static mask of vector kk of a row of FB floats split in
// nfb vectors: nil unless it is the last, partial one.
func (k *simd) tileMask(kk, nfb, FB int, tail reg.Register) reg.Register {
	if kk == nfb-1 && FB%k.W != 0 {
		return tail
	}
	return nil
}

func emitTile(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	N, FB, LA, LB, V := f.Config.N, op.FB, op.LA, op.LB, k.W
	nfb := (FB + V - 1) / V
	nfull := FB / V
	keep := nfb <= synTileKeep

	rows := k.gp(c.Param("t"))
	fa := k.gp(c.Param("fa").Base())
	fb := k.gp(c.Param("fb").Base())
	cr := k.gp(c.Param("c").Base())
	nf, r := c.GP64(), c.GP64()
	bidi := f.Config.Bidirectional
	if bidi {
		k.tileSquareCounts(rows, nf, r, FB)
	} else {
		c.XORQ(nf, nf)
		c.XORQ(r, r)
	}

	lRow, lPart, lNext := k.lbl("row"), k.lbl("part"), k.lbl("next")
	k.label(lRow)
	if !bidi {
		k.tileCounts(nf, r, FB)
	}
	var tail reg.Register
	if FB%V != 0 {
		tail = k.lanes(FB % V)
	}
	var fbv []reg.VecVirtual
	if keep {
		fbv = make([]reg.VecVirtual, nfb)
		for kk := range fbv {
			fbv[kk] = k.vec()
			k.loadM(synMem(fb, 4*V*kk), k.tileMask(kk, nfb, FB, tail), fbv[kk])
		}
	}

	// Whole segments p < nf.
	p := c.GP64()
	c.XORQ(p, p)
	cs := c.GP64()
	c.MOVQ(cr, cs)
	c.TESTQ(nf, nf)
	c.JZ(synRef(lPart))
	lSeg := k.lbl("seg")
	k.label(lSeg)
	a := k.vec()
	k.bcast(synMemIdx(fa, 0, p, 4), a)
	if keep {
		for kk := range fbv {
			v := k.vec()
			c.VMULPS(fbv[kk], a, v)
			k.storeM(v, k.tileMask(kk, nfb, FB, tail), synMem(cs, 4*V*kk))
		}
	} else {
		if nfull > 0 {
			q := c.GP64()
			c.XORQ(q, q)
			lc := k.lbl("chunk")
			k.label(lc)
			v := k.vec()
			c.VMULPS(synMemIdx(fb, 0, q, 4), a, v)
			k.storeM(v, nil, synMemIdx(cs, 0, q, 4))
			c.ADDQ(synImm(V), q)
			c.CMPQ(q, synImm(nfull*V))
			c.JLT(synRef(lc))
		}
		if tail != nil {
			v := k.vec()
			k.loadM(synMem(fb, 4*V*nfull), tail, v)
			c.VMULPS(a, v, v)
			k.storeM(v, tail, synMem(cs, 4*V*nfull))
		}
	}
	c.INCQ(p)
	c.ADDQ(synImm(4*FB), cs)
	c.CMPQ(p, nf)
	c.JLT(synRef(lSeg))

	// The partial segment p = nf: its first r entries.
	k.label(lPart)
	c.TESTQ(r, r)
	c.JZ(synRef(lNext))
	a = k.vec()
	k.bcast(synMemIdx(fa, 0, p, 4), a)
	if keep {
		for kk := range fbv {
			n := c.GP64()
			c.MOVQ(r, n)
			if kk > 0 {
				c.SUBQ(synImm(kk*V), n)
				c.CMPQ(n, synImm(0))
				c.JLE(synRef(lNext))
			}
			k.capLanes(n)
			m := k.dynLanes(n)
			v := k.vec()
			c.VMULPS(fbv[kk], a, v)
			k.storeM(v, m, synMem(cs, 4*V*kk))
		}
	} else {
		rem, q := c.GP64(), c.GP64()
		c.MOVQ(r, rem)
		c.XORQ(q, q)
		lpc, lpt := k.lbl("pchunk"), k.lbl("ptail")
		k.label(lpc)
		c.CMPQ(rem, synImm(V))
		c.JLT(synRef(lpt))
		v := k.vec()
		c.VMULPS(synMemIdx(fb, 0, q, 4), a, v)
		k.storeM(v, nil, synMemIdx(cs, 0, q, 4))
		c.ADDQ(synImm(V), q)
		c.SUBQ(synImm(V), rem)
		c.JMP(synRef(lpc))
		k.label(lpt)
		c.TESTQ(rem, rem)
		c.JZ(synRef(lNext))
		m := k.dynLanes(rem)
		v = k.vec()
		k.loadM(synMemIdx(fb, 0, q, 4), m, v)
		c.VMULPS(a, v, v)
		k.storeM(v, m, synMemIdx(cs, 0, q, 4))
	}

	k.label(lNext)
	c.ADDQ(synImm(4*LA), fa)
	c.ADDQ(synImm(4*LB), fb)
	c.ADDQ(synImm(4*N), cr)
	c.DECQ(rows)
	c.JNZ(synRef(lRow))
	k.ret()
}

func emitTileBack(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	if op.FB <= 8 {
		// A segment fits in 8 lanes: YMM makes the per-segment sums of
		// dfa cheaper.
		k = newSIMD(f, Name(op, isa), isa).narrow()
	}
	c := k.c
	N, FA, FB, LA, LB, V := f.Config.N, op.FA, op.FB, op.LA, op.LB, k.W
	nfb := (FB + V - 1) / V

	rows := k.gp(c.Param("t"))
	fa := k.gp(c.Param("fa").Base())
	fb := k.gp(c.Param("fb").Base())
	dc := k.gp(c.Param("dc").Base())
	dfa := k.gp(c.Param("dfa").Base())
	dfb := k.gp(c.Param("dfb").Base())
	nf, r := c.GP64(), c.GP64()
	bidi := f.Config.Bidirectional
	if bidi {
		k.tileSquareCounts(rows, nf, r, FB)
	} else {
		c.XORQ(nf, nf)
		c.XORQ(r, r)
	}

	lRow := k.lbl("row")
	k.label(lRow)
	if !bidi {
		k.tileCounts(nf, r, FB)
	}

	// The vectors of fb are handled in groups of synTileKeep: fb and the
	// dfb accumulators of a group stay in registers while the row's
	// segments stream by; the first group writes dfa, later ones add to it.
	for g0 := 0; g0 < nfb; g0 += synTileKeep {
		g1 := min(g0+synTileKeep, nfb)
		var tail reg.Register
		if g1 == nfb && FB%V != 0 {
			tail = k.lanes(FB % V)
		}
		n := g1 - g0
		fbv, acc := make([]reg.VecVirtual, n), make([]reg.VecVirtual, n)
		for x := 0; x < n; x++ {
			fbv[x] = k.vec()
			k.loadM(synMem(fb, 4*V*(g0+x)), k.tileMask(g0+x, nfb, FB, tail), fbv[x])
			acc[x] = k.vec()
			k.zero(acc[x])
		}
		putDfa := func(s reg.VecVirtual, p reg.Register) {
			h := k.hsum(s)
			dst := synMemIdx(dfa, 0, p, 4)
			if g0 > 0 {
				c.VADDSS(dst, h, h)
			}
			c.VMOVSS(h, dst)
		}

		p := c.GP64()
		c.XORQ(p, p)
		dcs := c.GP64()
		c.MOVQ(dc, dcs)
		lSeg, lPart, lPartEnd, lDone := k.lbl("seg"), k.lbl("part"), k.lbl("partend"), k.lbl("done")
		c.TESTQ(nf, nf)
		c.JZ(synRef(lPart))
		// Whole segments p < nf.
		k.label(lSeg)
		a := k.vec()
		k.bcast(synMemIdx(fa, 0, p, 4), a)
		s := k.vec()
		for x := 0; x < n; x++ {
			d := k.vec()
			k.loadM(synMem(dcs, 4*V*(g0+x)), k.tileMask(g0+x, nfb, FB, tail), d)
			c.VFMADD231PS(d, a, acc[x])
			if x == 0 {
				c.VMULPS(fbv[x], d, s)
			} else {
				c.VFMADD231PS(fbv[x], d, s)
			}
		}
		putDfa(s, p)
		c.INCQ(p)
		c.ADDQ(synImm(4*FB), dcs)
		c.CMPQ(p, nf)
		c.JLT(synRef(lSeg))

		// The partial segment p = nf: its first r entries.
		k.label(lPart)
		c.TESTQ(r, r)
		c.JZ(synRef(lDone))
		a = k.vec()
		k.bcast(synMemIdx(fa, 0, p, 4), a)
		s = k.vec()
		k.zero(s)
		for x := 0; x < n; x++ {
			cnt := c.GP64()
			c.MOVQ(r, cnt)
			if kk := g0 + x; kk > 0 {
				c.SUBQ(synImm(kk*V), cnt)
				c.CMPQ(cnt, synImm(0))
				c.JLE(synRef(lPartEnd))
			}
			k.capLanes(cnt)
			m := k.dynLanes(cnt)
			d := k.vec()
			k.loadM(synMem(dcs, 4*V*(g0+x)), m, d)
			c.VFMADD231PS(d, a, acc[x])
			c.VFMADD231PS(fbv[x], d, s)
		}
		k.label(lPartEnd)
		putDfa(s, p)
		k.label(lDone)
		for x := 0; x < n; x++ {
			k.storeM(acc[x], k.tileMask(g0+x, nfb, FB, tail), synMem(dfb, 4*V*(g0+x)))
		}
	}

	// dfa[i,p] = 0 for the segments p ≥ nf + (r > 0) the row does not reach.
	p := c.GP64()
	c.MOVQ(nf, p)
	lZ, lZ0, lZDone := k.lbl("zero"), k.lbl("zerofrom"), k.lbl("zerodone")
	c.TESTQ(r, r)
	c.JZ(synRef(lZ0))
	c.INCQ(p)
	k.label(lZ0)
	k.label(lZ)
	c.CMPQ(p, synImm(FA))
	c.JGE(synRef(lZDone))
	c.MOVL(operand.U32(0), synMemIdx(dfa, 0, p, 4))
	c.INCQ(p)
	c.JMP(synRef(lZ))
	k.label(lZDone)

	c.ADDQ(synImm(4*LA), fa)
	c.ADDQ(synImm(4*LB), fb)
	c.ADDQ(synImm(4*N), dc)
	c.ADDQ(synImm(4*LA), dfa)
	c.ADDQ(synImm(4*LB), dfb)
	c.DECQ(rows)
	c.JNZ(synRef(lRow))
	k.ret()
}
