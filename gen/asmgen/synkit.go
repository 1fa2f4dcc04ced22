package asmgen

import (
	"fmt"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// synKit is the toolbox shared by the logit-synthesis emitters (products,
// tiles, triangle operations): it hides the differences between AVX-512
// (ZMM, 16 lanes, K-mask tails) and AVX2 (YMM, 8 lanes, VMASKMOVPS tails
// with a mask table) behind a few methods, and hands out unique labels.
//
// AVX2 code must only use Y0–Y15: the emitters keep fewer than 16 vector
// registers live at a time, and the tests check the allocation.
type synKit struct {
	f   *File
	c   *build.Context
	isa kernels.ISA
	V   int    // float32 lanes per vector
	fn  string // function name, prefix of the labels
	nl  int
}

func newSynKit(f *File, fn string, isa kernels.ISA) *synKit {
	k := &synKit{f: f, c: f.Ctx, isa: isa, V: 8, fn: fn}
	if isa == kernels.AVX512 {
		k.V = 16
	}
	return k
}

// newSynKitNarrow is newSynKit with 8-lane vectors on both levels: on
// AVX-512 they are YMM registers (any of Y0–Y31) with K-mask tails, for
// kernels whose rows are short enough that 16 lanes would be mostly masked.
func newSynKitNarrow(f *File, fn string, isa kernels.ISA) *synKit {
	k := newSynKit(f, fn, isa)
	k.V = 8
	return k
}

func (k *synKit) avx512() bool { return k.isa == kernels.AVX512 }

// lbl returns a fresh label name, unique within the function.
func (k *synKit) lbl(what string) string {
	k.nl++
	return fmt.Sprintf("%s_%d", what, k.nl)
}

// label places a label.
func (k *synKit) label(name string) { k.c.Label(name) }

// ref is a reference to a label for jumps.
func synRef(name string) operand.LabelRef { return operand.LabelRef(name) }

// vec allocates a virtual vector register of the level's width.
func (k *synKit) vec() reg.VecVirtual {
	if k.V == 16 {
		return k.c.ZMM()
	}
	return k.c.YMM()
}

// zero clears v with a dependency-breaking idiom avo knows does not read v.
func (k *synKit) zero(v reg.Register) { k.c.VXORPS(v, v, v) }

// mem is the address base+disp.
func synMem(base reg.Register, disp int) operand.Mem {
	return operand.Mem{Base: base, Disp: disp}
}

// memIdx is the address base+disp+index·scale.
func synMemIdx(base reg.Register, disp int, index reg.Register, scale uint8) operand.Mem {
	return operand.Mem{Base: base, Disp: disp, Index: index, Scale: scale}
}

// imm is a signed 32-bit immediate.
func synImm(x int) operand.I32 {
	if int(int32(x)) != x {
		panic(fmt.Sprintf("asmgen: immediate %d does not fit in 32 bits", x))
	}
	return operand.I32(x)
}

// maskTable is the AVX2 tail-mask table: 8 all-ones words then 8 zero
// words; the 8 words starting at word 8−n enable the first n lanes.
func (k *synKit) maskTable() operand.Mem {
	w := make([]uint32, 16)
	for i := 0; i < 8; i++ {
		w[i] = 0xFFFFFFFF
	}
	return k.f.Table("synLaneMask", w)
}

// lanes returns a mask enabling the first n lanes, 0 < n < V (a constant):
// a K register for AVX-512, a YMM register for AVX2.
func (k *synKit) lanes(n int) reg.Register {
	if n <= 0 || n >= k.V {
		panic(fmt.Sprintf("asmgen: static mask of %d lanes", n))
	}
	if k.avx512() {
		g := k.c.GP32()
		k.c.MOVL(operand.U32(uint32(1)<<uint(n)-1), g)
		m := k.c.K()
		k.c.KMOVW(g, m)
		return m
	}
	y := k.c.YMM()
	k.c.VMOVDQU(k.maskTable().Offset(4*(8-n)), y)
	return y
}

// dynLanes returns a mask enabling the first n lanes, n a 64-bit register
// holding a value in [0, V] (the caller clamps it). n is not modified.
func (k *synKit) dynLanes(n reg.GPVirtual) reg.Register {
	if k.avx512() {
		g := k.c.GP32()
		k.c.MOVL(operand.U32(0xFFFF), g)
		k.c.BZHIL(n.As32(), g, g)
		m := k.c.K()
		k.c.KMOVW(g, m)
		return m
	}
	base := k.c.GP64()
	k.c.LEAQ(k.maskTable(), base)
	neg := k.c.GP64()
	k.c.MOVQ(n, neg)
	k.c.NEGQ(neg)
	y := k.c.YMM()
	k.c.VMOVDQU(synMemIdx(base, 32, neg, 4), y)
	return y
}

// capLanes sets n = min(n, V).
func (k *synKit) capLanes(n reg.GPVirtual) { k.minGP(n, synImm(k.V)) }

// minGP sets n = min(n, lim) (signed), lim a register or an immediate.
// It branches rather than using CMOV, which the dispatch does not check
// for.
func (k *synKit) minGP(n reg.GPVirtual, lim operand.Op) {
	l := k.lbl("min")
	k.c.CMPQ(n, lim)
	k.c.JLE(synRef(l))
	k.c.MOVQ(lim, n)
	k.label(l)
}

// load loads a full vector.
func (k *synKit) load(m operand.Mem, dst reg.Register) { k.c.VMOVUPS(m, dst) }

// loadM loads the lanes of mask (nil: all) and zeroes the others; masked-out
// lanes are not read.
func (k *synKit) loadM(m operand.Mem, mask reg.Register, dst reg.Register) {
	switch {
	case mask == nil:
		k.c.VMOVUPS(m, dst)
	case k.avx512():
		k.c.VMOVUPS_Z(m, mask, dst)
	default:
		k.c.VMASKMOVPS(m, mask, dst)
	}
}

// storeM stores the lanes of mask (nil: all); the other lanes of memory are
// not written.
func (k *synKit) storeM(src reg.Register, mask reg.Register, m operand.Mem) {
	switch {
	case mask == nil:
		k.c.VMOVUPS(src, m)
	case k.avx512():
		k.c.VMOVUPS(src, mask, m)
	default:
		k.c.VMASKMOVPS(src, mask, m)
	}
}

// bcast broadcasts the float32 at m to every lane of dst.
func (k *synKit) bcast(m operand.Mem, dst reg.Register) { k.c.VBROADCASTSS(m, dst) }

// addr is the FP address of a parameter, a slice's base or length, or a
// result. A failure is a bug in the emitter (the catalog signature lacks
// the name), so it panics.
func (k *synKit) addr(comp gotypes.Component, what string) operand.Mem {
	b, err := comp.Resolve()
	if err != nil {
		panic(fmt.Sprintf("asmgen: %s: %s: %v", k.fn, what, err))
	}
	return b.Addr
}

// bcastParam broadcasts a float32 parameter (VBROADCASTSS from its FP
// address, which asmdecl accepts) into a new vector register.
func (k *synKit) bcastParam(name string) reg.VecVirtual {
	v := k.vec()
	k.c.VBROADCASTSS(k.addr(k.c.Param(name), name), v)
	return v
}

// hsum returns an XMM register whose lane 0 is the sum of the lanes of v.
// v is not modified.
func (k *synKit) hsum(v reg.VecVirtual) reg.VecVirtual {
	c := k.c
	x := c.XMM()
	switch {
	case k.V == 16:
		y := c.YMM()
		c.VEXTRACTF64X4(operand.U8(1), v, y)
		c.VADDPS(v.AsY(), y, y)
		c.VEXTRACTF32X4(operand.U8(1), y, x)
		c.VADDPS(y.AsX(), x, x)
	case k.avx512():
		// A YMM register that may be Y16–Y31: EVEX forms only.
		c.VEXTRACTF32X4(operand.U8(1), v, x)
		c.VADDPS(v.AsX(), x, x)
	default:
		c.VEXTRACTF128(operand.U8(1), v, x)
		c.VADDPS(v.AsX(), x, x)
	}
	t := c.XMM()
	c.VPERMILPS(operand.U8(0x4E), x, t)
	c.VADDPS(t, x, x)
	c.VMOVSHDUP(x, t)
	c.VADDSS(t, x, x)
	return x
}

// ret ends the function: VZEROUPPER, RET.
func (k *synKit) ret() {
	k.c.VZEROUPPER()
	k.c.RET()
}

// gp loads an int parameter, or a slice parameter's base or length
// (component), into a new 64-bit register.
func (k *synKit) gp(c gotypes.Component) reg.GPVirtual {
	r := k.c.GP64()
	k.c.Load(c, r)
	return r
}
