//go:build !amd64 || purego

package bf16proof

import "fmt"

// HasAVX512BF16 reports whether the AVX512-BF16 kernels run here; never in
// this build.
var HasAVX512BF16 = false

// AMX returns why the AMX kernels cannot run in this build.
func AMX() error {
	return fmt.Errorf("AMX: needs an amd64 build without the purego tag: %w", ErrNoFeature)
}

func toBF16AVX512(dst *uint16, src *float32, n int)      { panic("unreachable") }
func dotBF16AVX512(a, b *uint16, blocks int) float32     { panic("unreachable") }
func tileMatmulAMX(c *float32, a, b *uint16)             { panic("unreachable") }
func gemm32x32AMX(c *float32, a, b *uint16, k int)       { panic("unreachable") }
func gemm4x32AVX512BF16(c *float32, a, b *uint16, k int) { panic("unreachable") }
