//go:build amd64 && !purego

package bf16proof

import (
	"fmt"
	"sync"

	"golang.org/x/sys/cpu"
)

// HasAVX512BF16 reports whether the AVX512-BF16 kernels run here (they
// also use AVX512BW).
var HasAVX512BF16 = cpu.X86.HasAVX512BF16 && cpu.X86.HasAVX512BW

var amxOnce = sync.OnceValue(func() error {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return fmt.Errorf("AMX: CPU lacks AMX-TILE (%v) or AMX-BF16 (%v): %w", cpu.X86.HasAMXTile, cpu.X86.HasAMXBF16, ErrNoFeature)
	}
	return requestTilePermission()
})

// AMX returns nil when the AMX kernels can run: the CPU has AMX-TILE and
// AMX-BF16 and the OS granted this process the tile data state (asked
// once). Otherwise the error, wrapping ErrNoFeature, says why.
func AMX() error { return amxOnce() }
