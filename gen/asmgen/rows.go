package asmgen

import (
	"fmt"

	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The row-wise kernels (kernels.LayerNormFunc, LayerNormBackFunc,
// LayerNormGradFunc, GeluFunc, GeluBackFunc) at the AVX-512 and AVX2
// levels, following the Go versions (gen/gogen/rows.go).
//
// LayerNorm and LayerNormBack work row by row. A row of D floats is cut
// into vectors (the last one partial, K-masked on AVX-512 and VMASKMOVPS'd
// on AVX2, when V does not divide D); a row sum keeps rowAccs vector
// accumulators, vector q of the row adding into accumulator q mod rowAccs,
// which are then added pairwise and summed across lanes in a fixed order,
// so the rounding depends on D alone. The scalars of a row (mean, 1/σ) are
// formed with scalar VDIVSS/VSQRTSS, as the Go version does.
//
// LayerNormGrad keeps one accumulator lane per column: blocks of up to
// gradBlock vectors of columns, each block running over all t rows in
// order, then added to dgamma and dbeta once.
//
// The GELU kernels treat their t rows of FFN floats as t·FFN consecutive
// floats: whole vectors, then a masked tail. The GELU repeats the Go
// version's float32 operations one for one (VDIVPS for its division, no
// FMA), so it gives the Go level's bits (where the Go compiler does not
// fuse multiply-adds itself, as it does not at GOAMD64 v1 and v2).

// rowAccs is the number of vector accumulators of each LayerNorm row sum.
const rowAccs = 4

// rowKit is the toolbox of the row-wise emitters.
type rowKit struct{ *simd }

func newRowKit(f *File, op catalog.Op, isa kernels.ISA) *rowKit {
	return &rowKit{newSIMD(f, Name(op, isa), isa)}
}

func emitLayerNorm(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).layerNorm() }
func emitLayerNormBack(f *File, op catalog.Op, isa kernels.ISA) {
	newRowKit(f, op, isa).layerNormBack()
}
func emitLayerNormGrad(f *File, op catalog.Op, isa kernels.ISA) {
	newRowKit(f, op, isa).layerNormGrad()
}
func emitGelu(f *File, op catalog.Op, isa kernels.ISA)     { newRowKit(f, op, isa).gelu() }
func emitGeluBack(f *File, op catalog.Op, isa kernels.ISA) { newRowKit(f, op, isa).geluBack() }

// rowVecs emits a walk over the vectors of a row of n floats: body(at,
// mask, q) for each, where at(base) is the vector's address in the row
// starting at base, mask is nil for a whole vector and tail for the
// partial last one, and q is the vector's index modulo rowAccs (the
// accumulator it adds into). Up to 2·rowAccs whole vectors are unrolled;
// more are walked rowAccs at a time in a loop, then the rest unrolled.
func (r *rowKit) rowVecs(n int, tail reg.Register, body func(at func(base reg.Register) operand.Mem, mask reg.Register, q int)) {
	c, V := r.c, r.W
	whole := n / V
	fixed := func(q int) func(base reg.Register) operand.Mem {
		return func(base reg.Register) operand.Mem { return synMem(base, 4*V*q) }
	}
	first := 0
	if whole > 2*rowAccs {
		groups := whole / rowAccs
		off, cnt := c.GP64(), c.GP64()
		c.XORQ(off, off)
		c.MOVQ(synImm(groups), cnt)
		loop := r.lbl("vecs")
		r.label(loop)
		for u := 0; u < rowAccs; u++ {
			body(func(base reg.Register) operand.Mem { return synMemIdx(base, 4*V*u, off, 1) }, nil, u)
		}
		c.ADDQ(synImm(4*V*rowAccs), off)
		c.DECQ(cnt)
		c.JNZ(synRef(loop))
		first = groups * rowAccs
	}
	for q := first; q < whole; q++ {
		body(fixed(q), nil, q%rowAccs)
	}
	if n%V != 0 {
		body(fixed(whole), tail, whole%rowAccs)
	}
}

// accs allocates and zeroes the accumulators a row sum over n floats uses.
func (r *rowKit) accs(n int) []reg.VecVirtual {
	used := min(rowAccs, (n+r.W-1)/r.W)
	a := make([]reg.VecVirtual, used)
	for i := range a {
		a[i] = r.vec()
		r.zero(a[i])
	}
	return a
}

// total adds the accumulators pairwise (a[0]+a[1], a[2]+a[3], then those)
// and across lanes; it returns an XMM register holding the sum in lane 0.
func (r *rowKit) total(a []reg.VecVirtual) reg.VecVirtual {
	for step := 1; step < len(a); step *= 2 {
		for i := 0; i+step < len(a); i += 2 * step {
			r.c.VADDPS(a[i+step], a[i], a[i])
		}
	}
	return r.hsum(a[0])
}

// get loads the vector at m into a new register, masked (other lanes
// zero, not read) unless mask is nil.
func (r *rowKit) get(m operand.Mem, mask reg.Register) reg.VecVirtual {
	v := r.vec()
	r.loadM(m, mask, v)
	return v
}

// memOrLoad is m itself for a whole vector (instructions take it as their
// memory operand), or a masked load of it.
func (r *rowKit) memOrLoad(m operand.Mem, mask reg.Register) operand.Op {
	if mask == nil {
		return m
	}
	return r.get(m, mask)
}

// unlessZero jumps to the returned label, which the caller places before
// its ret, when register n is 0 (the wrappers already return early for
// t = 0; this keeps the row loops, which test at their end, safe anyway).
func (r *rowKit) unlessZero(n reg.GPVirtual) string {
	done := r.lbl("done")
	r.c.TESTQ(n, n)
	r.c.JZ(synRef(done))
	return done
}

// bcastScalar broadcasts lane 0 of XMM register s into a new vector.
func (r *rowKit) bcastScalar(s reg.VecVirtual) reg.VecVirtual {
	v := r.vec()
	r.c.VBROADCASTSS(s, v)
	return v
}

// nextRow closes a layer-norm row loop: the row pointers advance by a row
// of D floats, the statistics pointers mu and rs by one float, and the
// loop goes back to label row while t, counted down, is not 0.
func (r *rowKit) nextRow(t reg.GPVirtual, row string, rows []reg.GPVirtual, mu, rs reg.GPVirtual) {
	c, D := r.c, r.f.Config.D
	for _, p := range rows {
		c.ADDQ(synImm(4*D), p)
	}
	c.ADDQ(synImm(4), mu)
	c.ADDQ(synImm(4), rs)
	c.DECQ(t)
	c.JNZ(synRef(row))
}

// layerNorm: per row, m0 = Σx/D; then d = x − m0 and the sums Σd, Σd²
// (masked-off lanes of d cleared); dm = Σd/D, mu = m0 + dm,
// var = max(Σd²/D − dm², 0), rs = 1/√(var + ε); then
// y = ((x − m0) − dm)·rs·gamma + beta.
func (r *rowKit) layerNorm() {
	c, D := r.c, r.f.Config.D
	t := r.gp(c.Param("t"))
	x, gamma, beta, y := r.param("x"), r.param("gamma"), r.param("beta"), r.param("y")
	mu, rs := r.param("mu"), r.param("rs")
	tail := r.tailOf(D)
	dc := r.f.ConstF32("row_d", float32(D))
	done := r.unlessZero(t)
	row := r.lbl("row")
	r.label(row)

	s := r.accs(D)
	r.rowVecs(D, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
		c.VADDPS(r.memOrLoad(at(x), mask), s[q], s[q])
	})
	m := r.total(s)
	c.VDIVSS(dc, m, m) // m0
	m0 := r.bcastScalar(m)

	e, sq := r.accs(D), r.accs(D)
	r.rowVecs(D, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
		v := r.get(at(x), mask)
		switch {
		case mask == nil:
			c.VSUBPS(m0, v, v)
		case r.avx512():
			c.VSUBPS_Z(m0, v, mask, v)
		default:
			c.VSUBPS(m0, v, v)
			c.VANDPS(mask, v, v)
		}
		c.VADDPS(v, e[q], e[q])
		c.VFMADD231PS(v, v, sq[q])
	})
	dm, vr := r.total(e), r.total(sq)
	c.VDIVSS(dc, dm, dm)
	c.VDIVSS(dc, vr, vr)
	c.VFNMADD231SS(dm, dm, vr) // Σd²/D − dm²
	z := r.c.XMM()
	r.zero(z)
	c.VMAXSS(vr, z, vr) // max(var, 0), NaN kept
	c.VADDSS(r.f.ConstF32("ln_eps", 1e-5), vr, vr)
	c.VSQRTSS(vr, vr, vr)
	inv := r.c.XMM()
	c.VMOVSS(r.f.ConstF32("row_one", 1), inv)
	c.VDIVSS(vr, inv, inv) // rs
	dmv, rv := r.bcastScalar(dm), r.bcastScalar(inv)
	c.VADDSS(dm, m, m) // mu
	c.VMOVSS(m, synMem(mu, 0))
	c.VMOVSS(inv, synMem(rs, 0))

	r.rowVecs(D, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
		v := r.get(at(x), mask)
		c.VSUBPS(m0, v, v)
		c.VSUBPS(dmv, v, v)
		c.VMULPS(rv, v, v)
		c.VMULPS(r.memOrLoad(at(gamma), mask), v, v)
		c.VADDPS(r.memOrLoad(at(beta), mask), v, v)
		r.storeM(v, mask, at(y))
	})

	r.nextRow(t, row, []reg.GPVirtual{x, y}, mu, rs)
	r.label(done)
	r.ret()
}

