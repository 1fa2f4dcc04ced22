package asmgen

import (
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The causal-triangle vector operations (kernels.TriScaleFunc,
// TriAxpyFunc, TriDotFunc): row i < t of x and y (row stride N) has the
// i+1 entries j ≤ i (t entries j < t for a bidirectional spec). Each row is walked with four vectors at a time, then
// one, then a masked tail, so nothing right of the diagonal is touched.

func emitTriScale(f *File, op catalog.Op, isa kernels.ISA) { synEmitTriRows(f, op, isa, synTriScale) }
func emitTriAxpy(f *File, op catalog.Op, isa kernels.ISA)  { synEmitTriRows(f, op, isa, synTriAxpy) }
func emitTriDot(f *File, op catalog.Op, isa kernels.ISA)   { synEmitTriRows(f, op, isa, synTriDot) }

type synTriKind int

const (
	synTriScale synTriKind = iota
	synTriAxpy
	synTriDot
)

func synEmitTriRows(f *File, op catalog.Op, isa kernels.ISA, kind synTriKind) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	N, V := f.Config.N, k.W

	t := k.gp(c.Param("t"))
	x := k.gp(c.Param("x").Base())
	y := k.gp(c.Param("y").Base())
	var alpha reg.VecVirtual
	var acc [4]reg.VecVirtual
	if kind == synTriDot {
		for u := range acc {
			acc[u] = k.vec()
			k.zero(acc[u])
		}
	} else {
		alpha = k.bcastParam("alpha")
	}

	// body handles one vector at element offset o of the row (plus disp
	// bytes); mask nil means all lanes.
	body := func(o reg.Register, disp int, mask reg.Register, u int) {
		xm := synMemIdx(x, disp, o, 4)
		ym := synMemIdx(y, disp, o, 4)
		switch kind {
		case synTriScale:
			v := k.vec()
			if mask == nil {
				c.VMULPS(xm, alpha, v)
			} else {
				k.loadM(xm, mask, v)
				c.VMULPS(alpha, v, v)
			}
			k.storeM(v, mask, ym)
		case synTriAxpy:
			v := k.vec()
			k.loadM(ym, mask, v)
			if mask == nil {
				c.VFMADD231PS(xm, alpha, v)
			} else {
				xv := k.vec()
				k.loadM(xm, mask, xv)
				c.VFMADD231PS(xv, alpha, v)
			}
			k.storeM(v, mask, ym)
		case synTriDot:
			xv := k.vec()
			k.loadM(xm, mask, xv)
			if mask == nil {
				c.VFMADD231PS(ym, xv, acc[u])
			} else {
				yv := k.vec()
				k.loadM(ym, mask, yv)
				c.VFMADD231PS(yv, xv, acc[u])
			}
		}
	}

	// L is the length of the current row: i+1 under the causal mask; t for
	// every row of a bidirectional spec, t then counting the rows left.
	bidi := f.Config.Bidirectional
	L := c.GP64()
	if bidi {
		c.MOVQ(t, L)
	} else {
		c.MOVQ(synImm(1), L)
	}
	lRow, l4, l1, lTail, lNext := k.lbl("row"), k.lbl("by4"), k.lbl("by1"), k.lbl("tail"), k.lbl("next")
	k.label(lRow)
	o := c.GP64()
	c.XORQ(o, o)
	n := c.GP64()
	c.MOVQ(L, n)
	k.label(l4)
	c.CMPQ(n, synImm(4*V))
	c.JLT(synRef(l1))
	for u := 0; u < 4; u++ {
		body(o, 4*u*V, nil, u)
	}
	c.ADDQ(synImm(4*V), o)
	c.SUBQ(synImm(4*V), n)
	c.JMP(synRef(l4))
	k.label(l1)
	c.CMPQ(n, synImm(V))
	c.JLT(synRef(lTail))
	body(o, 0, nil, 0)
	c.ADDQ(synImm(V), o)
	c.SUBQ(synImm(V), n)
	c.JMP(synRef(l1))
	k.label(lTail)
	c.TESTQ(n, n)
	c.JZ(synRef(lNext))
	body(o, 0, k.dynLanes(n), 1)
	k.label(lNext)
	c.ADDQ(synImm(4*N), x)
	c.ADDQ(synImm(4*N), y)
	if bidi {
		c.DECQ(t)
		c.JNZ(synRef(lRow))
	} else {
		c.INCQ(L)
		c.CMPQ(L, t)
		c.JLE(synRef(lRow))
	}

	if kind == synTriDot {
		c.VADDPS(acc[1], acc[0], acc[0])
		c.VADDPS(acc[3], acc[2], acc[2])
		c.VADDPS(acc[2], acc[0], acc[0])
		s := k.hsum(acc[0])
		// VMOVSS, not the MOVSS of Store: the dispatch checks AVX, not SSE.
		c.VMOVSS(s, k.addr(c.ReturnIndex(0), "result"))
	}
	k.ret()
}
