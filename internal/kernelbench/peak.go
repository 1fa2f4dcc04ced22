package kernelbench

//go:generate go run ../cmd/repogen -peak .

import (
	"sync"
	"time"
)

// peakChains is asmgen.PeakChains, the independent FMA chains per
// iteration of the generated peak kernels (a test checks they agree; the
// constant is repeated so that programs using this package do not link the
// generator).
const peakChains = 12

var (
	peakOnce  sync.Once
	peakGFLOP float64
)

// FMAPeak measures this core's single-precision FMA peak in GFLOP/s with
// the generated FMA-throughput kernel of the best level the CPU has (0 when
// it has neither AVX2 nor AVX-512, or under purego). It is measured once per
// process: the best of 20 short runs.
func FMAPeak() float64 {
	peakOnce.Do(func() {
		lanes, run := peakKernel()
		if run == nil {
			return
		}
		const iters = 1 << 18
		flopsPerCall := float64(iters) * peakChains * float64(lanes) * 2
		for r := 0; r < 20; r++ {
			start := time.Now()
			run(iters)
			if g := flopsPerCall / time.Since(start).Seconds() / 1e9; g > peakGFLOP {
				peakGFLOP = g
			}
		}
	})
	return peakGFLOP
}
