package asmgen

import (
	"fmt"

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
// never Y16+, which checkVEXRegisters (compile.go) enforces.

// gemmPackAhead is how many p ahead of the one it multiplies a copying
// loop asks for the lines of B's row (and A's, when copying A): the first
// tile to read an operand in place reads it from memory, one line per p,
// and without the prefetches it waits on each.
const gemmPackAhead = 32

func emitGemmTile(f *File, op catalog.Op, isa kernels.ISA) {
	c := f.Ctx
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
	vec := func() reg.VecVirtual {
		if isa == kernels.AVX512 {
			return c.ZMM()
		}
		return c.YMM()
	}

	c.Comment("One tile of MR rows per pass from here; \"done\" moves the frame's")
	c.Comment("arguments on to the next tile while mr > MR.")
	c.Label("tile")
	kc := c.Load(c.Param("kc"), c.GP64())
	a0 := c.Load(c.Param("a").Base(), c.GP64())
	rowStride := c.Load(c.Param("ai"), c.GP64())
	c.SHLQ(operand.U8(2), rowStride)
	pStride := c.Load(c.Param("ap"), c.GP64())
	c.SHLQ(operand.U8(2), pStride)
	bp := c.Load(c.Param("b").Base(), c.GP64())
	bStride := c.Load(c.Param("bp"), c.GP64())
	c.SHLQ(operand.U8(2), bStride)
	a3 := c.GP64()
	c.LEAQ(operand.Mem{Base: rowStride, Index: rowStride, Scale: 2}, a3) // 3L
	var a6 reg.GPVirtual
	if mr > 6 {
		a6 = c.GP64()
		c.LEAQ(operand.Mem{Base: a0, Index: a3, Scale: 2}, a6) // a + 6L
	}
	c.ADDQ(a0, a3) // a + 3L
	rowAddr := func(i int) operand.Mem {
		switch i {
		case 0:
			return operand.Mem{Base: a0}
		case 1, 2, 4:
			return operand.Mem{Base: a0, Index: rowStride, Scale: uint8(i)}
		case 3:
			return operand.Mem{Base: a3}
		case 5:
			return operand.Mem{Base: a3, Index: rowStride, Scale: 2}
		case 6:
			return operand.Mem{Base: a6}
		}
		return operand.Mem{Base: a6, Index: rowStride, Scale: 1}
	}

	c.Comment("Prefetch the tile's rows of c (first and last byte of each), so that their")
	c.Comment("misses overlap the products rather than stall the stores at the end.")
	{
		pc := c.Load(c.Param("c").Base(), c.GP64())
		pl := c.Load(c.Param("ldc"), c.GP64())
		c.SHLQ(operand.U8(2), pl)
		for i := 0; i < mr; i++ {
			c.PREFETCHT0(operand.Mem{Base: pc})
			c.PREFETCHT0(operand.Mem{Base: pc, Disp: 4*nr - 1})
			if i+1 < mr {
				c.ADDQ(pl, pc)
			}
		}
	}

	// asumKit returns the 8-lane kit of A's row sums and its mask of the
	// lanes i < mr.
	clamps := 0
	asumKit := func() (*synKit, reg.Register) {
		k := newSynKitNarrow(f, "gemmAsum", isa)
		// This tile's rows, min(mr, MR) (asumKit runs once per loop that
		// sums, so each clamp gets a label of its own).
		n := c.Load(c.Param("mr"), c.GP64()).(reg.GPVirtual)
		clamps++
		l := fmt.Sprintf("asumrows%d", clamps)
		c.CMPQ(n, operand.U32(mr))
		c.JLE(operand.LabelRef(l))
		c.MOVQ(operand.U32(mr), n)
		c.Label(l)
		return k, k.dynLanes(n)
	}
	// addToAsum adds the lanes of sum, A's row sums over the block, to
	// asum's.
	addToAsum := func(k *synKit, lanes reg.Register, sum reg.VecVirtual) {
		sp := c.Load(c.Param("asum").Base(), c.GP64())
		old := c.YMM()
		k.loadM(operand.Mem{Base: sp}, lanes, old)
		c.VADDPS(sum, old, old)
		k.storeM(old, lanes, operand.Mem{Base: sp})
	}
	c.Comment("asum[i] += Σ_p a[i + p·ap], i < mr (ai = 1: a column of A is contiguous)")
	asumLen := c.Load(c.Param("asum").Len(), c.GP64())
	c.TESTQ(asumLen, asumLen)
	c.JZ(operand.LabelRef("noasum"))
	c.Comment("(unless A is copied: then the copying loop sums it)")
	{
		apLen := c.Load(c.Param("apack").Len(), c.GP64())
		c.TESTQ(apLen, apLen)
		c.JNZ(operand.LabelRef("noasum"))
	}
	{
		k, lanes := asumKit()
		// One running sum over p in increasing order, as the copying
		// loops form it (and as kernels.GemmTileFunc says): the same bits
		// whichever loop sums a tile, at either level. Four p per
		// iteration for fewer pointer updates; the chain of additions is
		// kc long, but this loop runs only for the tiles that do not copy
		// A (edge tiles, and products of a single column panel).
		sum := c.YMM()
		c.VXORPS(sum, sum, sum)
		ptr, cnt := c.GP64(), c.GP64()
		c.MOVQ(a0, ptr)
		c.MOVQ(kc, cnt)
		c.CMPQ(cnt, operand.U8(4))
		c.JL(operand.LabelRef("asumtail"))
		c.Label("asumloop4")
		for u := 0; u < 4; u++ {
			t := c.YMM()
			k.loadM(operand.Mem{Base: ptr}, lanes, t)
			c.VADDPS(t, sum, sum)
			c.ADDQ(pStride, ptr)
		}
		c.SUBQ(operand.U8(4), cnt)
		c.CMPQ(cnt, operand.U8(4))
		c.JGE(operand.LabelRef("asumloop4"))
		c.Label("asumtail")
		c.TESTQ(cnt, cnt)
		c.JZ(operand.LabelRef("asumadd"))
		c.Label("asumloop")
		t := c.YMM()
		k.loadM(operand.Mem{Base: ptr}, lanes, t)
		c.VADDPS(t, sum, sum)
		c.ADDQ(pStride, ptr)
		c.DECQ(cnt)
		c.JNZ(operand.LabelRef("asumloop"))
		c.Label("asumadd")
		addToAsum(k, lanes, sum)
	}
	c.Label("noasum")

	acc := make([][]reg.VecVirtual, mr)
	for i := range acc {
		acc[i] = make([]reg.VecVirtual, vecs)
		for h := range acc[i] {
			acc[i][h] = vec()
			if isa == kernels.AVX512 {
				c.VPXORD(acc[i][h], acc[i][h], acc[i][h])
			} else {
				c.VXORPS(acc[i][h], acc[i][h], acc[i][h])
			}
		}
	}

	// step emits the products of one p, with A's p offset disp bytes from
	// the row pointers and B's row p at bRow; with bpk, it also stores B's
	// row p there.
	step := func(bRow func(h int) operand.Mem, disp int, bpk reg.GPVirtual) {
		bv := make([]reg.VecVirtual, vecs)
		for h := range bv {
			bv[h] = vec()
			c.VMOVUPS(bRow(h), bv[h])
			if bpk != nil {
				c.VMOVUPS(bv[h], operand.Mem{Base: bpk, Disp: 4 * lanes * h})
			}
		}
		for i := 0; i < mr; i++ {
			av := vec()
			m := rowAddr(i)
			m.Disp += disp
			c.VBROADCASTSS(m, av)
			for h := range bv {
				c.VFMADD231PS(av, bv[h], acc[i][h])
			}
		}
	}
	// advance moves A's row pointers and B's row on by one p.
	advance := func() {
		c.ADDQ(pStride, a0)
		c.ADDQ(pStride, a3)
		if mr > 6 {
			c.ADDQ(pStride, a6)
		}
		c.ADDQ(bStride, bp)
	}
	c.Comment("acc[i][·] += a[i·ai + p·ap] · b[p·bp : p·bp+NR], p < kc")
	c.TESTQ(kc, kc)
	c.JZ(operand.LabelRef("store"))

	c.Comment("With apack (ai = 1) or bpack, the same products one p at a time, copying")
	c.Comment("A's MR floats a[p·ap:] to apack[p·MR:] or B's NR to bpack[p·NR:] on the way.")
	{
		apLen := c.Load(c.Param("apack").Len(), c.GP64())
		bpLen := c.Load(c.Param("bpack").Len(), c.GP64())
		c.TESTQ(apLen, apLen)
		c.JZ(operand.LabelRef("nopacka"))
		c.TESTQ(bpLen, bpLen)
		c.JNZ(operand.LabelRef("packab"))
		c.JMP(operand.LabelRef("packa"))
		c.Label("nopacka")
		c.TESTQ(bpLen, bpLen)
		c.JZ(operand.LabelRef("nopack"))
		c.JMP(operand.LabelRef("packb"))
	}
	packLoop := func(label string, packA, packB bool) {
		c.Label(label)
		var apk, bpk reg.GPVirtual
		if packA {
			apk = c.Load(c.Param("apack").Base(), c.GP64()).(reg.GPVirtual)
		}
		if packB {
			bpk = c.Load(c.Param("bpack").Base(), c.GP64()).(reg.GPVirtual)
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
			c.IMUL3Q(operand.U32(gemmPackAhead), bStride, pfB)
			c.ADDQ(bp, pfB)
		}
		if packA {
			pfA = c.GP64()
			c.IMUL3Q(operand.U32(gemmPackAhead), pStride, pfA)
			c.ADDQ(a0, pfA)
		}
		c.Label(label + "loop")
		if pfB != nil {
			for h := 0; h < 4*nr/64; h++ {
				c.PREFETCHT0(operand.Mem{Base: pfB, Disp: 64 * h})
			}
			c.ADDQ(bStride, pfB)
		}
		if pfA != nil {
			c.PREFETCHT0(operand.Mem{Base: pfA})
			c.ADDQ(pStride, pfA)
		}
		step(func(h int) operand.Mem { return operand.Mem{Base: bp, Disp: 4 * lanes * h} }, 0, bpk)
		if packA {
			// A's MR floats of this p are contiguous (ai = 1), from row 0's pointer.
			y := c.YMM()
			if mr == 8 {
				c.VMOVUPS(operand.Mem{Base: a0}, y)
				c.VMOVUPS(y, operand.Mem{Base: apk})
			} else {
				// 6: 16 bytes and 8, joined into one vector (lanes 6, 7 zero)
				// for the sum. y is written whole (a broadcast of the first
				// 16), not through its X half, which would keep it live
				// around the loop: the AVX2 level has 16 registers, and
				// 12 accumulators, 2 of B, 1 of A and the sum take them all.
				x := c.XMM()
				c.VBROADCASTF128(operand.Mem{Base: a0}, y)
				c.VMOVQ(operand.Mem{Base: a0, Disp: 16}, x)
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
		advance()
		c.DECQ(kc)
		c.JNZ(operand.LabelRef(label + "loop"))
		if packA {
			asumLen := c.Load(c.Param("asum").Len(), c.GP64())
			c.TESTQ(asumLen, asumLen)
			c.JZ(operand.LabelRef("store"))
			k, lanes := asumKit()
			addToAsum(k, lanes, sum)
		}
		c.JMP(operand.LabelRef("store"))
	}
	packLoop("packab", true, true)
	packLoop("packa", true, false)
	packLoop("packb", false, true)
	c.Label("nopack")
	c.Comment("With ap = 1 (A row-major: forward and input-gradient products), four p per")
	c.Comment("iteration at fixed displacements: a fifth of the pointer updates, which")
	c.Comment("would otherwise take issue slots on the FMA ports.")
	c.CMPQ(pStride, operand.U8(4))
	c.JNE(operand.LabelRef("loop"))
	c.CMPQ(kc, operand.U8(4))
	c.JL(operand.LabelRef("loop"))
	{
		quads := c.GP64()
		c.MOVQ(kc, quads)
		c.SHRQ(operand.U8(2), quads)
		c.ANDQ(operand.U8(3), kc)
		b3 := c.GP64()
		c.LEAQ(operand.Mem{Base: bStride, Index: bStride, Scale: 2}, b3)
		c.Label("loop4")
		for u := 0; u < 4; u++ {
			step(func(h int) operand.Mem {
				m := operand.Mem{Base: bp, Disp: 4 * lanes * h}
				switch u {
				case 1, 2:
					m.Index, m.Scale = bStride, uint8(u)
				case 3:
					m.Index, m.Scale = b3, 1
				}
				return m
			}, 4*u, nil)
		}
		c.ADDQ(operand.U8(16), a0)
		c.ADDQ(operand.U8(16), a3)
		if mr > 6 {
			c.ADDQ(operand.U8(16), a6)
		}
		c.LEAQ(operand.Mem{Base: bp, Index: bStride, Scale: 4}, bp)
		c.DECQ(quads)
		c.JNZ(operand.LabelRef("loop4"))
		c.TESTQ(kc, kc)
		c.JZ(operand.LabelRef("store"))
	}
	c.Label("loop")
	step(func(h int) operand.Mem { return operand.Mem{Base: bp, Disp: 4 * lanes * h} }, 0, nil)
	advance()
	c.DECQ(kc)
	c.JNZ(operand.LabelRef("loop"))

	c.Label("store")
	c.Comment("acc[i] += bias; then c[i·ldc : i·ldc+nr] = acc[i] (overwrite) or += acc[i], i < mr")
	cp := c.Load(c.Param("c").Base(), c.GP64())
	ldc := c.Load(c.Param("ldc"), c.GP64())
	c.SHLQ(operand.U8(2), ldc)
	rows := c.Load(c.Param("mr"), c.GP64())
	cols := c.Load(c.Param("nr"), c.GP64())
	biasLen := c.Load(c.Param("bias").Len(), c.GP64())
	rowGuard := func(i int) {
		c.CMPQ(rows, operand.U32(i))
		c.JLE(operand.LabelRef("done"))
	}
	nextRow := func(i int) {
		if i+1 < mr {
			c.ADDQ(ldc, cp)
		}
	}
	addBias := func(bv []reg.VecVirtual) {
		for i := 0; i < mr; i++ {
			for h := range bv {
				c.VADDPS(bv[h], acc[i][h], acc[i][h])
			}
		}
	}
	if isa == kernels.AVX512 {
		ones := c.GP32()
		c.MOVL(operand.U32(0xffffffff), ones)
		c.BZHIL(cols.(reg.GPVirtual).As32(), ones, ones)
		k := []reg.Register{c.K(), c.K()}
		c.KMOVW(ones, k[0])
		c.SHRL(operand.U8(16), ones)
		c.KMOVW(ones, k[1])
		c.TESTQ(biasLen, biasLen)
		c.JZ(operand.LabelRef("nobias"))
		bptr := c.Load(c.Param("bias").Base(), c.GP64())
		bv := make([]reg.VecVirtual, vecs)
		for h := range bv {
			bv[h] = vec()
			c.VMOVUPS_Z(operand.Mem{Base: bptr, Disp: 4 * lanes * h}, k[h], bv[h])
		}
		addBias(bv)
		c.Label("nobias")
		ow := c.Load(c.Param("overwrite"), c.GP8())
		c.TESTB(ow, ow)
		c.JNZ(operand.LabelRef("overwrite"))
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				t := vec()
				c.VADDPS_Z(m, acc[i][h], k[h], t)
				c.VMOVUPS(t, k[h], m)
			}
			nextRow(i)
		}
		c.JMP(operand.LabelRef("done"))
		c.Label("overwrite")
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				c.VMOVUPS(acc[i][h], k[h], operand.Mem{Base: cp, Disp: 4 * lanes * h})
			}
			nextRow(i)
		}
	} else {
		c.Comment("Lane j of mask h is set iff lanes·h + j < nr: a window of NR ones then NR zeros.")
		words := make([]uint32, 2*nr)
		for j := 0; j < nr; j++ {
			words[j] = 0xffffffff
		}
		tb := c.GP64()
		c.LEAQ(f.Table(fmt.Sprintf("gemm_mask%d", nr), words), tb)
		off := c.GP64()
		c.MOVQ(operand.U32(nr), off)
		c.SUBQ(cols, off)
		maskAt := func(h int) operand.Mem {
			return operand.Mem{Base: tb, Index: off, Scale: 4, Disp: 4 * lanes * h}
		}
		c.TESTQ(biasLen, biasLen)
		c.JZ(operand.LabelRef("nobias"))
		bptr := c.Load(c.Param("bias").Base(), c.GP64())
		for h := 0; h < vecs; h++ {
			mk, bv := vec(), vec()
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
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				c.VADDPS(m, acc[i][h], acc[i][h])
				c.VMOVUPS(acc[i][h], m)
			}
			nextRow(i)
		}
		c.JMP(operand.LabelRef("done"))
		c.Label("overwrite")
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				c.VMOVUPS(acc[i][h], operand.Mem{Base: cp, Disp: 4 * lanes * h})
			}
			nextRow(i)
		}
		c.JMP(operand.LabelRef("done"))

		c.Label("masked")
		masks := make([]reg.VecVirtual, vecs)
		for h := range masks {
			masks[h] = vec()
			c.VMOVDQU(maskAt(h), masks[h])
		}
		c.TESTB(ow, ow)
		c.JNZ(operand.LabelRef("owmasked"))
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				t := vec()
				c.VMASKMOVPS(m, masks[h], t)
				c.VADDPS(t, acc[i][h], t)
				c.VMASKMOVPS(t, masks[h], m)
			}
			nextRow(i)
		}
		c.JMP(operand.LabelRef("done"))
		c.Label("owmasked")
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				c.VMASKMOVPS(acc[i][h], masks[h], operand.Mem{Base: cp, Disp: 4 * lanes * h})
			}
			nextRow(i)
		}
	}
	c.Label("done")
	c.Comment("Rows left past this tile: move a on by at, c, asum and apack by a tile; a copied")
	c.Comment("B is read from its copy by the tiles after the first.")
	{
		left := c.Load(c.Param("mr"), c.GP64())
		c.CMPQ(left, operand.U32(mr))
		c.JLE(operand.LabelRef("ret"))
		c.SUBQ(operand.U32(mr), left)
		c.Store(left, c.Param("mr"))
		// baseOf is the FP address of a slice parameter's base.
		baseOf := func(name string) operand.Mem {
			b, err := c.Param(name).Base().Resolve()
			if err != nil {
				panic(fmt.Sprintf("asmgen: GemmTile %s: %s: %v", isa, name, err))
			}
			return b.Addr
		}
		// moveOn adds mul·stride floats to a slice parameter's base.
		moveOn := func(name string, stride reg.Register, mul int) {
			t := c.GP64()
			c.IMUL3Q(operand.U32(4*mul), stride, t)
			c.ADDQ(t, baseOf(name))
		}
		moveOn("c", c.Load(c.Param("ldc"), c.GP64()), mr)
		// Bases of slices that are not read stay as they are (a with kc
		// 0, empty ones: a pointer past a slice's end is not made).
		kcq := c.Load(c.Param("kc"), c.GP64())
		c.TESTQ(kcq, kcq)
		c.JZ(operand.LabelRef("nexta"))
		moveOn("a", c.Load(c.Param("at"), c.GP64()), 1)
		c.Label("nexta")
		asLen := c.Load(c.Param("asum").Len(), c.GP64())
		c.TESTQ(asLen, asLen)
		c.JZ(operand.LabelRef("nextapack"))
		c.ADDQ(operand.U32(4*mr), baseOf("asum"))
		c.Label("nextapack")
		apLen := c.Load(c.Param("apack").Len(), c.GP64())
		c.TESTQ(apLen, apLen)
		c.JZ(operand.LabelRef("nextbpack"))
		moveOn("apack", c.Load(c.Param("kc"), c.GP64()), mr)
		c.Label("nextbpack")
		bpLen := c.Load(c.Param("bpack").Len(), c.GP64())
		c.TESTQ(bpLen, bpLen)
		c.JZ(operand.LabelRef("tile"))
		bpk := c.Load(c.Param("bpack").Base(), c.GP64())
		c.Store(bpk, c.Param("b").Base())
		nrq := c.GP64()
		c.MOVQ(operand.U32(nr), nrq)
		c.Store(nrq, c.Param("bp"))
		zero := c.GP64()
		c.XORQ(zero, zero)
		c.Store(zero, c.Param("bpack").Len())
		c.JMP(operand.LabelRef("tile"))
	}
	c.Label("ret")
	c.VZEROUPPER()
	c.RET()
}
