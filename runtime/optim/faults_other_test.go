//go:build !unix

package optim

// minorFaults is 0 where getrusage is missing.
func minorFaults() int64 { return 0 }
