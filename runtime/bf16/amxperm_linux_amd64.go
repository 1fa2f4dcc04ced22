//go:build amd64 && !purego

package bf16

import (
	"fmt"
	"syscall"
)

const (
	archReqXcompPerm  = 0x1023 // ARCH_REQ_XCOMP_PERM
	xfeatureXTileData = 18     // XFEATURE_XTILEDATA
)

// requestTilePermission asks Linux (≥ 5.16) for the AMX tile data state for
// the whole process. Without it the first tile instruction raises SIGILL.
func requestTilePermission() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0)
	if errno != 0 {
		return fmt.Errorf("AMX: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) refused: %v: %w", errno, ErrNoFeature)
	}
	return nil
}
