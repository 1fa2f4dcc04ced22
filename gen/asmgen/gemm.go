package asmgen

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// The GEMM micro-kernel of the linear layers (kernels.GemmTileFunc): an
// MR×NR register tile of accumulators, one vector per NR/lanes columns of
// a row, fed per p by NR/lanes loads of B's row p and MR broadcasts of A's
// column p. A is read through its two strides (ai between rows, ap between
// p), so the same code reads a packed panel (ai 1, ap MR), a row-major
// matrix (ai its row stride, ap 1) and a transposed one (ai 1, ap its row
// stride): the runtime packs only what the strides cannot describe. The
// epilogue adds the bias row, if any, and then adds the tile to (or, to
// overwrite, stores it in) the mr×nr corner of c: with K masks on AVX-512,
// and on AVX2 with plain loads and stores for full-width rows or
// VMASKMOVPS for a narrower tile.
//
// Row i of A is addressed from three bases (rows 0, 3 and 6) and the row
// stride L = 4·ai as an index register with scale 1, 2 or 4: rows 0, 1,
// 2, 4 from the first, 3, 5 from the second, 6, 7 from the third.
//
// With asum (the bias gradient of a backward product, whose A is the
// transposed output gradient, ai = 1), a first short loop adds each p's
// MR contiguous floats of A, masked to mr lanes, into one vector, over p
// in increasing order.
//
// With apack or bpack (the first tiles of a k-block to read a transposed A
// or a B in place, in runtime/mat), one of three more loops, one p per
// iteration, also stores A's MR floats or B's NR floats of each p into
// them as packed panels, asks for the lines gemmPackAhead p ahead, and,
// copying A, sums its rows into one accumulator in place of the asum loop.
//
// With mr > MR the code above runs once per tile of MR rows: after each
// tile's stores, while rows are left, it takes mr down by MR and moves
// its arguments on in their frame slots (a by at floats; c, asum and
// apack by a tile); after the first tile a copied B is read from bpack
// (b = bpack, bp = NR, bpack emptied). Nothing is kept in registers
// across tiles, so the loop adds no register pressure.
//
// AVX-512: 8×32, 16 ZMM accumulators + 2 B + 1 A = 19 registers.
// AVX2:    6×16, 12 YMM accumulators + 2 B + 1 A (+ the copy's sum) = 16:
// never Y16+, which Compile (internal/regalloc) enforces.

// gemmPackAhead is how many p ahead of the one it multiplies a copying
// loop asks for the lines of B's row (and A's, when copying A): the first
// tile to read an operand in place reads it from memory, one line per p,
// and without the prefetches it waits on each.
const gemmPackAhead = 32

// emitGemmTile emits the kernel, phase by phase (gemmTile's methods).
func emitGemmTile(f *File, op catalog.Op, isa kernels.ISA) {
	t := newGemmTile(f, isa)
	t.start()
	t.prefetchC()
	t.rowSums()
	t.zeroAccs()
	t.products()
	t.store()
	t.nextTile()
	t.c.Label("ret")
	t.c.VZEROUPPER()
	t.c.RET()
}

// gemmTile emits one GemmTile kernel: the shape of the level, the
// registers that live across the phases, and the phases as methods in the
// order of the code (start, prefetchC, rowSums, zeroAccs, products, store,
// nextTile).
type gemmTile struct {
	f      *File
	c      *build.Context
	isa    kernels.ISA
	mr, nr int // MR and NR of the level
	lanes  int // float32 lanes per vector
	vecs   int // vectors per tile row

	// Set by start: the p count, A's row pointers (rows 0, 3 and 6; a6
	// only with MR > 6) and its strides in bytes, B's row and its stride.
	kc, a0, a3, a6     reg.GPVirtual
	rowStride, pStride reg.GPVirtual
	bp, bStride        reg.GPVirtual

	acc    [][]reg.VecVirtual // the accumulators, MR × vecs (zeroAccs)
	clamps int                // row clamps of the sums so far, for their labels

	// Set by store: c's row pointer and stride in bytes, and the rows of
	// this tile (the mr argument).
	cp, ldc, rows reg.GPVirtual
}

