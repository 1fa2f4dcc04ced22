//go:build !unix

package synth

func cpuSeconds() float64 { return 0 }
