package train

import (
	"testing"

	_ "github.com/synthgen/synthgen/generated/random"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// BenchmarkTrainStep measures whole training steps (batch, forward,
// backward, clipping, AdamW) of the default spec at the default batch.
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []struct {
		spec  string
		batch int
	}{{"small", 8}, {"random", 8}} {
		b.Run(c.spec, func(b *testing.B) {
			k, err := kernels.Lookup(c.spec)
			if err != nil {
				b.Fatal(err)
			}
			m, err := model.New(k.Spec, k, 1)
			if err != nil {
				b.Fatal(err)
			}
			tr, err := New(m, text(b).Train, DefaultConfig(1<<30, c.batch))
			if err != nil {
				b.Fatal(err)
			}
			if err := tr.TrainStep(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := tr.TrainStep(); err != nil {
					b.Fatal(err)
				}
			}
			s := b.Elapsed().Seconds()
			tokens := float64(b.N * c.batch * k.Spec.N)
			b.ReportMetric(tokens/s, "tok/s")
			// ≈ 6 flops per parameter and token (forward 2, backward 4).
			b.ReportMetric(6*float64(m.NumParams())*tokens/s/1e9, "GFLOP/s")
		})
	}
}