func newGemmTile(f *File, isa kernels.ISA) *gemmTile {
	mr, nr := catalog.GemmShape(isa)
	lanes := 8
	if isa == kernels.AVX512 {
		lanes = 16
	}
	vecs := nr / lanes
	if vecs*lanes != nr || vecs != 2 || mr > 8 {
		panic(fmt.Sprintf("asmgen: GemmTile %s: tile %d×%d is not up to 8 rows of two vectors", isa, mr, nr))
	}
	if mr != 8 && mr != 6 { // the copying loops move A's MR floats of a p as 32 bytes, or 16 and 8
		panic(fmt.Sprintf("asmgen: GemmTile %s: the copy of A handles 6 or 8 rows, not %d", isa, mr))
	}
	return &gemmTile{f: f, c: f.Ctx, isa: isa, mr: mr, nr: nr, lanes: lanes, vecs: vecs}
}

func (t *gemmTile) vec() reg.VecVirtual {
	if t.isa == kernels.AVX512 {
		return t.c.ZMM()
	}
	return t.c.YMM()
}

// gp64 loads a parameter component into a new 64-bit register.
func (t *gemmTile) gp64(comp gotypes.Component) reg.GPVirtual {
	return t.c.Load(comp, t.c.GP64()).(reg.GPVirtual)
}

// start places the label each tile of MR rows starts at and loads the
// arguments the products read.
func (t *gemmTile) start() {
	c := t.c
	c.Comment("One tile of MR rows per pass from here; \"done\" moves the frame's")
	c.Comment("arguments on to the next tile while mr > MR.")
	c.Label("tile")
	t.kc = t.gp64(c.Param("kc"))
	t.a0 = t.gp64(c.Param("a").Base())
	t.rowStride = t.gp64(c.Param("ai"))
	c.SHLQ(operand.U8(2), t.rowStride)
	t.pStride = t.gp64(c.Param("ap"))
	c.SHLQ(operand.U8(2), t.pStride)
	t.bp = t.gp64(c.Param("b").Base())
	t.bStride = t.gp64(c.Param("bp"))
	c.SHLQ(operand.U8(2), t.bStride)
	t.a3 = c.GP64()
	c.LEAQ(operand.Mem{Base: t.rowStride, Index: t.rowStride, Scale: 2}, t.a3) // 3L
	if t.mr > 6 {
		t.a6 = c.GP64()
		c.LEAQ(operand.Mem{Base: t.a0, Index: t.a3, Scale: 2}, t.a6) // a + 6L
	}
	c.ADDQ(t.a0, t.a3) // a + 3L
}

// rowAddr is the address of A's row i at the current p.
func (t *gemmTile) rowAddr(i int) operand.Mem {
	switch i {
	case 0:
		return operand.Mem{Base: t.a0}
	case 1, 2, 4:
		return operand.Mem{Base: t.a0, Index: t.rowStride, Scale: uint8(i)}
	case 3:
		return operand.Mem{Base: t.a3}
	case 5:
		return operand.Mem{Base: t.a3, Index: t.rowStride, Scale: 2}
	case 6:
		return operand.Mem{Base: t.a6}
	}
	return operand.Mem{Base: t.a6, Index: t.rowStride, Scale: 1}
}

// prefetchC asks for the tile's rows of c.
func (t *gemmTile) prefetchC() {
	c := t.c
	c.Comment("Prefetch the tile's rows of c (first and last byte of each), so that their")
	c.Comment("misses overlap the products rather than stall the stores at the end.")
	pc := t.gp64(c.Param("c").Base())
	pl := t.gp64(c.Param("ldc"))
	c.SHLQ(operand.U8(2), pl)
	for i := 0; i < t.mr; i++ {
		c.PREFETCHT0(operand.Mem{Base: pc})
		c.PREFETCHT0(operand.Mem{Base: pc, Disp: 4*t.nr - 1})
		if i+1 < t.mr {
			c.ADDQ(pl, pc)
		}
	}
}

// asumKit returns the 8-lane kit of A's row sums and its mask of the
// lanes i < mr.
func (t *gemmTile) asumKit() (*simd, reg.Register) {
	c := t.c
	k := newSIMD(t.f, "gemmAsum", t.isa).narrow()
	// This tile's rows, min(mr, MR) (asumKit runs once per loop that
	// sums, so each clamp gets a label of its own).
	n := t.gp64(c.Param("mr"))
	t.clamps++
	l := fmt.Sprintf("asumrows%d", t.clamps)
	c.CMPQ(n, operand.U32(t.mr))
	c.JLE(operand.LabelRef(l))
	c.MOVQ(operand.U32(t.mr), n)
	c.Label(l)
	return k, k.dynLanes(n)
}

