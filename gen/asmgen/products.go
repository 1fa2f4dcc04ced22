package asmgen

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The causal products (kernels.ProductFunc, ProductBackXFunc,
// ProductBackWFunc): small GEMMs over the lower triangle j ≤ i < t.
//
// Product writes c in pairs of panels of V columns (A: j0..j0+V−1, B: the
// next V). For each pair the 2V rows of w it needs are transposed (in
// registers, V×V at a time) into a stack buffer holding, for each p < W,
// the vectors w[j0.., p]. The V diagonal rows of A then take one vector
// per row (blocks of r1 rows, broadcasts of x, stores masked to the
// diagonal); the rows below take A and B together (blocks of r2 rows, one
// broadcast of x feeding two FMAs, B masked to the diagonal), which halves
// the loads per FMA.
//
// BackX and BackW need no transposition: they accumulate whole rows of dx
// (dw) as Σ_j dc[i,j]·w[j,:] (Σ_i dc[i,j]·x[i,:]) with broadcasts of dc,
// blocked over several rows and up to two vectors of p; the triangle
// corner of each row block is unrolled so that dc is never read above the
// diagonal. From N = backWRowsN BackW turns its loops round
// (emitProductBackWRows): rows of x stay in registers and each row of dw
// is loaded, updated and stored, so that dc is read along its rows. Columns p ≥ W of x, w, dx and dw (other heads' columns) are
// never read or written: the last vector of a row is masked.
//
// For a bidirectional spec (Config.Bidirectional) the three kernels run
// over the square i, j < t: Product takes every row 0..t−1 against each
// panel pair (both panels, stores masked to the columns j < t), BackX
// every column j < t for each row block, BackW every row i < t for each
// column block, with no triangle corner.

// productRows returns the rows per block of Product: r1 for the diagonal
// rows of a panel pair (one vector of c per row), r2 for the rows below
// them (two vectors per row). r2·2 accumulators, two panel vectors, a
// broadcast and scale fit the register file; the chains cover the FMA
// latency of two pipes.
func (k *simd) productRows() (r1, r2 int) {
	if k.avx512() {
		return 8, 12
	}
	return 8, 6
}

// synProductUnroll is how many p one iteration of Product's loop over p
// handles; widths below twice this are unrolled whole.
const synProductUnroll = 8

// transpose transposes the V×V block held in rows (V registers, row r =
// rows[r]) and returns its columns.
func (k *simd) transpose(rows []reg.VecVirtual) []reg.VecVirtual {
	c := k.c
	V := k.W
	if len(rows) != V {
		panic("asmgen: transpose of a partial block")
	}
	// Stage 1: interleave pairs of rows.
	t := make([]reg.VecVirtual, V)
	for a := 0; a < V/2; a++ {
		t[2*a], t[2*a+1] = k.vec(), k.vec()
		c.VUNPCKLPS(rows[2*a+1], rows[2*a], t[2*a])
		c.VUNPCKHPS(rows[2*a+1], rows[2*a], t[2*a+1])
	}
	// Stage 2: in each 128-bit lane L, s[4b+q] holds column 4L+q of
	// rows 4b..4b+3.
	s := make([]reg.VecVirtual, V)
	for b := 0; b < V/4; b++ {
		for q := 0; q < 4; q++ {
			s[4*b+q] = k.vec()
		}
		c.VSHUFPS(operand.U8(0x44), t[4*b+2], t[4*b], s[4*b+0])
		c.VSHUFPS(operand.U8(0xEE), t[4*b+2], t[4*b], s[4*b+1])
		c.VSHUFPS(operand.U8(0x44), t[4*b+3], t[4*b+1], s[4*b+2])
		c.VSHUFPS(operand.U8(0xEE), t[4*b+3], t[4*b+1], s[4*b+3])
	}
	cols := make([]reg.VecVirtual, V)
	if !k.avx512() {
		// Stage 3 (8×8): join the 128-bit lanes.
		for q := 0; q < 4; q++ {
			cols[q], cols[4+q] = k.vec(), k.vec()
			c.VPERM2F128(operand.U8(0x20), s[4+q], s[q], cols[q])
			c.VPERM2F128(operand.U8(0x31), s[4+q], s[q], cols[4+q])
		}
		return cols
	}
	// Stages 3 and 4 (16×16): gather 128-bit lanes.
	u := make([]reg.VecVirtual, V)
	for q := 0; q < 4; q++ {
		for _, h := range []int{0, 8} {
			u[h+q], u[h+4+q] = k.vec(), k.vec()
			c.VSHUFF32X4(operand.U8(0x88), s[h+4+q], s[h+q], u[h+q])
			c.VSHUFF32X4(operand.U8(0xDD), s[h+4+q], s[h+q], u[h+4+q])
		}
	}
	for q := 0; q < 4; q++ {
		for _, h := range []int{0, 4} {
			cols[h+q], cols[h+8+q] = k.vec(), k.vec()
			c.VSHUFF32X4(operand.U8(0x88), u[h+8+q], u[h+q], cols[h+q])
			c.VSHUFF32X4(operand.U8(0xDD), u[h+8+q], u[h+q], cols[h+8+q])
		}
	}
	return cols
}

// fmaBcast adds b·v to acc, with b the float32 at m broadcast to every
// lane (an embedded broadcast on AVX-512).
func (k *simd) fmaBcast(m operand.Mem, v, acc reg.Register) {
	if k.avx512() {
		k.c.VFMADD231PS_BCST(m, v, acc)
		return
	}
	b := k.vec()
	k.bcast(m, b)
	k.c.VFMADD231PS(b, v, acc)
}

// synBlockSizes returns the row-block sizes that finish a remainder of fewer
// than r rows: the powers of two below r, largest first.
func synBlockSizes(r int) []int {
	var out []int
	for b := 1; b < r; b *= 2 {
		out = append([]int{b}, out...)
	}
	return out
}

// blocks runs block over the rows (columns) still to do, left() of them
// (emitted before each test): blocks of r while they last, then the
// powers of two below r; name labels the loop.
func (k *simd) blocks(r int, name string, left func() reg.GPVirtual, block func(int)) {
	c := k.c
	lBlk, lRem := k.lbl(name), k.lbl(name+"rem")
	k.label(lBlk)
	c.CMPQ(left(), synImm(r))
	c.JLT(synRef(lRem))
	block(r)
	c.JMP(synRef(lBlk))
	k.label(lRem)
	for _, b := range synBlockSizes(r) {
		lSkip := k.lbl("skip")
		c.CMPQ(left(), synImm(b))
		c.JLT(synRef(lSkip))
		block(b)
		k.label(lSkip)
	}
}

// blocksUntil is blocks over the rows (columns) x … t − 1, which block
// advances x over.
func (k *simd) blocksUntil(t, x reg.GPVirtual, r int, name string, block func(int)) {
	left := k.c.GP64()
	k.blocks(r, name, func() reg.GPVirtual {
		k.c.MOVQ(t, left)
		k.c.SUBQ(x, left)
		return left
	}, block)
}

// zeroAccs allocates r rows of n accumulators, each set to 0.
func (k *simd) zeroAccs(r, n int) [][]reg.VecVirtual {
	acc := make([][]reg.VecVirtual, r)
	for q := range acc {
		acc[q] = make([]reg.VecVirtual, n)
		for v := range acc[q] {
			acc[q][v] = k.vec()
			k.zero(acc[q][v])
		}
	}
	return acc
}

// emitProduct emits Product, phase by phase (causalProduct's methods):
// per pair of panels of V columns from j0, the panels of w transposed
// and the bias, then the diagonal rows and the rows below them.
func emitProduct(f *File, op catalog.Op, isa kernels.ISA) {
	p := newCausalProduct(f, op, isa)
	c := p.c
	p.frame()
	p.args()
	lPair := p.k.lbl("pair")
	p.k.label(lPair)
	p.panels()
	if f.Config.Bidirectional {
		p.allRows()
	} else {
		p.diagonalRows()
		p.rowsBelow()
	}
	c.ADDQ(synImm(2*p.V), p.j0)
	c.CMPQ(p.j0, p.t)
	c.JLT(synRef(lPair))
	p.k.ret()
}

// causalProduct emits one Product kernel: its sizes, and the registers
// and stack slots that live across its phases.
type causalProduct struct {
	k *simd
	c *build.Context

	N, W, LX, LW int // sequence length, head width, row strides of x and w
	V            int // float32 lanes per vector
	R1, R2       int // rows per block: diagonal rows, rows below (productRows)

	panel        int           // bytes of one transposed panel
	pp           reg.GPVirtual // the 64-byte aligned stack buffer: panels A and B, then the bias
	biasA, biasB operand.Mem   // the bias of panel A's and B's columns, in the buffer

	t, wlast, tmp reg.GPVirtual // t; row t−1 of w; a scratch register
	j0            reg.GPVirtual // the first column of the panel pair
	scale         reg.VecVirtual
	blen          operand.Mem // len(bias)

	xi, ci reg.GPVirtual // row i of x and of c
	left   reg.GPVirtual // rows left in the current part of the pair
}

func newCausalProduct(f *File, op catalog.Op, isa kernels.ISA) *causalProduct {
	k := newSIMD(f, Name(op, isa), isa)
	p := &causalProduct{k: k, c: k.c, N: f.Config.N, W: op.W, LX: op.LX, LW: op.LW, V: k.W}
	p.R1, p.R2 = k.productRows()
	return p
}

// frame allocates the stack: two transposed panels of W vectors (A for
// columns j0..j0+V−1, B for the next V), then the bias of those 2V
// columns; 64-byte aligned.
func (p *causalProduct) frame() {
	c, W, V := p.c, p.W, p.V
	p.panel = 4 * W * V
	frame := 2*p.panel + 2*4*V + 64
	if frame > 512 {
		// Too big for a NOSPLIT frame: let the assembler insert the
		// stack-growth check.
		c.Attributes(attr.Attribute(0))
	}
	local := c.AllocLocal(frame)
	p.pp = c.GP64()
	c.LEAQ(local.Offset(63), p.pp)
	c.ANDQ(synImm(-64), p.pp)
	p.biasA, p.biasB = synMem(p.pp, 2*p.panel), synMem(p.pp, 2*p.panel+4*V)
}

// args loads the arguments that live through the kernel.
func (p *causalProduct) args() {
	k, c := p.k, p.c
	p.t = k.gp(c.Param("t"))
	p.wlast = k.gp(c.Param("w").Base()) // row t−1 of w
	p.tmp = c.GP64()
	c.MOVQ(p.t, p.tmp)
	c.DECQ(p.tmp)
	c.IMUL3Q(synImm(4*p.LW), p.tmp, p.tmp)
	c.ADDQ(p.tmp, p.wlast)
	p.scale = k.bcastParam("scale")
	p.j0 = c.GP64()
	c.XORQ(p.j0, p.j0)
	p.blen = k.addr(c.Param("bias").Len(), "len(bias)")
}

// panels fills the stack buffer for the pair at j0: panel A and its
// bias, then, if rows are left past it, panel B and its bias.
func (p *causalProduct) panels() {
	k, c, V := p.k, p.c, p.V
	p.transposePanel(0, 0)
	p.loadBias(0, p.biasA)
	lNoB := k.lbl("nopanelb")
	n := c.GP64()
	p.rowsFrom(n, V)
	c.CMPQ(n, synImm(0))
	c.JLE(synRef(lNoB))
	p.transposePanel(V, p.panel)
	p.loadBias(V, p.biasB)
	k.label(lNoB)
}

// transposePanel writes rows j0+off..j0+off+V−1 of w, transposed, to
// the panel at byte offset dst. Rows past t−1 repeat row t−1: they
// only feed columns j ≥ t of c, which are never stored.
func (p *causalProduct) transposePanel(off, dst int) {
	k, c, W, V, LW, tmp := p.k, p.c, p.W, p.V, p.LW, p.tmp
	wrow := k.gp(c.Param("w").Base())
	c.MOVQ(p.j0, tmp)
	c.IMUL3Q(synImm(4*LW), tmp, tmp)
	c.ADDQ(tmp, wrow)
	if off > 0 {
		c.ADDQ(synImm(4*LW*off), wrow)
	}
	nch := (W + V - 1) / V
	for ch := 0; ch < nch; ch++ {
		var mask reg.Register
		if ch == nch-1 && W%V != 0 {
			mask = k.lanes(W % V)
		}
		rows := make([]reg.VecVirtual, V)
		for r := 0; r < V; r++ {
			rp := wrow
			if r > 0 || off > 0 {
				q := c.GP64()
				c.LEAQ(synMem(wrow, 4*r*LW), q)
				k.minGP(q, p.wlast)
				rp = q
			}
			rows[r] = k.vec()
			k.loadM(synMem(rp, 4*ch*V), mask, rows[r])
		}
		cols := k.transpose(rows)
		for q := 0; q < V && ch*V+q < W; q++ {
			k.storeM(cols[q], nil, synMem(p.pp, dst+4*V*(ch*V+q)))
		}
	}
}

// rowsFrom sets n = t − (j0+off), the rows from j0+off on (may be ≤ 0).
func (p *causalProduct) rowsFrom(n reg.GPVirtual, off int) {
	c := p.c
	c.MOVQ(p.t, n)
	c.SUBQ(p.j0, n)
	if off > 0 {
		c.SUBQ(synImm(off), n)
	}
}

// loadBias stores bias[j0+off .. j0+off+V) (lanes < t, zero past t or
// without a bias) to dst.
func (p *causalProduct) loadBias(off int, dst operand.Mem) {
	k, c := p.k, p.c
	v := k.vec()
	lNo, lDone := k.lbl("nobias"), k.lbl("biasdone")
	c.CMPQ(p.blen, synImm(0))
	c.JEQ(synRef(lNo))
	n := c.GP64()
	p.rowsFrom(n, off)
	c.CMPQ(n, synImm(0))
	c.JLE(synRef(lNo))
	k.capLanes(n)
	m := k.dynLanes(n)
	bb := k.gp(c.Param("bias").Base())
	k.loadM(synMemIdx(bb, 4*off, p.j0, 4), m, v)
	c.JMP(synRef(lDone))
	k.label(lNo)
	k.zero(v)
	k.label(lDone)
	k.storeM(v, nil, dst)
}

// newMask starts the store mask of the diagonal vector of row i (lanes
// ≤ d, with d the row's distance from the vector's first column): on
// AVX-512 a running bit mask (2m+1 per row, capped at 16 bits), on AVX2 a
// byte offset into the mask table (4·(7−d), 0 meaning a full store).
func (p *causalProduct) newMask() reg.GPVirtual {
	c := p.c
	if p.k.avx512() {
		m := c.GP32()
		c.MOVL(operand.U32(1), m)
		return m
	}
	m := c.GP64()
	c.MOVQ(synImm(4*(p.V-1)), m)
	return m
}

// storeDiag stores v to dst under the diagonal mask m (newMask) and
// moves m on to the next row.
func (p *causalProduct) storeDiag(v reg.Register, m reg.GPVirtual, dst operand.Mem) {
	k, c := p.k, p.c
	if k.avx512() {
		km := c.K()
		c.KMOVW(m, km)
		c.VMOVUPS(v, km, dst)
		c.LEAL(operand.Mem{Base: m, Index: m, Scale: 1, Disp: 1}, m)
		c.ANDL(operand.U32(0xFFFF), m)
		return
	}
	lFull, lDone := k.lbl("full"), k.lbl("stored")
	c.CMPQ(m, synImm(0))
	c.JEQ(synRef(lFull))
	tb := c.GP64()
	c.LEAQ(k.maskTable(), tb)
	mk := k.vec()
	c.VMOVDQU(synMemIdx(tb, 0, m, 1), mk)
	c.VMASKMOVPS(v, mk, dst)
	c.SUBQ(synImm(4), m)
	c.JMP(synRef(lDone))
	k.label(lFull)
	c.VMOVUPS(v, dst)
	k.label(lDone)
}

// rowBlocks runs block over the rows left: blocks of r while they
// last, then the powers of two below r.
func (p *causalProduct) rowBlocks(r int, block func(int)) {
	p.k.blocks(r, "rows", func() reg.GPVirtual { return p.left }, block)
}

// overP runs step over p < W, unrolled by synProductUnroll: step(xp,
// wp, u) handles p = p0+u with x[i, p0] at xp and the panel vectors
// of p0 at wp.
func (p *causalProduct) overP(step func(xp, wp reg.GPVirtual, u int)) {
	k, c, W, V := p.k, p.c, p.W, p.V
	xp, wp := c.GP64(), c.GP64()
	c.MOVQ(p.xi, xp)
	c.MOVQ(p.pp, wp)
	const U = synProductUnroll
	rest := W
	if W >= 2*U {
		cnt := c.GP64()
		c.MOVQ(synImm(W/U), cnt)
		l := k.lbl("ploop")
		k.label(l)
		for u := 0; u < U; u++ {
			step(xp, wp, u)
		}
		c.ADDQ(synImm(4*U), xp)
		c.ADDQ(synImm(4*V*U), wp)
		c.DECQ(cnt)
		c.JNZ(synRef(l))
		rest = W % U
	}
	for u := 0; u < rest; u++ {
		step(xp, wp, u)
	}
}

// nextRows moves x's and c's rows on by a block of r and counts them off.
func (p *causalProduct) nextRows(r int) {
	c := p.c
	c.ADDQ(synImm(4*r*p.LX), p.xi)
	c.ADDQ(synImm(4*r*p.N), p.ci)
	c.SUBQ(synImm(r), p.left)
}

// diagonalRows emits rows j0 .. min(j0+V, t)−1: panel A only, masked to
// the diagonal.
func (p *causalProduct) diagonalRows() {
	k, c, N, LX, V, tmp := p.k, p.c, p.N, p.LX, p.V, p.tmp
	p.xi = k.gp(c.Param("x").Base())
	c.MOVQ(p.j0, tmp)
	c.IMUL3Q(synImm(4*LX), tmp, tmp)
	c.ADDQ(tmp, p.xi)
	p.ci = k.gp(c.Param("c").Base())
	c.MOVQ(p.j0, tmp)
	c.IMUL3Q(synImm(4*(N+1)), tmp, tmp)
	c.ADDQ(tmp, p.ci)
	p.left = c.GP64()
	p.rowsFrom(p.left, 0)
	k.capLanes(p.left)
	mA := p.newMask()
	p.rowBlocks(p.R1, func(r int) {
		acc := make([]reg.VecVirtual, r)
		for q := range acc {
			acc[q] = k.vec()
			k.zero(acc[q])
		}
		p.overP(func(xp, wp reg.GPVirtual, u int) {
			wt := k.vec()
			k.load(synMem(wp, 4*V*u), wt)
			for q := 0; q < r; q++ {
				k.fmaBcast(synMem(xp, 4*(q*LX+u)), wt, acc[q])
			}
		})
		for q := 0; q < r; q++ {
			c.VFMADD213PS(p.biasA, p.scale, acc[q])
			p.storeDiag(acc[q], mA, synMem(p.ci, 4*q*N))
		}
		p.nextRows(r)
	})
}

// rowsBelow emits rows j0+V .. t−1: panel A whole, panel B masked to the
// diagonal.
func (p *causalProduct) rowsBelow() {
	k, c, N, LX, V := p.k, p.c, p.N, p.LX, p.V
	lNext := k.lbl("nextpair")
	p.rowsFrom(p.left, V)
	c.CMPQ(p.left, synImm(0))
	c.JLE(synRef(lNext))
	mB := p.newMask()
	p.rowBlocks(p.R2, func(r int) {
		accA, accB := make([]reg.VecVirtual, r), make([]reg.VecVirtual, r)
		for q := range accA {
			accA[q], accB[q] = k.vec(), k.vec()
			k.zero(accA[q])
			k.zero(accB[q])
		}
		p.overP(func(xp, wp reg.GPVirtual, u int) {
			wa, wb := k.vec(), k.vec()
			k.load(synMem(wp, 4*V*u), wa)
			k.load(synMem(wp, p.panel+4*V*u), wb)
			for q := 0; q < r; q++ {
				b := k.vec()
				k.bcast(synMem(xp, 4*(q*LX+u)), b)
				c.VFMADD231PS(b, wa, accA[q])
				c.VFMADD231PS(b, wb, accB[q])
			}
		})
		for q := 0; q < r; q++ {
			c.VFMADD213PS(p.biasA, p.scale, accA[q])
			k.storeM(accA[q], nil, synMem(p.ci, 4*q*N))
			c.VFMADD213PS(p.biasB, p.scale, accB[q])
			p.storeDiag(accB[q], mB, synMem(p.ci, 4*(q*N+V)))
		}
		p.nextRows(r)
	})
	k.label(lNext)
}

// allRows emits, for a bidirectional spec, rows 0 .. t−1 of the panel
// pair: panels A and B, each store masked to the columns j < t.
func (p *causalProduct) allRows() {
	k, c, N, LX, V := p.k, p.c, p.N, p.LX, p.V
	p.xi = k.gp(c.Param("x").Base())
	p.ci = k.gp(c.Param("c").Base())
	c.LEAQ(synMemIdx(p.ci, 0, p.j0, 4), p.ci)
	p.left = c.GP64()
	c.MOVQ(p.t, p.left)
	// The lanes of A and B below t: min(t−j0, V) and max(min(t−j0−V, V), 0).
	nA, nB := c.GP64(), c.GP64()
	p.rowsFrom(nA, 0)
	k.capLanes(nA)
	p.rowsFrom(nB, V)
	k.capLanes(nB)
	lPos := k.lbl("bpos")
	c.CMPQ(nB, synImm(0))
	c.JGE(synRef(lPos))
	c.XORQ(nB, nB)
	k.label(lPos)
	p.rowBlocks(p.R2, func(r int) {
		accA, accB := make([]reg.VecVirtual, r), make([]reg.VecVirtual, r)
		for q := range accA {
			accA[q], accB[q] = k.vec(), k.vec()
			k.zero(accA[q])
			k.zero(accB[q])
		}
		p.overP(func(xp, wp reg.GPVirtual, u int) {
			wa, wb := k.vec(), k.vec()
			k.load(synMem(wp, 4*V*u), wa)
			k.load(synMem(wp, p.panel+4*V*u), wb)
			for q := 0; q < r; q++ {
				b := k.vec()
				k.bcast(synMem(xp, 4*(q*LX+u)), b)
				c.VFMADD231PS(b, wa, accA[q])
				c.VFMADD231PS(b, wb, accB[q])
			}
		})
		mA, mB := k.dynLanes(nA), k.dynLanes(nB)
		for q := 0; q < r; q++ {
			c.VFMADD213PS(p.biasA, p.scale, accA[q])
			k.storeM(accA[q], mA, synMem(p.ci, 4*q*N))
			c.VFMADD213PS(p.biasB, p.scale, accB[q])
			k.storeM(accB[q], mB, synMem(p.ci, 4*(q*N+V)))
		}
		p.nextRows(r)
	})
}

// backPlan chooses, for BackX and BackW of width W (nv vectors), how many
// vectors of p one pass covers (pc) and how many rows a block holds (r):
// r·pc accumulators, pc operand vectors, a broadcast and the tail mask must
// fit the register file (16 YMM on AVX2, 32 ZMM on AVX-512), and r·pc
// chains must cover the FMA latency. Measured best on Zen 4 at N 128 with
// W 32 and 64.
func (k *simd) backPlan(W, nv int) (pc, r int) {
	switch {
	case nv == 1:
		return 1, 8
	case k.avx512():
		return 2, 8
	case W%k.W == 0:
		return 2, 6
	}
	return 2, 5 // one more register for the AVX2 tail mask
}

// synPChunk is a run of vectors of p handled in one pass.
type synPChunk struct{ first, n int }

func synPChunks(nv, pc int) []synPChunk {
	var out []synPChunk
	for v := 0; v < nv; v += pc {
		n := pc
		if v+n > nv {
			n = nv - v
		}
		out = append(out, synPChunk{v, n})
	}
	return out
}

// rowVec loads vector v (of nv, the last one masked by tail when not nil)
// of a row of W floats at base+disp.
func (k *simd) rowVec(base reg.Register, disp, v, nv int, tail reg.Register, dst reg.Register) {
	var m reg.Register
	if v == nv-1 {
		m = tail
	}
	k.loadM(synMem(base, disp+4*k.W*v), m, dst)
}

// accumulate adds b·vs[v] to acc[v] for each v, with b the float32 at m.
func (k *simd) accumulate(m operand.Mem, vs, acc []reg.VecVirtual) {
	if len(vs) == 1 {
		k.fmaBcast(m, vs[0], acc[0])
		return
	}
	b := k.vec()
	k.bcast(m, b)
	for v := range vs {
		k.c.VFMADD231PS(b, vs[v], acc[v])
	}
}

func emitProductBackX(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	c := k.c
	N, W, LX, LW, V := f.Config.N, op.W, op.LX, op.LW, k.W
	nv := (W + V - 1) / V
	pc, R := k.backPlan(W, nv)

	t := k.gp(c.Param("t"))
	i0 := c.GP64()
	c.XORQ(i0, i0)
	bidi := f.Config.Bidirectional

	block := func(r int) {
		for _, ch := range synPChunks(nv, pc) {
			var tail reg.Register
			if ch.first+ch.n == nv {
				tail = k.tailOf(W)
			}
			acc := k.zeroAccs(r, ch.n)
			dcp := k.gp(c.Param("dc").Base())
			tmp := c.GP64()
			c.MOVQ(i0, tmp)
			c.IMUL3Q(synImm(4*N), tmp, tmp)
			c.ADDQ(tmp, dcp)
			wp := k.gp(c.Param("w").Base())
			cnt := c.GP64()
			if bidi {
				c.MOVQ(t, cnt) // every column j < t: no corner
			} else {
				c.MOVQ(i0, cnt)
			}
			lJ, lTri := k.lbl("cols"), k.lbl("tri")
			c.TESTQ(cnt, cnt)
			c.JZ(synRef(lTri))
			// Columns j < i0: every row of the block uses them.
			k.label(lJ)
			wv := make([]reg.VecVirtual, ch.n)
			for v := range wv {
				wv[v] = k.vec()
				k.rowVec(wp, 0, ch.first+v, nv, tail, wv[v])
			}
			for q := 0; q < r; q++ {
				k.accumulate(synMem(dcp, 4*q*N), wv, acc[q])
			}
			c.ADDQ(synImm(4), dcp)
			c.ADDQ(synImm(4*LW), wp)
			c.DECQ(cnt)
			c.JNZ(synRef(lJ))
			// Columns j = i0+e, e < r: rows q ≥ e of the block.
			k.label(lTri)
			for e := 0; e < r && !bidi; e++ {
				wv := make([]reg.VecVirtual, ch.n)
				for v := range wv {
					wv[v] = k.vec()
					k.rowVec(wp, 4*e*LW, ch.first+v, nv, tail, wv[v])
				}
				for q := e; q < r; q++ {
					k.accumulate(synMem(dcp, 4*(q*N+e)), wv, acc[q])
				}
			}
			// dx = scale·acc (overwrite).
			scale := k.bcastParam("scale")
			dxp := k.gp(c.Param("dx").Base())
			c.MOVQ(i0, tmp)
			c.IMUL3Q(synImm(4*LX), tmp, tmp)
			c.ADDQ(tmp, dxp)
			for q := 0; q < r; q++ {
				for v := 0; v < ch.n; v++ {
					c.VMULPS(scale, acc[q][v], acc[q][v])
					var m reg.Register
					if ch.first+v == nv-1 {
						m = tail
					}
					k.storeM(acc[q][v], m, synMem(dxp, 4*(q*LX+V*(ch.first+v))))
				}
			}
		}
		c.ADDQ(synImm(r), i0)
	}

	k.blocksUntil(t, i0, R, "rows", block)
	k.ret()
}

// backWPlan chooses, for BackW of width W (nv vectors), how many vectors
// of p one pass covers (pc) and how many rows of dc a block reads (r): the
// block keeps r·pc vectors of x, pc accumulators (a row of dw) and a
// broadcast in registers (16 YMM on AVX2, with the tail mask; 32 ZMM on
// AVX-512), and r is capped where the dw traffic per FMA no longer falls.
func (k *simd) backWPlan(nv int) (pc, r int) {
	regs, maxPC := 32-1, 4
	if !k.avx512() {
		regs, maxPC = 16-2, 2
	}
	pc = min(nv, maxPC)
	return pc, min(12, (regs-pc)/pc)
}

// emitProductBackW emits BackW (emitProductBackWRows at N ≥ backWRowsN
// with at least two vectors per row, emitProductBackWCols otherwise) and
// then dbias[j] += Σ_{i≥j} dc[i,j], by panels of V columns.
func emitProductBackW(f *File, op catalog.Op, isa kernels.ISA) {
	k := newSIMD(f, Name(op, isa), isa)
	var t reg.GPVirtual
	if f.Config.N >= backWRowsN && (op.W+k.W-1)/k.W >= 2 {
		t = emitProductBackWRows(k, f, op)
	} else {
		t = emitProductBackWCols(k, f, op)
	}
	c := k.c
	lEnd := k.lbl("end")
	c.CMPQ(k.addr(c.Param("dbias").Len(), "len(dbias)"), synImm(0))
	c.JEQ(synRef(lEnd))
	k.columnSums(t, "dc", "dbias")
	k.label(lEnd)
	k.ret()
}

// backWRowsN is the row stride of dc from which BackW reads dc along its
// rows: at N 1024 (a 4 MB dc, beyond the L2) the row blocks took BackW
// from 1.04 to 0.65 ms (AVX-512) and 1.99 to 1.03 ms (AVX2); at N 512 they
// were 7% and 21% faster, at N 128 and 256 7–20% slower (see the note on
// emitProductBackWRows).
const backWRowsN = 512

// emitProductBackWRows emits BackW row block by row block: rows i0..i0+r−1 of
// x (times scale) stay in registers while the columns j of dc go by, and
// each row j of dw is loaded, takes Σ_e dc[i0+e, j]·x[i0+e, :] and is
// stored. dc is read along its rows, r streams at a time, once per pass of
// pc vectors of p: reading it down its columns (stride 4N bytes, a new
// page per row at N 1024) left BackW at a third of BackX's speed. The
// corner j ≥ i0 of a causal block is unrolled so that dc is never read
// above the diagonal.
func emitProductBackWRows(k *simd, f *File, op catalog.Op) (t reg.GPVirtual) {
	c := k.c
	N, W, LX, LW, V := f.Config.N, op.W, op.LX, op.LW, k.W
	nv := (W + V - 1) / V
	pc, R := k.backWPlan(nv)

	t = k.gp(c.Param("t"))
	i0 := c.GP64()
	c.XORQ(i0, i0)
	bidi := f.Config.Bidirectional

	block := func(r int) {
		for _, ch := range synPChunks(nv, pc) {
			var tail reg.Register
			if ch.first+ch.n == nv {
				tail = k.tailOf(W)
			}
			// x rows i0..i0+r−1 of the chunk, times scale.
			scale := k.bcastParam("scale")
			xp := k.gp(c.Param("x").Base())
			tmp := c.GP64()
			c.MOVQ(i0, tmp)
			c.IMUL3Q(synImm(4*LX), tmp, tmp)
			c.ADDQ(tmp, xp)
			xs := make([][]reg.VecVirtual, r)
			for e := range xs {
				xs[e] = make([]reg.VecVirtual, ch.n)
				for v := range xs[e] {
					xs[e][v] = k.vec()
					k.rowVec(xp, 4*e*LX, ch.first+v, nv, tail, xs[e][v])
					c.VMULPS(scale, xs[e][v], xs[e][v])
				}
			}
			dcp := k.gp(c.Param("dc").Base()) // dc[i0, 0]
			c.MOVQ(i0, tmp)
			c.IMUL3Q(synImm(4*N), tmp, tmp)
			c.ADDQ(tmp, dcp)
			dwp := k.gp(c.Param("dw").Base()) // dw[0, chunk]
			if ch.first > 0 {
				c.ADDQ(synImm(4*V*ch.first), dwp)
			}
			// column updates dw[j] (dcp at column j, dwp at row j, plus
			// the displacements) with the rows e of the block from first.
			column := func(dcDisp, dwDisp, first int) {
				acc := make([]reg.VecVirtual, ch.n)
				for v := range acc {
					acc[v] = k.vec()
					k.rowVec(dwp, dwDisp, v, ch.n, tail, acc[v])
				}
				for e := first; e < r; e++ {
					k.accumulate(synMem(dcp, dcDisp+4*e*N), xs[e], acc)
				}
				for v := range acc {
					k.storeM(acc[v], maskIf(v == ch.n-1, tail), synMem(dwp, dwDisp+4*V*v))
				}
			}
			cnt := c.GP64()
			if bidi {
				c.MOVQ(t, cnt) // every column j < t: no corner
			} else {
				c.MOVQ(i0, cnt) // the columns j < i0 every row of the block reads
			}
			lJ, lCorner := k.lbl("cols"), k.lbl("corner")
			c.TESTQ(cnt, cnt)
			c.JZ(synRef(lCorner))
			k.label(lJ)
			column(0, 0, 0)
			c.ADDQ(synImm(4), dcp)
			c.ADDQ(synImm(4*LW), dwp)
			c.DECQ(cnt)
			c.JNZ(synRef(lJ))
			k.label(lCorner)
			// Columns j = i0+q, q < r: rows e ≥ q of the block.
			for q := 0; q < r && !bidi; q++ {
				column(4*q, 4*q*LW, q)
			}
		}
		c.ADDQ(synImm(r), i0)
	}

	k.blocksUntil(t, i0, R, "blocks", block)
	return t
}

// emitProductBackWCols emits BackW column block by column block: the
// rows j0..j0+r−1 of dw stay in registers (r·pc accumulators) while every
// row i ≥ j0 of x goes by, each taking r broadcasts of dc[i, j0+q]. It
// keeps no dw traffic in its loop, which wins while dc fits the L2 (N <
// backWRowsN).
func emitProductBackWCols(k *simd, f *File, op catalog.Op) (t reg.GPVirtual) {
	c := k.c
	N, W, LX, LW, V := f.Config.N, op.W, op.LX, op.LW, k.W
	nv := (W + V - 1) / V
	pc, R := k.backPlan(W, nv)

	t = k.gp(c.Param("t"))
	j0 := c.GP64()
	c.XORQ(j0, j0)
	bidi := f.Config.Bidirectional

	block := func(r int) {
		for _, ch := range synPChunks(nv, pc) {
			var tail reg.Register
			if ch.first+ch.n == nv {
				tail = k.tailOf(W)
			}
			acc := k.zeroAccs(r, ch.n)
			xj := k.gp(c.Param("x").Base()) // row j0 of x (row 0 for a bidirectional spec)
			tmp := c.GP64()
			if !bidi {
				c.MOVQ(j0, tmp)
				c.IMUL3Q(synImm(4*LX), tmp, tmp)
				c.ADDQ(tmp, xj)
			}
			dcj := k.gp(c.Param("dc").Base()) // dc[j0, j0] (dc[0, j0])
			cnt := c.GP64()
			if bidi {
				c.LEAQ(synMemIdx(dcj, 0, j0, 4), dcj)
				c.MOVQ(t, cnt) // every row i < t: no corner
			} else {
				c.MOVQ(j0, tmp)
				c.IMUL3Q(synImm(4*(N+1)), tmp, tmp)
				c.ADDQ(tmp, dcj)
			}
			// Rows i = j0+e, e < r−1: columns j0+q, q ≤ e.
			for e := 0; e < r-1 && !bidi; e++ {
				xv := make([]reg.VecVirtual, ch.n)
				for v := range xv {
					xv[v] = k.vec()
					k.rowVec(xj, 4*e*LX, ch.first+v, nv, tail, xv[v])
				}
				for q := 0; q <= e; q++ {
					k.accumulate(synMem(dcj, 4*(e*N+q)), xv, acc[q])
				}
			}
			// Rows i = j0+r−1..t−1: every column of the block.
			if !bidi {
				c.ADDQ(synImm(4*(r-1)*LX), xj)
				c.ADDQ(synImm(4*(r-1)*N), dcj)
				c.MOVQ(t, cnt)
				c.SUBQ(j0, cnt)
				c.SUBQ(synImm(r-1), cnt)
			}
			lI := k.lbl("rows")
			k.label(lI)
			xv := make([]reg.VecVirtual, ch.n)
			for v := range xv {
				xv[v] = k.vec()
				k.rowVec(xj, 0, ch.first+v, nv, tail, xv[v])
			}
			for q := 0; q < r; q++ {
				k.accumulate(synMem(dcj, 4*q), xv, acc[q])
			}
			c.ADDQ(synImm(4*LX), xj)
			c.ADDQ(synImm(4*N), dcj)
			c.DECQ(cnt)
			c.JNZ(synRef(lI))
			// dw += scale·acc.
			scale := k.bcastParam("scale")
			dwp := k.gp(c.Param("dw").Base())
			c.MOVQ(j0, tmp)
			c.IMUL3Q(synImm(4*LW), tmp, tmp)
			c.ADDQ(tmp, dwp)
			for q := 0; q < r; q++ {
				for v := 0; v < ch.n; v++ {
					dst := synMem(dwp, 4*(q*LW+V*(ch.first+v)))
					if ch.first+v == nv-1 && tail != nil {
						old := k.vec()
						k.loadM(dst, tail, old)
						c.VFMADD213PS(old, scale, acc[q][v])
						k.storeM(acc[q][v], tail, dst)
						continue
					}
					c.VFMADD213PS(dst, scale, acc[q][v])
					k.storeM(acc[q][v], nil, dst)
				}
			}
		}
		c.ADDQ(synImm(r), j0)
	}

	k.blocksUntil(t, j0, R, "blocks", block)
	return t
}

// maskIf is mask when cond holds, else nil (no mask).
func maskIf(cond bool, mask reg.Register) reg.Register {
	if cond {
		return mask
	}
	return nil
}

// columnSums adds to out[j] (a slice parameter) the sums Σ_{j≤i<t}
// tri[i·N+j] over the causal triangle of the slice parameter tri
// (Σ_{i<t} over the square for a bidirectional spec).
func (k *simd) columnSums(t reg.GPVirtual, tri, out string) {
	c := k.c
	N, V := k.f.Config.N, k.W
	j0 := c.GP64()
	c.XORQ(j0, j0)
	lPanel := k.lbl("colpanel")
	k.label(lPanel)
	if k.f.Config.Bidirectional {
		k.squareColumnSums(t, j0, tri, out)
		c.ADDQ(synImm(V), j0)
		c.CMPQ(j0, t)
		c.JLT(synRef(lPanel))
		return
	}
	dcp := k.gp(c.Param(tri).Base()) // tri[j0, j0]
	tmp := c.GP64()
	c.MOVQ(j0, tmp)
	c.IMUL3Q(synImm(4*(N+1)), tmp, tmp)
	c.ADDQ(tmp, dcp)
	rows := c.GP64()
	c.MOVQ(t, rows)
	c.SUBQ(j0, rows)
	acc := k.vec()
	k.zero(acc)
	var m reg.GPVirtual // as in emitProduct: lanes ≤ i−j0
	if k.avx512() {
		m = c.GP32()
		c.MOVL(operand.U32(1), m)
	} else {
		m = c.GP64()
		c.MOVQ(synImm(4*(V-1)), m)
	}
	lRow := k.lbl("colrow")
	k.label(lRow)
	v := k.vec()
	if k.avx512() {
		km := c.K()
		c.KMOVW(m, km)
		c.VMOVUPS_Z(synMem(dcp, 0), km, v)
		c.VADDPS(v, acc, acc)
		c.LEAL(operand.Mem{Base: m, Index: m, Scale: 1, Disp: 1}, m)
		c.ANDL(operand.U32(0xFFFF), m)
	} else {
		lFull, lDone := k.lbl("colfull"), k.lbl("coldone")
		c.CMPQ(m, synImm(0))
		c.JEQ(synRef(lFull))
		tb := c.GP64()
		c.LEAQ(k.maskTable(), tb)
		mk := k.vec()
		c.VMOVDQU(synMemIdx(tb, 0, m, 1), mk)
		c.VMASKMOVPS(synMem(dcp, 0), mk, v)
		c.VADDPS(v, acc, acc)
		c.SUBQ(synImm(4), m)
		c.JMP(synRef(lDone))
		k.label(lFull)
		c.VADDPS(synMem(dcp, 0), acc, acc)
		k.label(lDone)
	}
	c.ADDQ(synImm(4*N), dcp)
	c.DECQ(rows)
	c.JNZ(synRef(lRow))
	// out[j0 : j0+min(V, t−j0)] += acc.
	n := c.GP64()
	c.MOVQ(t, n)
	c.SUBQ(j0, n)
	k.capLanes(n)
	mk := k.dynLanes(n)
	ob := k.gp(c.Param(out).Base())
	dst := synMemIdx(ob, 0, j0, 4)
	old := k.vec()
	k.loadM(dst, mk, old)
	c.VADDPS(old, acc, acc)
	k.storeM(acc, mk, dst)
	c.ADDQ(synImm(V), j0)
	c.CMPQ(j0, t)
	c.JLT(synRef(lPanel))
}

// squareColumnSums adds to out[j0 : j0+min(V, t−j0)] the column sums
// Σ_{i<t} tri[i·N+j] of a bidirectional spec's square, loads masked to the
// columns j < t.
func (k *simd) squareColumnSums(t, j0 reg.GPVirtual, tri, out string) {
	c := k.c
	N := k.f.Config.N
	n := c.GP64()
	c.MOVQ(t, n)
	c.SUBQ(j0, n)
	k.capLanes(n)
	mk := k.dynLanes(n)
	dcp := k.gp(c.Param(tri).Base()) // tri[0, j0]
	c.LEAQ(synMemIdx(dcp, 0, j0, 4), dcp)
	rows := c.GP64()
	c.MOVQ(t, rows)
	acc := k.vec()
	k.zero(acc)
	lRow := k.lbl("sqrow")
	k.label(lRow)
	v := k.vec()
	k.loadM(synMem(dcp, 0), mk, v)
	c.VADDPS(v, acc, acc)
	c.ADDQ(synImm(4*N), dcp)
	c.DECQ(rows)
	c.JNZ(synRef(lRow))
	ob := k.gp(c.Param(out).Base())
	dst := synMemIdx(ob, 0, j0, 4)
	old := k.vec()
	k.loadM(dst, mk, old)
	c.VADDPS(old, acc, acc)
	k.storeM(acc, mk, dst)
}
