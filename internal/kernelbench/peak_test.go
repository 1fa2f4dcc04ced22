package kernelbench

import (
	"testing"

	"github.com/synthgen/synthgen/gen/asmgen"
)

// BenchmarkFMAPeak reports this core's measured FMA peak, the 100% of %peak.
func BenchmarkFMAPeak(b *testing.B) {
	lanes, run := peakKernel()
	if run == nil {
		b.Skip("no AVX2 or AVX-512 on this CPU (or purego build)")
	}
	const iters = 1 << 16
	for b.Loop() {
		run(iters)
	}
	b.ReportMetric(float64(b.N)*iters*peakChains*float64(lanes)*2/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func TestPeakChains(t *testing.T) {
	if peakChains != asmgen.PeakChains {
		t.Fatalf("kernelbench.peakChains = %d, the generated kernels run %d chains", peakChains, asmgen.PeakChains)
	}
}