// addToAsum adds the lanes of sum, A's row sums over the block, to
// asum's.
func (t *gemmTile) addToAsum(k *simd, lanes reg.Register, sum reg.VecVirtual) {
	c := t.c
	sp := t.gp64(c.Param("asum").Base())
	old := c.YMM()
	k.loadM(operand.Mem{Base: sp}, lanes, old)
	c.VADDPS(sum, old, old)
	k.storeM(old, lanes, operand.Mem{Base: sp})
}

// rowSums emits the loop that adds A's rows into asum, when asum is
// given and A is not copied (the copying loop sums it then).
func (t *gemmTile) rowSums() {
	c := t.c
	c.Comment("asum[i] += Σ_p a[i + p·ap], i < mr (ai = 1: a column of A is contiguous)")
	asumLen := t.gp64(c.Param("asum").Len())
	c.TESTQ(asumLen, asumLen)
	c.JZ(operand.LabelRef("noasum"))
	c.Comment("(unless A is copied: then the copying loop sums it)")
	apLen := t.gp64(c.Param("apack").Len())
	c.TESTQ(apLen, apLen)
	c.JNZ(operand.LabelRef("noasum"))

	k, lanes := t.asumKit()
	// One running sum over p in increasing order, as the copying loops
	// form it (and as kernels.GemmTileFunc says): the same bits whichever
	// loop sums a tile, at either level. Four p per iteration for fewer
	// pointer updates; the chain of additions is kc long, but this loop
	// runs only for the tiles that do not copy A (edge tiles, and products
	// of a single column panel).
	sum := c.YMM()
	c.VXORPS(sum, sum, sum)
	ptr, cnt := c.GP64(), c.GP64()
	c.MOVQ(t.a0, ptr)
	c.MOVQ(t.kc, cnt)
	c.CMPQ(cnt, operand.U8(4))
	c.JL(operand.LabelRef("asumtail"))
	c.Label("asumloop4")
	for u := 0; u < 4; u++ {
		x := c.YMM()
		k.loadM(operand.Mem{Base: ptr}, lanes, x)
		c.VADDPS(x, sum, sum)
		c.ADDQ(t.pStride, ptr)
	}
	c.SUBQ(operand.U8(4), cnt)
	c.CMPQ(cnt, operand.U8(4))
	c.JGE(operand.LabelRef("asumloop4"))
	c.Label("asumtail")
	c.TESTQ(cnt, cnt)
	c.JZ(operand.LabelRef("asumadd"))
	c.Label("asumloop")
	x := c.YMM()
	k.loadM(operand.Mem{Base: ptr}, lanes, x)
	c.VADDPS(x, sum, sum)
	c.ADDQ(t.pStride, ptr)
	c.DECQ(cnt)
	c.JNZ(operand.LabelRef("asumloop"))
	c.Label("asumadd")
	t.addToAsum(k, lanes, sum)
	c.Label("noasum")
}

// zeroAccs allocates and clears the accumulators.
func (t *gemmTile) zeroAccs() {
	c := t.c
	t.acc = make([][]reg.VecVirtual, t.mr)
	for i := range t.acc {
		t.acc[i] = make([]reg.VecVirtual, t.vecs)
		for h := range t.acc[i] {
			t.acc[i][h] = t.vec()
			if t.isa == kernels.AVX512 {
				c.VPXORD(t.acc[i][h], t.acc[i][h], t.acc[i][h])
			} else {
				c.VXORPS(t.acc[i][h], t.acc[i][h], t.acc[i][h])
			}
		}
	}
}

// step emits the products of one p, with A's p offset disp bytes from
// the row pointers and B's row p at bRow; with bpk, it also stores B's
// row p there.
func (t *gemmTile) step(bRow func(h int) operand.Mem, disp int, bpk reg.GPVirtual) {
	c := t.c
	bv := make([]reg.VecVirtual, t.vecs)
	for h := range bv {
		bv[h] = t.vec()
		c.VMOVUPS(bRow(h), bv[h])
		if bpk != nil {
			c.VMOVUPS(bv[h], operand.Mem{Base: bpk, Disp: 4 * t.lanes * h})
		}
	}
	for i := 0; i < t.mr; i++ {
		av := t.vec()
		m := t.rowAddr(i)
		m.Disp += disp
		c.VBROADCASTSS(m, av)
		for h := range bv {
			c.VFMADD231PS(av, bv[h], t.acc[i][h])
		}
	}
}

