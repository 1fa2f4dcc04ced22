//go:build amd64 && !purego

package optim

import (
	"golang.org/x/sys/cpu"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// vecAVX: the gradient norm's sums and the decay-only update run on the
// AVX kernels (sumSquaresAVX, scaleAVX): the CPU has AVX and SYNTHGEN_ISA
// does not cap the kernels below AVX2. Their results are the Go loops'
// bit for bit, so this changes only the speed. Tests switch it.
var vecAVX = func() bool {
	l, err := kernels.Level()
	return err == nil && l >= kernels.AVX2 && cpu.X86.HasAVX
}()
