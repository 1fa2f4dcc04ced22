//go:build unix

package optim

import "syscall"

// minorFaults is the process's minor page faults so far (getrusage).
func minorFaults() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return int64(ru.Minflt)
}
