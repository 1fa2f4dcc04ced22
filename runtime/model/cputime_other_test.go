//go:build !unix

package model_test

func cpuSeconds() float64 { return 0 }
