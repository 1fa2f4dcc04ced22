package model_test

import (
	"fmt"
	"testing"
)

// BenchmarkStep measures Forward+Backward at batch 16 × 128 tokens (the
// vanilla, random, aft_* and linear specs: n 128, d 128, 4 heads, 4 layers) with 1 and 2
// workers, in tokens per second of wall time, and (for a loaded machine)
// tokens per CPU-second of this process.
func BenchmarkStep(b *testing.B) {
	for _, name := range []string{"vanilla", "random", "aft_full", "aft_local", "aft_simple", "aft_conv", "linear"} {
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/workers=%d", name, workers), func(b *testing.B) {
				m := newModel(b, name, 1)
				m.SetWorkers(workers)
				const batch = 16
				t := m.Spec.N
				ws := m.NewWorkspace(batch)
				in, tg := tokens(1, batch, t)
				m.Forward(ws, in, tg, batch) // warm up
				m.Backward(ws)
				b.ReportAllocs()
				var cpu0 float64
				for b.Loop() {
					if cpu0 == 0 {
						cpu0 = cpuSeconds()
					}
					m.Forward(ws, in, tg, batch)
					m.Backward(ws)
				}
				tokens := float64(batch*t) * float64(b.N)
				b.ReportMetric(tokens/b.Elapsed().Seconds(), "tokens/s")
				if cpu := cpuSeconds() - cpu0; cpu0 > 0 && cpu > 0 {
					b.ReportMetric(tokens/cpu, "tokens/cpu-s")
				}
			})
		}
	}
}