// bRow is B's row p: vector h at bp.
func (t *gemmTile) bRow(h int) operand.Mem {
	return operand.Mem{Base: t.bp, Disp: 4 * t.lanes * h}
}

// advance moves A's row pointers and B's row on by one p.
func (t *gemmTile) advance() {
	c := t.c
	c.ADDQ(t.pStride, t.a0)
	c.ADDQ(t.pStride, t.a3)
	if t.mr > 6 {
		c.ADDQ(t.pStride, t.a6)
	}
	c.ADDQ(t.bStride, t.bp)
}

// products emits the kc products into the accumulators: a copying loop
// when apack or bpack is given, else four p per iteration when A is
// row-major, then one p at a time.
func (t *gemmTile) products() {
	c := t.c
	c.Comment("acc[i][·] += a[i·ai + p·ap] · b[p·bp : p·bp+NR], p < kc")
	c.TESTQ(t.kc, t.kc)
	c.JZ(operand.LabelRef("store"))

	c.Comment("With apack (ai = 1) or bpack, the same products one p at a time, copying")
	c.Comment("A's MR floats a[p·ap:] to apack[p·MR:] or B's NR to bpack[p·NR:] on the way.")
	apLen := t.gp64(c.Param("apack").Len())
	bpLen := t.gp64(c.Param("bpack").Len())
	c.TESTQ(apLen, apLen)
	c.JZ(operand.LabelRef("nopacka"))
	c.TESTQ(bpLen, bpLen)
	c.JNZ(operand.LabelRef("packab"))
	c.JMP(operand.LabelRef("packa"))
	c.Label("nopacka")
	c.TESTQ(bpLen, bpLen)
	c.JZ(operand.LabelRef("nopack"))
	c.JMP(operand.LabelRef("packb"))

	t.packLoop("packab", true, true)
	t.packLoop("packa", true, false)
	t.packLoop("packb", false, true)
	c.Label("nopack")
	t.quadLoop()
	c.Label("loop")
	t.step(t.bRow, 0, nil)
	t.advance()
	c.DECQ(t.kc)
	c.JNZ(operand.LabelRef("loop"))
}

// packLoop emits the products one p at a time that also copy A's MR
// floats of each p to apack (packA, summing them for asum) and B's row to
// bpack (packB), then jumps to the store.
func (t *gemmTile) packLoop(label string, packA, packB bool) {
	c, mr, nr := t.c, t.mr, t.nr
	c.Label(label)
	var apk, bpk reg.GPVirtual
	if packA {
		apk = t.gp64(c.Param("apack").Base())
	}
	if packB {
		bpk = t.gp64(c.Param("bpack").Base())
	}
	var sum reg.VecVirtual
	if packA {
		sum = c.YMM()
		c.VXORPS(sum, sum, sum)
	}
	// pfB and pfA run gemmPackAhead rows of B and p of A ahead; past
	// the block they reach the next k-block's, which come next.
	var pfB, pfA reg.GPVirtual
	if packB {
		pfB = c.GP64()
		c.IMUL3Q(operand.U32(gemmPackAhead), t.bStride, pfB)
		c.ADDQ(t.bp, pfB)
	}
	if packA {
		pfA = c.GP64()
		c.IMUL3Q(operand.U32(gemmPackAhead), t.pStride, pfA)
		c.ADDQ(t.a0, pfA)
	}
	c.Label(label + "loop")
	if pfB != nil {
		for h := 0; h < 4*nr/64; h++ {
			c.PREFETCHT0(operand.Mem{Base: pfB, Disp: 64 * h})
		}
		c.ADDQ(t.bStride, pfB)
	}
	if pfA != nil {
		c.PREFETCHT0(operand.Mem{Base: pfA})
		c.ADDQ(t.pStride, pfA)
	}
	t.step(t.bRow, 0, bpk)
	if packA {
		// A's MR floats of this p are contiguous (ai = 1), from row 0's pointer.
		y := c.YMM()
		if mr == 8 {
			c.VMOVUPS(operand.Mem{Base: t.a0}, y)
			c.VMOVUPS(y, operand.Mem{Base: apk})
		} else {
			// 6: 16 bytes and 8, joined into one vector (lanes 6, 7 zero)
			// for the sum. y is written whole (a broadcast of the first
			// 16), not through its X half, which would keep it live
			// around the loop: the AVX2 level has 16 registers, and
			// 12 accumulators, 2 of B, 1 of A and the sum take them all.
			x := c.XMM()
			c.VBROADCASTF128(operand.Mem{Base: t.a0}, y)
			c.VMOVQ(operand.Mem{Base: t.a0, Disp: 16}, x)
			c.VMOVUPS(y.AsX(), operand.Mem{Base: apk})
			c.VMOVQ(x, operand.Mem{Base: apk, Disp: 16})
			c.VINSERTF128(operand.U8(1), x, y, y)
		}
		c.VADDPS(y, sum, sum)
		c.ADDQ(operand.U32(4*mr), apk)
	}
	if packB {
		c.ADDQ(operand.U32(4*nr), bpk)
	}
	t.advance()
	c.DECQ(t.kc)
	c.JNZ(operand.LabelRef(label + "loop"))
	if packA {
		asumLen := t.gp64(c.Param("asum").Len())
		c.TESTQ(asumLen, asumLen)
		c.JZ(operand.LabelRef("store"))
		k, lanes := t.asumKit()
		t.addToAsum(k, lanes, sum)
	}
	c.JMP(operand.LabelRef("store"))
}