// layerNormBack: per row, with x̂ = (x − mu)·rs and g = dy·gamma, the sums
// Σg and Σg·x̂; then dx += rs·(g − Σg/D − x̂·Σg·x̂/D).
func (r *rowKit) layerNormBack() {
	c, D := r.c, r.f.Config.D
	t := r.gp(c.Param("t"))
	dy, x, gamma, dx := r.param("dy"), r.param("x"), r.param("gamma"), r.param("dx")
	mu, rs := r.param("mu"), r.param("rs")
	tail := r.tailOf(D)
	dc := r.f.ConstF32("row_d", float32(D))
	done := r.unlessZero(t)
	row := r.lbl("row")
	r.label(row)

	mv, rv := r.vec(), r.vec()
	c.VBROADCASTSS(synMem(mu, 0), mv)
	c.VBROADCASTSS(synMem(rs, 0), rv)
	// xg returns x̂ and g for one vector.
	xg := func(at func(reg.Register) operand.Mem, mask reg.Register) (xh, g reg.VecVirtual) {
		xh = r.get(at(x), mask)
		c.VSUBPS(mv, xh, xh)
		c.VMULPS(rv, xh, xh)
		g = r.get(at(dy), mask)
		c.VMULPS(r.memOrLoad(at(gamma), mask), g, g)
		return xh, g
	}
	sg, sh := r.accs(D), r.accs(D)
	r.rowVecs(D, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
		xh, g := xg(at, mask)
		c.VADDPS(g, sg[q], sg[q])
		c.VFMADD231PS(xh, g, sh[q])
	})
	mg, mh := r.total(sg), r.total(sh)
	c.VDIVSS(dc, mg, mg)
	c.VDIVSS(dc, mh, mh)
	mgv, mhv := r.bcastScalar(mg), r.bcastScalar(mh)
	r.rowVecs(D, tail, func(at func(reg.Register) operand.Mem, mask reg.Register, q int) {
		xh, g := xg(at, mask)
		c.VSUBPS(mgv, g, g)
		c.VFNMADD231PS(mhv, xh, g) // g − mean(g) − x̂·mean(g·x̂)
		d := r.get(at(dx), mask)
		c.VFMADD231PS(g, rv, d)
		r.storeM(d, mask, at(dx))
	})

	r.nextRow(t, row, []reg.GPVirtual{dy, x, dx}, mu, rs)
	r.label(done)
	r.ret()
}

