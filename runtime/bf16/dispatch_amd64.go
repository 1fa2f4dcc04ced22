//go:build amd64 && !purego

package bf16

import (
	"fmt"
	"sync"

	"golang.org/x/sys/cpu"
)

var avx512Err = func() error {
	if !cpu.X86.HasAVX512BF16 || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512F {
		return fmt.Errorf("AVX512-BF16: CPU lacks AVX512-BF16 (%v) or AVX512BW (%v): %w", cpu.X86.HasAVX512BF16, cpu.X86.HasAVX512BW, ErrNoFeature)
	}
	return nil
}()

func hasAVX512BF16() error { return avx512Err }

var amxOnce = sync.OnceValue(func() error {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return fmt.Errorf("AMX: CPU lacks AMX-TILE (%v) or AMX-BF16 (%v): %w", cpu.X86.HasAMXTile, cpu.X86.HasAMXBF16, ErrNoFeature)
	}
	return requestTilePermission()
})

func hasAMX() error { return amxOnce() }

// tileAMX runs gemmAMX on the mr×nr corner: its full 32×32 tiles in one
// call, in place; a partial tile (rows or columns) through a 32×32 buffer
// (the packed A and B are zero past the edge, so the buffer's other
// elements are products of zeros), which starts from src or the bias.
func tileAMX(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	full := 0
	if nr == 32 {
		full = mr / 32
	}
	if full > 0 {
		var bp, sp *float32
		if src != nil {
			sp = &src[0]
		} else if bias != nil {
			bp = &bias[:32][0]
		}
		gemmAMX(steps, &a[0], 2*lda, &b[0], &c[0], 4*ldc, sp, full, 2*32*lda, 0, 4*32*ldc, bp)
	}
	for i0 := full * 32; i0 < mr; i0 += 32 {
		rows := min(32, mr-i0)
		var buf [32 * 32]float32
		cs := c[i0*ldc:]
		switch {
		case src != nil:
			ss := src[i0*ldc:]
			for i := 0; i < rows; i++ {
				copy(buf[i*32:i*32+nr], ss[i*ldc:i*ldc+nr])
			}
		case bias != nil:
			for i := 0; i < rows; i++ {
				copy(buf[i*32:i*32+nr], bias[:nr])
			}
		}
		var bsrc *float32
		if src != nil || bias != nil {
			bsrc = &buf[0]
		}
		gemmAMX(steps, &a[i0*lda], 2*lda, &b[0], &buf[0], 128, bsrc, 1, 0, 0, 0, nil)
		for i := 0; i < rows; i++ {
			copy(cs[i*ldc:i*ldc+nr], buf[i*32:i*32+nr])
		}
	}
}

// rowAMX is TileRow's AMX path: one call for the panels' 32-column
// tiles along the 32 rows of block a (panels ps bf16 apart).
func rowAMX(steps int, a []uint16, lda int, b []uint16, ps int, c []float32, ldc, panels int) {
	gemmAMX(steps, &a[0], 2*lda, &b[0], &c[0], 4*ldc, nil, panels, 0, 2*ps, 4*32, nil)
}

func tileAVX512(steps int, a []uint16, lda int, b []uint16, c []float32, ldc, mr, nr int, src, bias []float32) {
	k0 := uint16(1<<min(nr, 16) - 1)
	k1 := uint16(1<<max(nr-16, 0) - 1)
	var sp, bp *float32
	if src != nil {
		sp = &src[0]
	} else if bias != nil {
		bp = &bias[:nr][0]
	}
	gemmAVX512(steps, &a[0], 2*lda, &b[0], &c[0], 4*ldc, mr, k0, k1, sp, bp) // every row block in one call
}
