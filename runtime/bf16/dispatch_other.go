//go:build !amd64 || purego

package bf16

import "fmt"

// The errors are made once: the packers ask on every call, which must not
// allocate.
var (
	avx512Err = fmt.Errorf("AVX512-BF16: needs an amd64 build without the purego tag: %w", ErrNoFeature)
	amxErr    = fmt.Errorf("AMX: needs an amd64 build without the purego tag: %w", ErrNoFeature)
)

func hasAVX512BF16() error { return avx512Err }

func hasAMX() error { return amxErr }

func tileAMX(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	panic("bf16: AMX kernel in a build without it")
}

func rowAMX(steps int, a []uint16, lda int, b []uint16, ps int, c []float32, ldc, panels int) {
	panic("bf16: AMX kernel in a build without it")
}

func tileAVX512(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	panic("bf16: AVX512-BF16 kernel in a build without it")
}

func toBF16AVX512(dst *uint16, src *float32, n int) { panic("bf16: AVX512-BF16 in a build without it") }

func scaleAddAVX512(c *float32, n int, s float32, b *float32, u float32) {
	panic("bf16: AVX-512 in a build without it")
}

func pairsAVX512(dst *uint16, r0, r1 *float32, n int) {
	panic("bf16: AVX512-BF16 in a build without it")
}

func pairsPanelsAVX512(dst *uint16, pl int, r0, r1 *float32, n, panels int) {
	panic("bf16: AVX512-BF16 in a build without it")
}

func transposeATAVX512(dst *uint16, ldd int, src *float32, ld int, rows, cols, store int, sums *float32) {
	panic("bf16: AVX512-BF16 in a build without it")
}

func packBHalfAVX512(dst *uint16, src *float32, ld, rows, k int) {
	panic("bf16: AVX512-BF16 in a build without it")
}
