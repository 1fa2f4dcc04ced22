//go:build !amd64 || purego

package bench

func peakKernel() (lanes int, run func(int)) { return 0, nil }
