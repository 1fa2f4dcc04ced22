//go:build !purego

package kernelbench

import "github.com/synthgen/synthgen/runtime/kernels"

func peakKernel() (lanes int, run func(int)) {
	switch {
	case kernels.Supported(kernels.AVX512):
		return 16, fmaPeakAVX512
	case kernels.Supported(kernels.AVX2):
		return 8, fmaPeakAVX2
	}
	return 0, nil
}
