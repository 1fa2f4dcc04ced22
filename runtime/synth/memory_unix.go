//go:build unix

package synth

import "syscall"

// addressSpaceLimit is the soft RLIMIT_AS in bytes (0: none, infinity or
// unknown).
func addressSpaceLimit() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil || r.Cur > 1<<62 {
		return 0
	}
	return int64(r.Cur)
}
