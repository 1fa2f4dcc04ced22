package bf16proof

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkGemm32 times the AMX 32×32 micro-kernel (4 accumulator tiles;
// per 32-deep step 4 tile loads and 4 TDPBF16PS) with the tile state set
// up and released in every call, and reports GFLOP/s.
func BenchmarkGemm32(b *testing.B) {
	skipWithoutAMX(b)
	for _, k := range []int{256, 1024, 4096} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			c, a, _, bp := gemmCase(rand.New(rand.NewPCG(1, 1)), k)
			for b.Loop() {
				if err := Gemm32(c, a, bp, k); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(2*32*32*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDotBF16 times the VDPBF16PS dot product (one accumulator chain
// per parity, so latency-bound) and reports GFLOP/s.
func BenchmarkDotBF16(b *testing.B) {
	if !HasAVX512BF16 {
		b.Skip("AVX512-BF16 kernels not available here")
	}
	const n = 4096
	r := rand.New(rand.NewPCG(1, 1))
	x, y := randomBF16(r, n), randomBF16(r, n)
	for b.Loop() {
		if _, err := DotBF16(x, y); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemm4x32 times the AVX512-BF16 4×32 micro-kernel and reports
// GFLOP/s.
func BenchmarkGemm4x32(b *testing.B) {
	if !HasAVX512BF16 {
		b.Skip("AVX512-BF16 kernels not available here")
	}
	const k = 1024
	r := rand.New(rand.NewPCG(1, 1))
	c := make([]float32, 128)
	a := randomBF16(r, 4*k)
	bp, err := PackB(randomBF16(r, k*32), k, 32)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := Gemm4x32(c, a, bp, k); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(2*4*32*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