// gradBlock is the most column vectors LayerNormGrad keeps accumulators
// for at once (two per vector, beside the row's mu, rs, two operands and
// the tail mask): 12·2 + 5 of AVX-512's 32 registers, 4·2 + 5 of AVX2's 16.
func (r *rowKit) gradBlock() int {
	if r.avx512() {
		return 12
	}
	return 4
}

// layerNormGrad: for each block of column vectors, accumulators over all
// rows in order, then added to dgamma and dbeta.
func (r *rowKit) layerNormGrad() {
	c, D, V := r.c, r.f.Config.D, r.W
	nv := (D + V - 1) / V
	tail := r.tailOf(D)
	nb := (nv + r.gradBlock() - 1) / r.gradBlock()
	done := r.unlessZero(r.gp(c.Param("t")))
	q0 := 0
	for b := 0; b < nb; b++ {
		q1 := q0 + (nv-q0)/(nb-b) // blocks of near-equal size
		mask := func(q int) reg.Register {
			if q == nv-1 {
				return tail
			}
			return nil
		}
		sg, sb := make([]reg.VecVirtual, q1-q0), make([]reg.VecVirtual, q1-q0)
		for j := range sg {
			sg[j], sb[j] = r.vec(), r.vec()
			r.zero(sg[j])
			r.zero(sb[j])
		}
		t := r.gp(c.Param("t"))
		dy, x, mu, rs := r.param("dy"), r.param("x"), r.param("mu"), r.param("rs")
		row := r.lbl("rows")
		r.label(row)
		mv, rv := r.vec(), r.vec()
		c.VBROADCASTSS(synMem(mu, 0), mv)
		c.VBROADCASTSS(synMem(rs, 0), rv)
		for q := q0; q < q1; q++ {
			j := q - q0
			g := r.get(synMem(dy, 4*V*q), mask(q))
			xh := r.get(synMem(x, 4*V*q), mask(q))
			c.VSUBPS(mv, xh, xh)
			c.VMULPS(rv, xh, xh)
			c.VFMADD231PS(xh, g, sg[j])
			c.VADDPS(g, sb[j], sb[j])
		}
		r.nextRow(t, row, []reg.GPVirtual{dy, x}, mu, rs)
		for _, out := range []struct {
			name string
			s    []reg.VecVirtual
		}{{"dgamma", sg}, {"dbeta", sb}} {
			p := r.param(out.name)
			for q := q0; q < q1; q++ {
				m := synMem(p, 4*V*q)
				v := r.get(m, mask(q))
				c.VADDPS(out.s[q-q0], v, v)
				r.storeM(v, mask(q), m)
			}
		}
		q0 = q1
	}
	r.label(done)
	r.ret()
}