// quadLoop emits, for A row-major (ap = 1) and kc ≥ 4, the products four
// p per iteration; the p left over go to the loop after it.
func (t *gemmTile) quadLoop() {
	c := t.c
	c.Comment("With ap = 1 (A row-major: forward and input-gradient products), four p per")
	c.Comment("iteration at fixed displacements: a fifth of the pointer updates, which")
	c.Comment("would otherwise take issue slots on the FMA ports.")
	c.CMPQ(t.pStride, operand.U8(4))
	c.JNE(operand.LabelRef("loop"))
	c.CMPQ(t.kc, operand.U8(4))
	c.JL(operand.LabelRef("loop"))
	quads := c.GP64()
	c.MOVQ(t.kc, quads)
	c.SHRQ(operand.U8(2), quads)
	c.ANDQ(operand.U8(3), t.kc)
	b3 := c.GP64()
	c.LEAQ(operand.Mem{Base: t.bStride, Index: t.bStride, Scale: 2}, b3)
	c.Label("loop4")
	for u := 0; u < 4; u++ {
		t.step(func(h int) operand.Mem {
			m := t.bRow(h)
			switch u {
			case 1, 2:
				m.Index, m.Scale = t.bStride, uint8(u)
			case 3:
				m.Index, m.Scale = b3, 1
			}
			return m
		}, 4*u, nil)
	}
	c.ADDQ(operand.U8(16), t.a0)
	c.ADDQ(operand.U8(16), t.a3)
	if t.mr > 6 {
		c.ADDQ(operand.U8(16), t.a6)
	}
	c.LEAQ(operand.Mem{Base: t.bp, Index: t.bStride, Scale: 4}, t.bp)
	c.DECQ(quads)
	c.JNZ(operand.LabelRef("loop4"))
	c.TESTQ(t.kc, t.kc)
	c.JZ(operand.LabelRef("store"))
}

// store emits the epilogue: the bias row added to the accumulators, then
// the tile added to (or, to overwrite, stored in) the mr×nr corner of c.
func (t *gemmTile) store() {
	c := t.c
	c.Label("store")
	c.Comment("acc[i] += bias; then c[i·ldc : i·ldc+nr] = acc[i] (overwrite) or += acc[i], i < mr")
	t.cp = t.gp64(c.Param("c").Base())
	t.ldc = t.gp64(c.Param("ldc"))
	c.SHLQ(operand.U8(2), t.ldc)
	t.rows = t.gp64(c.Param("mr"))
	cols := t.gp64(c.Param("nr"))
	biasLen := t.gp64(c.Param("bias").Len())
	if t.isa == kernels.AVX512 {
		t.storeAVX512(cols, biasLen)
	} else {
		t.storeAVX2(cols, biasLen)
	}
	c.Label("done")
}

// rowGuard skips to "done" when the tile has no row i.
func (t *gemmTile) rowGuard(i int) {
	t.c.CMPQ(t.rows, operand.U32(i))
	t.c.JLE(operand.LabelRef("done"))
}

