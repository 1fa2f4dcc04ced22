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

// cpuSeconds is the CPU time (user and system) this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
