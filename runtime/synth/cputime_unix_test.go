//go:build unix

package synth

import "syscall"

// cpuSeconds is the process's user+system CPU time, for benchmarks on a
// shared machine where wall time includes other programs' load.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