// flat emits a walk over the n = t·FFN floats at the bases in ptrs: unroll
// whole vectors at a time while they last, then single vectors, then a
// masked tail; body(at, mask, u) handles the vector at at(base) (mask nil:
// whole), u its position in the unrolled group.
func (r *rowKit) flat(unroll int, ptrs []reg.GPVirtual, body func(at func(base reg.Register) operand.Mem, mask reg.Register, u int)) {
	r.flatN(r.f.Config.FFN, unroll, ptrs, body)
}

// flatN is flat over t·per floats.
func (r *rowKit) flatN(per, unroll int, ptrs []reg.GPVirtual, body func(at func(base reg.Register) operand.Mem, mask reg.Register, u int)) {
	c, V := r.c, r.W
	n := r.gp(c.Param("t"))
	if per != 1 {
		c.IMUL3Q(synImm(per), n, n)
	}
	step := func(vecs int) {
		for _, p := range ptrs {
			c.ADDQ(synImm(4*V*vecs), p)
		}
		c.SUBQ(synImm(V*vecs), n)
	}
	lMany, lOne, lTail, lDone := r.lbl("many"), r.lbl("one"), r.lbl("tail"), r.lbl("done")
	if unroll > 1 {
		r.label(lMany)
		c.CMPQ(n, synImm(unroll*V))
		c.JLT(synRef(lOne))
		for u := 0; u < unroll; u++ {
			body(func(base reg.Register) operand.Mem { return synMem(base, 4*V*u) }, nil, u)
		}
		step(unroll)
		c.JMP(synRef(lMany))
	}
	r.label(lOne)
	c.CMPQ(n, synImm(V))
	c.JLT(synRef(lTail))
	body(func(base reg.Register) operand.Mem { return synMem(base, 0) }, nil, 0)
	step(1)
	c.JMP(synRef(lOne))
	r.label(lTail)
	c.TESTQ(n, n)
	c.JZ(synRef(lDone))
	body(func(base reg.Register) operand.Mem { return synMem(base, 0) }, r.dynLanes(n), 0)
	r.label(lDone)
	r.ret()
}

// The GELU's constants (see gen/gogen's geluConsts).
const (
	geluC     = 0.7978845608028654 // √(2/π)
	geluA     = 0.044715
	tanhClamp = 7.90531110763549805 // |z| beyond which the rational tanh is ±1
)

var tanhP = []float32{ // A13, A11, …, A1: the numerator, highest power first
	-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
	1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03,
}

