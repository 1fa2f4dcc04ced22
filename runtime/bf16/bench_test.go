package bf16

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkTile times each level's micro-kernel alone on packed operands in
// cache: 64 rows (two AMX tiles, eight AVX512-BF16 tiles) down one B panel
// of 32 columns, overwriting C, and reports GFLOP/s.
func BenchmarkTile(b *testing.B) {
	for _, kn := range levels(b) {
		for _, k := range []int{128, 256, 512} {
			b.Run(fmt.Sprintf("%s/k=%d", kn.Level, k), func(b *testing.B) {
				const m = 64
				r := rand.New(rand.NewPCG(1, 1))
				kp := Pad(k)
				a := make([]uint16, m/kn.MR*kn.ABlock(kp))
				for i := range a {
					a[i] = FromFloat32(float32(r.NormFloat64()))
				}
				bp := make([]uint16, BPanel(kp))
				for i := range bp {
					bp[i] = FromFloat32(float32(r.NormFloat64()))
				}
				c := make([]float32, m*NR)
				for b.Loop() {
					kn.Tile(kp, 0, kp, a, bp, c, NR, m, NR, nil, nil)
				}
				b.ReportMetric(2*float64(m*NR*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