// nextRow moves c's row pointer on to row i+1.
func (t *gemmTile) nextRow(i int) {
	if i+1 < t.mr {
		t.c.ADDQ(t.ldc, t.cp)
	}
}

// addBias adds the bias vectors bv to every row of accumulators.
func (t *gemmTile) addBias(bv []reg.VecVirtual) {
	for i := 0; i < t.mr; i++ {
		for h := range bv {
			t.c.VADDPS(bv[h], t.acc[i][h], t.acc[i][h])
		}
	}
}

// storeAVX512 is store's AVX-512 part: K masks of the nr columns.
func (t *gemmTile) storeAVX512(cols, biasLen reg.GPVirtual) {
	c, mr, lanes, vecs, acc := t.c, t.mr, t.lanes, t.vecs, t.acc
	ones := c.GP32()
	c.MOVL(operand.U32(0xffffffff), ones)
	c.BZHIL(cols.As32(), ones, ones)
	k := []reg.Register{c.K(), c.K()}
	c.KMOVW(ones, k[0])
	c.SHRL(operand.U8(16), ones)
	c.KMOVW(ones, k[1])
	c.TESTQ(biasLen, biasLen)
	c.JZ(operand.LabelRef("nobias"))
	bptr := t.gp64(c.Param("bias").Base())
	bv := make([]reg.VecVirtual, vecs)
	for h := range bv {
		bv[h] = t.vec()
		c.VMOVUPS_Z(operand.Mem{Base: bptr, Disp: 4 * lanes * h}, k[h], bv[h])
	}
	t.addBias(bv)
	c.Label("nobias")
	ow := c.Load(c.Param("overwrite"), c.GP8())
	c.TESTB(ow, ow)
	c.JNZ(operand.LabelRef("overwrite"))
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			m := operand.Mem{Base: t.cp, Disp: 4 * lanes * h}
			x := t.vec()
			c.VADDPS_Z(m, acc[i][h], k[h], x)
			c.VMOVUPS(x, k[h], m)
		}
		t.nextRow(i)
	}
	c.JMP(operand.LabelRef("done"))
	c.Label("overwrite")
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			c.VMOVUPS(acc[i][h], k[h], operand.Mem{Base: t.cp, Disp: 4 * lanes * h})
		}
		t.nextRow(i)
	}
}

// storeAVX2 is store's AVX2 part: plain loads and stores for full-width
// rows, VMASKMOVPS with masks from a table for a narrower tile.
func (t *gemmTile) storeAVX2(cols, biasLen reg.GPVirtual) {
	c, mr, nr, lanes, vecs, acc := t.c, t.mr, t.nr, t.lanes, t.vecs, t.acc
	c.Comment("Lane j of mask h is set iff lanes·h + j < nr: a window of NR ones then NR zeros.")
	words := make([]uint32, 2*nr)
	for j := 0; j < nr; j++ {
		words[j] = 0xffffffff
	}
	tb := c.GP64()
	c.LEAQ(t.f.Table(fmt.Sprintf("gemm_mask%d", nr), words), tb)
	off := c.GP64()
	c.MOVQ(operand.U32(nr), off)
	c.SUBQ(cols, off)
	maskAt := func(h int) operand.Mem {
		return operand.Mem{Base: tb, Index: off, Scale: 4, Disp: 4 * lanes * h}
	}
	c.TESTQ(biasLen, biasLen)
	c.JZ(operand.LabelRef("nobias"))
	bptr := t.gp64(c.Param("bias").Base())
	for h := 0; h < vecs; h++ {
		mk, bv := t.vec(), t.vec()
		c.VMOVDQU(maskAt(h), mk)
		c.VMASKMOVPS(operand.Mem{Base: bptr, Disp: 4 * lanes * h}, mk, bv)
		for i := 0; i < mr; i++ {
			c.VADDPS(bv, acc[i][h], acc[i][h])
		}
	}
	c.Label("nobias")
	ow := c.Load(c.Param("overwrite"), c.GP8())
	c.CMPQ(cols, operand.U32(nr))
	c.JNE(operand.LabelRef("masked"))
	c.TESTB(ow, ow)
	c.JNZ(operand.LabelRef("overwrite"))
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			m := operand.Mem{Base: t.cp, Disp: 4 * lanes * h}
			c.VADDPS(m, acc[i][h], acc[i][h])
			c.VMOVUPS(acc[i][h], m)
		}
		t.nextRow(i)
	}
	c.JMP(operand.LabelRef("done"))
	c.Label("overwrite")
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			c.VMOVUPS(acc[i][h], operand.Mem{Base: t.cp, Disp: 4 * lanes * h})
		}
		t.nextRow(i)
	}
	c.JMP(operand.LabelRef("done"))

	c.Label("masked")
	masks := make([]reg.VecVirtual, vecs)
	for h := range masks {
		masks[h] = t.vec()
		c.VMOVDQU(maskAt(h), masks[h])
	}
	c.TESTB(ow, ow)
	c.JNZ(operand.LabelRef("owmasked"))
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			m := operand.Mem{Base: t.cp, Disp: 4 * lanes * h}
			x := t.vec()
			c.VMASKMOVPS(m, masks[h], x)
			c.VADDPS(x, acc[i][h], x)
			c.VMASKMOVPS(x, masks[h], m)
		}
		t.nextRow(i)
	}
	c.JMP(operand.LabelRef("done"))
	c.Label("owmasked")
	for i := 0; i < mr; i++ {
		t.rowGuard(i)
		for h := 0; h < vecs; h++ {
			c.VMASKMOVPS(acc[i][h], masks[h], operand.Mem{Base: t.cp, Disp: 4 * lanes * h})
		}
		t.nextRow(i)
	}
}