var tanhQ = []float32{ // B6, B4, B2, B0: the denominator
	1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03,
}

// geluUnroll is how many vectors an iteration of the GELU loop handles:
// two on AVX-512; one on AVX2, whose sixteen registers one vector's
// temporaries already half fill.
func (r *rowKit) geluUnroll() int {
	if r.avx512() {
		return 2
	}
	return 1
}

// gelu: the operations of the Go version one for one, without FMA (which
// would round differently), so it gives the Go level's bits:
// z = min(max(√(2/π)·(x + (a·x²)·x), −7.905…), 7.905…), t = z·p(z²)/q(z²)
// (each Horner step a multiplication then an addition), g = (0.5·x)·(1 + t),
// u = 0.5·(1 + t) + (((0.5·x)·(1 − t·t))·√(2/π))·(1 + 3a·x²). Beyond the
// clamp this rounding makes t exactly ±1, so 1 − t² is exactly 0.
func (r *rowKit) gelu() {
	c := r.c
	u, g := r.param("u"), r.param("g")
	mul := func(name string, v float32, x, dst reg.VecVirtual) {
		r.withConst(c.VMULPS_BCST, c.VMULPS, name, v, x, dst)
	}
	add := func(name string, v float32, x, dst reg.VecVirtual) {
		r.withConst(c.VADDPS_BCST, c.VADDPS, name, v, x, dst)
	}
	// poly evaluates the polynomial in w with coefficients cs (highest
	// first) by Horner's rule.
	poly := func(name string, cs []float32, w reg.VecVirtual) reg.VecVirtual {
		p := r.vec()
		mul(name+"0", cs[0], w, p)
		for i, k := range cs[1:] {
			if i > 0 {
				c.VMULPS(w, p, p)
			}
			add(fmt.Sprintf("%s%d", name, i+1), k, p, p)
		}
		return p
	}
	r.flat(r.geluUnroll(), []reg.GPVirtual{u, g}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		x := r.get(at(u), mask)
		s := r.vec()
		c.VMULPS(x, x, s)
		z := r.vec()
		mul("gelu_a", geluA, s, z)
		c.VMULPS(x, z, z)
		c.VADDPS(z, x, z) // x + a·x³
		mul("gelu_c", geluC, z, z)
		r.withConst(c.VMAXPS_BCST, c.VMAXPS, "tanh_lo", -tanhClamp, z, z)
		r.withConst(c.VMINPS_BCST, c.VMINPS, "tanh_hi", tanhClamp, z, z)
		w := r.vec()
		c.VMULPS(z, z, w)
		p := poly("tanh_p", tanhP, w)
		q := poly("tanh_q", tanhQ, w)
		c.VMULPS(p, z, z)
		c.VDIVPS(q, z, z) // t = tanh z
		o := r.vec()
		add("gelu_one", 1, z, o) // 1 + t
		hx := r.vec()
		mul("gelu_half", 0.5, x, hx)
		gv := r.vec()
		c.VMULPS(o, hx, gv)
		r.storeM(gv, mask, at(g))
		mul("gelu_half", 0.5, o, o)
		// The second term is formed negated, B' = (((0.5·x)·(t·t − 1))·√(2/π))·(1 + 3a·x²),
		// and u = 0.5·(1 + t) − B': the same bits, as negation is exact.
		c.VMULPS(z, z, z)
		r.withConst(c.VSUBPS_BCST, c.VSUBPS, "gelu_one", 1, z, z) // t·t − 1
		c.VMULPS(hx, z, z)
		mul("gelu_c", geluC, z, z)
		mul("gelu_3a", 3*geluA, s, s)
		add("gelu_one", 1, s, s)
		c.VMULPS(s, z, z)
		c.VSUBPS(z, o, z)
		r.storeM(z, mask, at(u))
	})
}

// geluBack: a ← a·b, four vectors at a time.
func (r *rowKit) geluBack() {
	c := r.c
	a, b := r.param("a"), r.param("b")
	r.flat(4, []reg.GPVirtual{a, b}, func(at func(reg.Register) operand.Mem, mask reg.Register, _ int) {
		v := r.get(at(a), mask)
		c.VMULPS(r.memOrLoad(at(b), mask), v, v)
		r.storeM(v, mask, at(a))
	})
}
