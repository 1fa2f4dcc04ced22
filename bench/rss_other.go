//go:build !linux

package bench

import "os"

// maxRSSKiB is 0 (unknown) off Linux.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }

// cpuSeconds is 0 (unknown) off Linux.
func cpuSeconds() float64 { return 0 }
