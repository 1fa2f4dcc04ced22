package bench

//go:generate go run ../cmd/synthgen -peak .

import (
	"sync"
	"time"

	"github.com/synthgen/synthgen/gen/asmgen"
)

var (
	peakOnce  sync.Once
	peakGFLOP float64
)

// FMAPeak measures this core's single-precision FMA peak in GFLOP/s with
// the generated FMA-throughput kernel of the best level the CPU has (0 when
// it has neither AVX2 nor AVX-512, or under purego). It is measured once per
// process: the best of a few short runs.
func FMAPeak() float64 {
	peakOnce.Do(func() {
		lanes, run := peakKernel()
		if run == nil {
			return
		}
		const iters = 1 << 20
		flopsPerCall := float64(iters) * asmgen.PeakChains * float64(lanes) * 2
		for r := 0; r < 5; r++ {
			start := time.Now()
			run(iters)
			if g := flopsPerCall / time.Since(start).Seconds() / 1e9; g > peakGFLOP {
				peakGFLOP = g
			}
		}
	})
	return peakGFLOP
}
