package asmgen

import (
	"github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// Vectorised exp for the softmax kernels.
//
// Both levels compute exp(x) = 2^n · p(t) with n = round(x·log2e), the
// Cody-Waite reduction t = x − n·ln2_hi − n·ln2_lo (|t| ≤ ln2/2) and a
// degree-5 minimax polynomial p (constants from XNNPACK's
// exp-avx512f-rr2-p5-scalef and expminus-avx2-rr1-p5; see avo-notes §2).
//
//   - AVX-512 rounds with VRNDSCALEPS and finishes with VSCALEFPS, zeroing
//     (VSCALEFPS.Z under a compare mask) the lanes below expZeroCutoff, so
//     −Inf gives exactly +0 and results down to the smallest denormal are
//     kept. NaN propagates. Also right for finite x > 0 (VSCALEFPS
//     overflows to +Inf above ≈ 88.72); exp(+Inf) is NaN.
//   - AVX2 is the "expminus" form, valid for x ≤ 0 only (all softmax needs
//     after the max subtraction): the scale 2^n is built by shifting the
//     magic-biased n into the exponent field, and lanes below
//     expDenormCutoff (where 2^n would be denormal) are cleared, so −Inf gives
//     exactly +0 and results below 2^−126 flush to +0. NaN propagates.
//
// The emitted code clobbers its input register. Accuracy, measured by
// TestSoftmaxValueAsm (the exp kernels of svharness_test.go, 2^22 points):
// max relative error against float64 math.Exp 1.62e-7 (2.7·2^−24) over
// [−87, 0] at both levels; below −87 the AVX-512 results (denormal) are
// within 2.4e-45 absolute, AVX2's are +0 (error ≤ 2^−126); exp(−Inf) = +0
// exactly, exp(0) = 1 and NaN stays NaN.
var (
	expLog2e        float32 = 0x1.715476p+0
	expMinusLn2Hi   float32 = -0x1.62E43p-1
	expMinusLn2Lo   float32 = 0x1.05C61p-29
	expC1           float32 = 0x1.FFFFF6p-1
	expC2           float32 = 0x1.FFFDC6p-2
	expC3           float32 = 0x1.555A80p-3
	expC4           float32 = 0x1.573A1Ap-5
	expC5           float32 = 0x1.0F9F9Cp-7
	expZeroCutoff   float32 = -0x1.9FE368p+6 // ≈ −103.97: exp rounds to +0 below
	expDenormCutoff float32 = -0x1.5D589Ep+6 // ≈ −87.34: smallest x with a normal exp(x)
	expMagicBias    float32 = 0x1.8000FEp23  // 1.5·2^23 + 127: rounds x·log2e, adds the exponent bias
)

// exp emits and returns exp(x) for every lane in a new register,
// clobbering x. AVX-512 also uses a K register for the cutoff.
func (s *simd) exp(x reg.VecVirtual) reg.VecVirtual {
	if s.isa == kernels.AVX512 {
		return s.expAVX512(x)
	}
	return s.expAVX2(x)
}

func (s *simd) expAVX512(x reg.VecVirtual) reg.VecVirtual {
	c := s.c
	p, n, keep := c.ZMM(), c.ZMM(), c.K()
	// keep = !(x < cutoff): lanes with a nonzero result, and NaN lanes.
	c.VCMPPS_BCST(operand.U8(5), s.konst("exp_zcut", expZeroCutoff), x, keep)
	c.VMULPS_BCST(s.konst("exp_log2e", expLog2e), x, n)
	c.VRNDSCALEPS(operand.U8(0), n, n) // round to nearest even
	c.VFMADD231PS_BCST(s.konst("exp_mln2hi", expMinusLn2Hi), n, x)
	c.VFMADD231PS_BCST(s.konst("exp_mln2lo", expMinusLn2Lo), n, x) // x = t
	c.VBROADCASTSS(s.konst("exp_c5", expC5), p)
	c.VFMADD213PS_BCST(s.konst("exp_c4", expC4), x, p)
	c.VFMADD213PS_BCST(s.konst("exp_c3", expC3), x, p)
	c.VFMADD213PS_BCST(s.konst("exp_c2", expC2), x, p)
	c.VFMADD213PS_BCST(s.konst("exp_c1", expC1), x, p)
	c.VFMADD213PS_BCST(s.konst("exp_one", 1), x, p)
	c.VSCALEFPS_Z(n, p, keep, p) // p·2^n, zero below the cutoff
	return p
}

func (s *simd) expAVX2(x reg.VecVirtual) reg.VecVirtual {
	c := s.c
	f, t, under := c.YMM(), c.YMM(), c.YMM()
	c.VCMPPS(operand.U8(1), s.konst("exp_dcut", expDenormCutoff), x, under) // x < cutoff (ordered)
	// n = x·log2e + magic: the low mantissa bits hold round(x·log2e)+127.
	c.VMOVUPS(s.konst("exp_magic", expMagicBias), t)
	c.VFMADD231PS(s.konst("exp_log2e", expLog2e), x, t)
	c.VPSLLD(operand.U8(23), t, f)                     // f = s = 2^n
	c.VSUBPS(s.konst("exp_magic", expMagicBias), t, t) // t = n
	c.VFMADD231PS(s.konst("exp_mln2hi", expMinusLn2Hi), t, x)
	c.VFMADD231PS(s.konst("exp_mln2lo", expMinusLn2Lo), t, x) // x = r
	c.VMOVUPS(s.konst("exp_c5", expC5), t)
	c.VFMADD213PS(s.konst("exp_c4", expC4), x, t)
	c.VFMADD213PS(s.konst("exp_c3", expC3), x, t)
	c.VFMADD213PS(s.konst("exp_c2", expC2), x, t)
	c.VFMADD213PS(s.konst("exp_c1", expC1), x, t) // t = p(r), e^r ≈ 1 + r·p(r)
	c.VMULPS(f, x, x)                             // x = r·s
	c.VFMADD231PS(t, x, f)                        // f = s + (r·s)·p
	c.VANDNPS(f, under, f)                        // +0 below the cutoff (−Inf included)
	return f
}