// nextTile emits, after the stores, the move to the next tile while rows
// are left: mr down by MR, a on by at floats, c, asum and apack by a tile,
// and a copied B read from its copy; then the jump back to "tile".
func (t *gemmTile) nextTile() {
	c, mr, nr := t.c, t.mr, t.nr
	c.Comment("Rows left past this tile: move a on by at, c, asum and apack by a tile; a copied")
	c.Comment("B is read from its copy by the tiles after the first.")
	left := t.gp64(c.Param("mr"))
	c.CMPQ(left, operand.U32(mr))
	c.JLE(operand.LabelRef("ret"))
	c.SUBQ(operand.U32(mr), left)
	c.Store(left, c.Param("mr"))
	// baseOf is the FP address of a slice parameter's base.
	baseOf := func(name string) operand.Mem {
		b, err := c.Param(name).Base().Resolve()
		if err != nil {
			panic(fmt.Sprintf("asmgen: GemmTile %s: %s: %v", t.isa, name, err))
		}
		return b.Addr
	}
	// moveOn adds mul·stride floats to a slice parameter's base.
	moveOn := func(name string, stride reg.Register, mul int) {
		x := c.GP64()
		c.IMUL3Q(operand.U32(4*mul), stride, x)
		c.ADDQ(x, baseOf(name))
	}
	moveOn("c", t.gp64(c.Param("ldc")), mr)
	// Bases of slices that are not read stay as they are (a with kc
	// 0, empty ones: a pointer past a slice's end is not made).
	kcq := t.gp64(c.Param("kc"))
	c.TESTQ(kcq, kcq)
	c.JZ(operand.LabelRef("nexta"))
	moveOn("a", t.gp64(c.Param("at")), 1)
	c.Label("nexta")
	asLen := t.gp64(c.Param("asum").Len())
	c.TESTQ(asLen, asLen)
	c.JZ(operand.LabelRef("nextapack"))
	c.ADDQ(operand.U32(4*mr), baseOf("asum"))
	c.Label("nextapack")
	apLen := t.gp64(c.Param("apack").Len())
	c.TESTQ(apLen, apLen)
	c.JZ(operand.LabelRef("nextbpack"))
	moveOn("apack", t.gp64(c.Param("kc")), mr)
	c.Label("nextbpack")
	bpLen := t.gp64(c.Param("bpack").Len())
	c.TESTQ(bpLen, bpLen)
	c.JZ(operand.LabelRef("tile"))
	bpk := t.gp64(c.Param("bpack").Base())
	c.Store(bpk, c.Param("b").Base())
	nrq := c.GP64()
	c.MOVQ(operand.U32(nr), nrq)
	c.Store(nrq, c.Param("bp"))
	zero := c.GP64()
	c.XORQ(zero, zero)
	c.Store(zero, c.Param("bpack").Len())
	c.JMP(operand.LabelRef("tile"))
}
