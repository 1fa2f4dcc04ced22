package asmgen

import (
	"fmt"
	"math"

	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/gotypes"
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// simd is the vector toolbox of every emitter: it hides the differences
// between AVX-512 (ZMM, 16 lanes, K-mask tails, embedded broadcasts) and
// AVX2 (YMM, 8 lanes, VMASKMOVPS tails with a mask table, 32-byte
// constants) behind a few methods, and hands out unique labels. The
// emitter families build on it: svKit (softmax-value), aftKit (AFT and
// linear attention), rowKit (row-wise kernels); the products, tiles and
// triangle operations use it as it is.
//
// AVX2 code must only use Y0–Y15: the emitters keep fewer than 16 vector
// registers live at a time, and Compile checks the allocation.
type simd struct {
	f    *File
	c    *build.Context
	isa  kernels.ISA
	W    int    // float32 lanes per vector
	regs int    // vector registers the level may use
	fn   string // function name, for the messages of addr
	nlbl int

	// movupsMasks makes lanes and dynLanes load AVX2 masks with VMOVUPS
	// rather than VMOVDQU: the same 32 bytes from the same table, as the
	// softmax-value kernels have always loaded them (kept so that merging
	// their toolbox into this one changed no instruction).
	movupsMasks bool
}

// newSIMD prepares emission of function fn at level isa (AVX2 or AVX512),
// with vectors of the level's full width.
func newSIMD(f *File, fn string, isa kernels.ISA) *simd {
	s := &simd{f: f, c: f.Ctx, isa: isa, W: 8, regs: 16, fn: fn}
	if isa == kernels.AVX512 {
		s.W, s.regs = 16, 32
	}
	return s
}

// narrow sets 8-lane vectors on both levels and returns s: on AVX-512
// they are YMM registers (any of Y0–Y31) with K-mask tails, for kernels
// whose rows are short enough that 16 lanes would be mostly masked.
func (s *simd) narrow() *simd {
	s.W = 8
	return s
}

func (s *simd) avx512() bool { return s.isa == kernels.AVX512 }

// lbl returns a fresh label name, unique within the function.
func (s *simd) lbl(what string) string {
	s.nlbl++
	return fmt.Sprintf("%s_%d", what, s.nlbl)
}

// label places a label.
func (s *simd) label(name string) { s.c.Label(name) }

// synRef is a reference to a label for jumps.
func synRef(name string) operand.LabelRef { return operand.LabelRef(name) }

// synMem is the address base+disp.
func synMem(base reg.Register, disp int) operand.Mem {
	return operand.Mem{Base: base, Disp: disp}
}

// synMemIdx is the address base+disp+index·scale.
func synMemIdx(base reg.Register, disp int, index reg.Register, scale uint8) operand.Mem {
	return operand.Mem{Base: base, Disp: disp, Index: index, Scale: scale}
}

// synImm is a signed 32-bit immediate.
func synImm(x int) operand.I32 {
	if int(int32(x)) != x {
		panic(fmt.Sprintf("asmgen: immediate %d does not fit in 32 bits", x))
	}
	return operand.I32(x)
}

// imm is an unsigned 32-bit immediate.
func imm(x int) operand.U32 { return operand.U32(uint32(x)) }

// vec allocates a virtual vector register of the level's width.
func (s *simd) vec() reg.VecVirtual {
	if s.W == 16 {
		return s.c.ZMM()
	}
	return s.c.YMM()
}

// vecs allocates n vector registers.
func (s *simd) vecs(n int) []reg.VecVirtual {
	v := make([]reg.VecVirtual, n)
	for i := range v {
		v[i] = s.vec()
	}
	return v
}

// zero clears v. VXORPS (AVX512DQ on ZMM), not VPXORD: avo knows only the
// former as a zeroing idiom, and would otherwise take v as live before it.
func (s *simd) zero(v reg.Register) { s.c.VXORPS(v, v, v) }

// maskTable is the AVX2 tail-mask table, one per file: 8 all-ones words
// then 8 zero words; the 8 words starting at word 8−n enable the first n
// lanes.
func (s *simd) maskTable() operand.Mem {
	w := make([]uint32, 16)
	for i := 0; i < 8; i++ {
		w[i] = 0xFFFFFFFF
	}
	return s.f.Table("lanemask8", w)
}

// movMask loads an AVX2 mask from the table.
func (s *simd) movMask(m operand.Mem, dst reg.Register) {
	if s.movupsMasks {
		s.c.VMOVUPS(m, dst)
	} else {
		s.c.VMOVDQU(m, dst)
	}
}

// tailOf returns the mask of the partial last vector of a row of w floats
// (a K register on AVX-512, a YMM register on AVX2), or nil when the
// vector width divides w.
func (s *simd) tailOf(w int) reg.Register {
	if w%s.W == 0 {
		return nil
	}
	return s.lanes(w % s.W)
}

// lanes returns a mask enabling the first n lanes, 0 < n < W (a constant):
// a K register for AVX-512, a YMM register for AVX2.
func (s *simd) lanes(n int) reg.Register {
	if n <= 0 || n >= s.W {
		panic(fmt.Sprintf("asmgen: static mask of %d lanes", n))
	}
	if s.avx512() {
		g := s.c.GP32()
		s.c.MOVL(operand.U32(uint32(1)<<uint(n)-1), g)
		m := s.c.K()
		s.c.KMOVW(g, m)
		return m
	}
	y := s.c.YMM()
	s.movMask(s.maskTable().Offset(4*(8-n)), y)
	return y
}

// dynLanes returns a mask enabling the first n lanes, n a 64-bit register
// holding a value in [0, W] (the caller clamps it). n is not modified.
func (s *simd) dynLanes(n reg.GPVirtual) reg.Register {
	if s.avx512() {
		g := s.c.GP32()
		s.c.MOVL(operand.U32(0xFFFF), g)
		s.c.BZHIL(n.As32(), g, g)
		m := s.c.K()
		s.c.KMOVW(g, m)
		return m
	}
	base := s.c.GP64()
	s.c.LEAQ(s.maskTable(), base)
	neg := s.c.GP64()
	s.c.MOVQ(n, neg)
	s.c.NEGQ(neg)
	y := s.c.YMM()
	s.movMask(synMemIdx(base, 32, neg, 4), y)
	return y
}

// capLanes sets n = min(n, W).
func (s *simd) capLanes(n reg.GPVirtual) { s.minGP(n, synImm(s.W)) }

// minGP sets n = min(n, lim) (signed), lim a register or an immediate.
// It branches rather than using CMOV, which the dispatch does not check
// for.
func (s *simd) minGP(n reg.GPVirtual, lim operand.Op) {
	l := s.lbl("min")
	s.c.CMPQ(n, lim)
	s.c.JLE(synRef(l))
	s.c.MOVQ(lim, n)
	s.label(l)
}

// load loads a full vector.
func (s *simd) load(m operand.Mem, dst reg.Register) { s.c.VMOVUPS(m, dst) }

// loadM loads the lanes of mask (nil: all) and zeroes the others; masked-out
// lanes are not read.
func (s *simd) loadM(m operand.Mem, mask reg.Register, dst reg.Register) {
	switch {
	case mask == nil:
		s.c.VMOVUPS(m, dst)
	case s.avx512():
		s.c.VMOVUPS_Z(m, mask, dst)
	default:
		s.c.VMASKMOVPS(m, mask, dst)
	}
}

// storeM stores the lanes of mask (nil: all); the other lanes of memory are
// not written.
func (s *simd) storeM(src reg.Register, mask reg.Register, m operand.Mem) {
	switch {
	case mask == nil:
		s.c.VMOVUPS(src, m)
	case s.avx512():
		s.c.VMOVUPS(src, mask, m)
	default:
		s.c.VMASKMOVPS(src, mask, m)
	}
}

// bcast broadcasts the float32 at m to every lane of dst.
func (s *simd) bcast(m operand.Mem, dst reg.Register) { s.c.VBROADCASTSS(m, dst) }

// konst is float32 constant v as the memory operand of a packed
// instruction: a 4-byte datum for AVX-512's embedded broadcasts, a 32-byte
// vector for AVX2 (which has none).
func (s *simd) konst(name string, v float32) operand.Mem {
	if s.avx512() {
		return s.f.ConstF32(name, v)
	}
	b := math.Float32bits(v)
	w := make([]uint32, 8)
	for i := range w {
		w[i] = b
	}
	return s.f.Table(fmt.Sprintf("%s_v8_%08x", name, b), w)
}

// withConst emits a packed instruction whose first operand is the
// constant v: its _BCST form on AVX-512, the plain form on AVX2.
func (s *simd) withConst(bcst, plain func(...operand.Op), name string, v float32, rest ...operand.Op) {
	ops := append([]operand.Op{s.konst(name, v)}, rest...)
	if s.avx512() {
		bcst(ops...)
	} else {
		plain(ops...)
	}
}

// constVec returns a new register holding v in every lane: a broadcast of
// the 4-byte datum on AVX-512, a load of the 32-byte vector on AVX2.
func (s *simd) constVec(name string, v float32) reg.VecVirtual {
	r := s.vec()
	if s.avx512() {
		s.c.VBROADCASTSS(s.f.ConstF32(name, v), r)
	} else {
		s.c.VMOVUPS(s.konst(name, v), r)
	}
	return r
}

// addr is the FP address of a parameter, a slice's base or length, or a
// result. A failure is a bug in the emitter (the catalog signature lacks
// the name), so it panics.
func (s *simd) addr(comp gotypes.Component, what string) operand.Mem {
	b, err := comp.Resolve()
	if err != nil {
		panic(fmt.Sprintf("asmgen: %s: %s: %v", s.fn, what, err))
	}
	return b.Addr
}

// bcastParam broadcasts a float32 parameter (VBROADCASTSS from its FP
// address, which asmdecl accepts) into a new vector register.
func (s *simd) bcastParam(name string) reg.VecVirtual {
	v := s.vec()
	s.c.VBROADCASTSS(s.addr(s.c.Param(name), name), v)
	return v
}

// gp loads an int parameter, or a slice parameter's base or length
// (component), into a new 64-bit register.
func (s *simd) gp(c gotypes.Component) reg.GPVirtual {
	r := s.c.GP64()
	s.c.Load(c, r)
	return r
}

// param loads a slice parameter's base pointer into a new register.
func (s *simd) param(name string) reg.GPVirtual { return s.gp(s.c.Param(name).Base()) }

// hsum returns an XMM register whose lane 0 is the sum of the lanes of v.
// v is not modified.
func (s *simd) hsum(v reg.VecVirtual) reg.VecVirtual {
	c := s.c
	x := c.XMM()
	switch {
	case s.W == 16:
		y := c.YMM()
		c.VEXTRACTF64X4(operand.U8(1), v, y)
		c.VADDPS(v.AsY(), y, y)
		c.VEXTRACTF32X4(operand.U8(1), y, x)
		c.VADDPS(y.AsX(), x, x)
	case s.avx512():
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

// allReduce leaves op over all lanes of x in every lane of x (full-width
// vectors); op(a, b, dst) computes dst = op(b, a) with a register or
// memory a.
func (s *simd) allReduce(x reg.VecVirtual, op func(a, b, dst operand.Op)) {
	c := s.c
	t := s.vec()
	if s.avx512() {
		c.VSHUFF64X2(operand.U8(0x4E), x, x, t) // swap 256-bit halves
		op(t, x, x)
		c.VSHUFF64X2(operand.U8(0xB1), x, x, t) // swap 128-bit lanes in pairs
		op(t, x, x)
	} else {
		c.VPERM2F128(operand.U8(0x01), x, x, t)
		op(t, x, x)
	}
	c.VPERMILPS(operand.U8(0x4E), x, t)
	op(t, x, x)
	c.VPERMILPS(operand.U8(0xB1), x, t)
	op(t, x, x)
}

// ret ends the function: VZEROUPPER, RET.
func (s *simd) ret() {
	s.c.VZEROUPPER()
	s.c.RET()
}
