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
// a row, fed per p by NR/lanes loads of the packed B panel and MR
// broadcasts of the packed A panel. The tile is then added to the mr×nr
// corner of c: with K masks on AVX-512, and on AVX2 with plain loads and
// stores for full-width rows or VMASKMOVPS for a narrower tile.
//
// AVX-512: 8×32, 16 ZMM accumulators + 2 B + 1 A = 19 registers.
// AVX2:    6×16, 12 YMM accumulators + 2 B + 1 A = 15 (never Y16+).

func init() { implemented[catalog.GemmTile] = true }

func emitGemmTile(f *File, op catalog.Op, isa kernels.ISA) {
	c := f.Ctx
	mr, nr := catalog.GemmShape(isa)
	lanes := 8
	if isa == kernels.AVX512 {
		lanes = 16
	}
	vecs := nr / lanes
	if vecs*lanes != nr || vecs != 2 {
		panic(fmt.Sprintf("asmgen: GemmTile %s: tile width %d is not two vectors", isa, nr))
	}
	vec := func() reg.VecVirtual {
		if isa == kernels.AVX512 {
			return c.ZMM()
		}
		return c.YMM()
	}

	kc := c.Load(c.Param("kc"), c.GP64())
	ap := c.Load(c.Param("a").Base(), c.GP64())
	bp := c.Load(c.Param("b").Base(), c.GP64())
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

	c.Comment("acc[i][·] += a[p·MR+i] · b[p·NR : p·NR+NR], p < kc")
	c.TESTQ(kc, kc)
	c.JZ(operand.LabelRef("store"))
	c.Label("loop")
	bv := make([]reg.VecVirtual, vecs)
	for h := range bv {
		bv[h] = vec()
		c.VMOVUPS(operand.Mem{Base: bp, Disp: 4 * lanes * h}, bv[h])
	}
	for i := 0; i < mr; i++ {
		av := vec()
		c.VBROADCASTSS(operand.Mem{Base: ap, Disp: 4 * i}, av)
		for h := range bv {
			c.VFMADD231PS(av, bv[h], acc[i][h])
		}
	}
	c.ADDQ(operand.U32(4*mr), ap)
	c.ADDQ(operand.U32(4*nr), bp)
	c.DECQ(kc)
	c.JNZ(operand.LabelRef("loop"))

	c.Label("store")
	c.Comment("c[i·ldc : i·ldc+nr] += acc[i], i < mr")
	cp := c.Load(c.Param("c").Base(), c.GP64())
	ldc := c.Load(c.Param("ldc"), c.GP64())
	c.SHLQ(operand.U8(2), ldc)
	rows := c.Load(c.Param("mr"), c.GP64())
	cols := c.Load(c.Param("nr"), c.GP64())
	rowGuard := func(i int) {
		c.CMPQ(rows, operand.U32(i))
		c.JLE(operand.LabelRef("done"))
	}
	if isa == kernels.AVX512 {
		ones := c.GP32()
		c.MOVL(operand.U32(0xffffffff), ones)
		c.BZHIL(cols.(reg.GPVirtual).As32(), ones, ones)
		k := []reg.Register{c.K(), c.K()}
		c.KMOVW(ones, k[0])
		c.SHRL(operand.U8(16), ones)
		c.KMOVW(ones, k[1])
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				t := vec()
				c.VADDPS_Z(m, acc[i][h], k[h], t)
				c.VMOVUPS(t, k[h], m)
			}
			if i+1 < mr {
				c.ADDQ(ldc, cp)
			}
		}
	} else {
		c.CMPQ(cols, operand.U32(nr))
		c.JNE(operand.LabelRef("masked"))
		for i := 0; i < mr; i++ {
			rowGuard(i)
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				c.VADDPS(m, acc[i][h], acc[i][h])
				c.VMOVUPS(acc[i][h], m)
			}
			if i+1 < mr {
				c.ADDQ(ldc, cp)
			}
		}
		c.JMP(operand.LabelRef("done"))

		c.Label("masked")
		c.Comment("Lane j of mask h is set iff lanes·h + j < nr: a window of 16 ones then 16 zeros.")
		words := make([]uint32, 2*nr)
		for j := 0; j < nr; j++ {
			words[j] = 0xffffffff
		}
		tb := c.GP64()
		c.LEAQ(f.Table(fmt.Sprintf("gemm_mask%d", nr), words), tb)
		off := c.GP64()
		c.MOVQ(operand.U32(nr), off)
		c.SUBQ(cols, off)
		masks := make([]reg.VecVirtual, vecs)
		for h := range masks {
			masks[h] = vec()
			c.VMOVDQU(operand.Mem{Base: tb, Index: off, Scale: 4, Disp: 4 * lanes * h}, masks[h])
		}
		for i := 0; i < mr; i++ {
			c.CMPQ(rows, operand.U32(i))
			c.JLE(operand.LabelRef("done"))
			for h := 0; h < vecs; h++ {
				m := operand.Mem{Base: cp, Disp: 4 * lanes * h}
				t := vec()
				c.VMASKMOVPS(m, masks[h], t)
				c.VADDPS(t, acc[i][h], t)
				c.VMASKMOVPS(t, masks[h], m)
			}
			if i+1 < mr {
				c.ADDQ(ldc, cp)
			}
		}
	}
	c.Label("done")
	c.VZEROUPPER()
	c.RET()
}
