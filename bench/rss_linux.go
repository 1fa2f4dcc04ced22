//go:build linux

package bench

import (
	"os"
	"syscall"
)

// maxRSSKiB is a finished process's peak resident set in KiB (Linux's
// ru_maxrss unit).
func maxRSSKiB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok && ru != nil {
		return ru.Maxrss
	}
	return 0
}
