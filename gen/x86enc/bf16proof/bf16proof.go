// Package bf16proof runs, on this CPU, machine code encoded by gen/x86enc:
// an AVX512-BF16 dot product (VDPBF16PS), an AVX512-BF16 float32→bf16
// conversion (VCVTNE2PS2BF16, VCVTNEPS2BF16) and AMX tile products
// (LDTILECFG, TILELOADD, TDPBF16PS, TILESTORED, TILERELEASE). Its tests
// check them against float32/float64 references on bf16-rounded inputs; it
// is the runtime proof of the encoder, not a kernel library.
//
// The bf16 conversion and dot product fall back to pure Go where the CPU or
// the build (purego, non-amd64) lacks AVX512-BF16; the GEMM kernels return
// an error wrapping ErrNoFeature that says why they cannot run.
//
// # AMX, preemption and signals
//
// Linux enables AMX tile data per process: AMX asks once for it with
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the first
// tile instruction raises SIGILL. The kernel grants it only when every
// thread's signal stack can hold the enlarged signal frame (about 11 KB
// with AMX); Go's signal stacks are 32 KB. Once granted, the kernel saves
// and restores the tile data on context switches and writes it into the
// XSAVE area of every signal frame, restoring it on sigreturn, so a signal
// — such as SIGURG, Go's asynchronous preemption — taken in the middle of a
// tile computation leaves the tiles intact. Go itself never switches
// goroutines inside an assembly function (assembly is not an async safe
// point, and NOSPLIT leaves have no stack check), so tile state cannot pass
// from one goroutine to another as long as each call configures (LDTILECFG),
// computes, stores and releases (TILERELEASE) its tiles, as these kernels
// do. The price is latency: a long call delays preemption and GC, so calls
// should stay short (tens of microseconds). TestAMXSurvivesSignals checks
// this under a storm of SIGURG and forced GCs.
package bf16proof

//go:generate go run ./internal/asm

import (
	"errors"
	"fmt"
	"math"
)

// FromFloat32 rounds f to bf16 as VCVTNEPS2BF16 does: nearest even, NaN
// kept (and quietened), denormal inputs flushed to a signed zero.
func FromFloat32(f float32) uint16 {
	u := math.Float32bits(f)
	switch {
	case u&0x7fffffff > 0x7f800000: // NaN
		return uint16(u>>16) | 0x40
	case u&0x7f800000 == 0: // zero or denormal
		return uint16(u>>16) & 0x8000
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}

// ToFloat32 widens a bf16 value exactly.
func ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// ErrNoFeature is wrapped by the errors of functions whose instruction set
// this CPU, OS or build lacks.
var ErrNoFeature = errors.New("feature not available")

// ConvertBF16 rounds src into dst (FromFloat32), with AVX512-BF16 where
// available. len(dst) must equal len(src).
func ConvertBF16(dst []uint16, src []float32) error {
	if len(dst) != len(src) {
		return fmt.Errorf("bf16proof.ConvertBF16: len(dst) %d != len(src) %d", len(dst), len(src))
	}
	if len(src) == 0 {
		return nil
	}
	if HasAVX512BF16 {
		toBF16AVX512(&dst[0], &src[0], len(src))
		return nil
	}
	for i, f := range src {
		dst[i] = FromFloat32(f)
	}
	return nil
}

// DotBF16 returns Σ a[i]·b[i] of bf16 vectors accumulated in float32, by
// VDPBF16PS for whole blocks of 32 where available.
func DotBF16(a, b []uint16) (float32, error) {
	if len(a) != len(b) {
		return 0, fmt.Errorf("bf16proof.DotBF16: len(a) %d != len(b) %d", len(a), len(b))
	}
	var s float32
	n := 0
	if HasAVX512BF16 && len(a) >= 32 {
		n = len(a) / 32 * 32
		s = dotBF16AVX512(&a[0], &b[0], n/32)
	}
	for i := n; i < len(a); i++ {
		s += ToFloat32(a[i]) * ToFloat32(b[i])
	}
	return s, nil
}

// PackB lays out a k×n row-major bf16 matrix (n = 16·tiles, k a multiple
// of 32) as AMX B tiles: for each 32-deep block and each 16-column tile,
// 16 rows of 32 bf16 holding the pairs (B[2r][j], B[2r+1][j]) for j in the
// tile.
func PackB(b []uint16, k, n int) ([]uint16, error) {
	if k <= 0 || k%32 != 0 || n <= 0 || n%16 != 0 || len(b) != k*n {
		return nil, fmt.Errorf("bf16proof.PackB: k %d must be a positive multiple of 32, n %d of 16, len(b) %d = k·n", k, n, len(b))
	}
	out := make([]uint16, 0, k*n)
	for kb := 0; kb < k; kb += 32 {
		for jt := 0; jt < n; jt += 16 {
			for r := 0; r < 16; r++ {
				for j := jt; j < jt+16; j++ {
					out = append(out, b[(kb+2*r)*n+j], b[(kb+2*r+1)*n+j])
				}
			}
		}
	}
	return out, nil
}

// TileMatmul computes c += a·b for c 16×16 float32, a 16×32 bf16 and b
// 32×16 bf16 packed by PackB, with one AMX TDPBF16PS. It returns an error
// wrapping ErrNoFeature, with the reason, where AMX cannot run.
func TileMatmul(c *[256]float32, a, bPacked *[512]uint16) error {
	if err := AMX(); err != nil {
		return err
	}
	tileMatmulAMX(&c[0], &a[0], &bPacked[0])
	return nil
}

// Gemm32 computes c += a·b for c 32×32 float32 (row-major), a 32×k bf16
// (row-major) and b k×32 bf16 packed by PackB, k a positive multiple of
// 32, with AMX; it returns an error wrapping ErrNoFeature where AMX cannot
// run.
func Gemm32(c []float32, a, bPacked []uint16, k int) error {
	if k <= 0 || k%32 != 0 || len(c) != 32*32 || len(a) != 32*k || len(bPacked) != 32*k {
		return fmt.Errorf("bf16proof.Gemm32: k %d must be a positive multiple of 32, len(c) %d = 1024, len(a) %d and len(b) %d = 32k", k, len(c), len(a), len(bPacked))
	}
	if err := AMX(); err != nil {
		return err
	}
	gemm32x32AMX(&c[0], &a[0], &bPacked[0], k)
	return nil
}

// Gemm4x32 computes c += a·b for c 4×32 float32 (row-major), a 4×k bf16
// (row-major) and b k×32 bf16 packed by PackB, k a positive multiple of
// 32, with AVX512-BF16 (VDPBF16PS with broadcast A pairs); it returns an
// error wrapping ErrNoFeature where AVX512-BF16 cannot run.
func Gemm4x32(c []float32, a, bPacked []uint16, k int) error {
	if k <= 0 || k%32 != 0 || len(c) != 4*32 || len(a) != 4*k || len(bPacked) != 32*k {
		return fmt.Errorf("bf16proof.Gemm4x32: k %d must be a positive multiple of 32, len(c) %d = 128, len(a) %d = 4k, len(b) %d = 32k", k, len(c), len(a), len(bPacked))
	}
	if !HasAVX512BF16 {
		return fmt.Errorf("bf16proof.Gemm4x32: AVX512-BF16 kernels not available: %w", ErrNoFeature)
	}
	gemm4x32AVX512BF16(&c[0], &a[0], &bPacked[0], k)
	return nil
}
