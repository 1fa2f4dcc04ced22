package mat

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// packWant is pack's definition: dst[panel·kl·w + (p−kb)·w + (r−r0)%w] =
// o(r, p) for r0 ≤ r < r1, kb ≤ p < kb+kl, and 0 for the rows of the last
// panel past r1.
func packWant(o operand, r0, r1, kb, kl, w int) []float32 {
	panels := (r1 - r0 + w - 1) / w
	out := make([]float32, panels*kl*w)
	for pr := 0; pr < panels; pr++ {
		for p := 0; p < kl; p++ {
			for q := 0; q < w; q++ {
				if r := r0 + pr*w + q; r < r1 {
					out[pr*kl*w+p*w+q] = o.at(r, kb+p)
				}
			}
		}
	}
	return out
}

// TestPack checks pack in each of its layouts (rows contiguous, p
// contiguous, neither) against its definition, with blocks that start
// inside the operand, panels cut short, and canaries after the panels.
func TestPack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const rows, inner = 77, 301
	data := randSlice(r, (rows+2)*(inner+3)*2)
	layouts := []struct {
		name string
		o    operand
	}{
		{"rows-contiguous", operand{data, 1, rows + 2}},
		{"p-contiguous", operand{data, inner + 3, 1}},
		{"strided", operand{data, 2 * (inner + 3), 2}},
	}
	for _, l := range layouts {
		for _, w := range []int{6, 8, 16, 32} {
			for _, blk := range [][4]int{
				{0, rows, 0, inner}, {0, 32, 0, 256}, {5, 70, 17, 200}, {40, 41, 300, 1},
				{0, 64, 3, 45}, {13, 77, 256, 45}, {0, 31, 0, 130},
			} {
				r0, r1, kb, kl := blk[0], blk[1], blk[2], blk[3]
				name := fmt.Sprintf("%s/w=%d/rows=%d-%d/p=%d+%d", l.name, w, r0, r1, kb, kl)
				want := packWant(l.o, r0, r1, kb, kl, w)
				got := make([]float32, len(want)+w)
				for i := range got {
					got[i] = -7
				}
				pack(got, l.o, r0, r1, kb, kl, w)
				for i, v := range want {
					if got[i] != v {
						t.Fatalf("%s: dst[%d] = %v, want %v", name, i, got[i], v)
					}
				}
				for i := len(want); i < len(got); i++ {
					if got[i] != -7 {
						t.Fatalf("%s: dst[%d] = %v past the panels, want it untouched", name, i, got[i])
					}
				}
			}
		}
	}
}

// BenchmarkPack packs an operand [n×k] whose rows are p-contiguous into
// panels of 32 columns over the whole inner dimension, as packBJob does
// once per forward product for its weight W (the sizes of the n 128
// family, d 128 and FFN 512, and of the d 256 specs) and once per aft_full
// layer for Xᵀ (k = batch·2d: aft_full at n 128 and long512_aft_full).
func BenchmarkPack(b *testing.B) {
	const w = 32
	for _, sh := range [][2]int{{128, 128}, {512, 128}, {128, 512}, {256, 256}, {1024, 256}, {256, 1024}, {128, 4096}, {512, 4096}} {
		n, k := sh[0], sh[1]
		b.Run(fmt.Sprintf("n=%d/k=%d", n, k), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			o := operand{randSlice(r, n*k), k, 1}
			dst := Alloc(n * k)
			for b.Loop() {
				for j0 := 0; j0 < n; j0 += w {
					pack(dst[j0*k:][:k*w], o, j0, j0+w, 0, k, w)
				}
			}
			b.ReportMetric(float64(n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gfloat/s")
		})
	}
}
