package optim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// withVec runs f with the AVX kernels switched on or off, and restores the
// switch.
func withVec(t *testing.T, on bool, f func()) {
	t.Helper()
	old := vecAVX
	vecAVX = on
	defer func() { vecAVX = old }()
	f()
}

// vecValues are n floats of a gradient's kind: normals of magnitudes 1e-8
// to 1e3, with zeros, subnormals, the largest float, ±Inf and NaN mixed in
// when special is set.
func vecValues(r *rand.Rand, n int, special bool) []float32 {
	x := make([]float32, n)
	sp := []float32{0, float32(math.Copysign(0, -1)), 1e-40, -1e-45, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1.17549435e-38}
	for i := range x {
		x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-8)))
		if special && r.IntN(8) == 0 {
			x[i] = sp[r.IntN(len(sp))]
		}
	}
	return x
}

// sameF64 compares float64s bit for bit, any NaN equal to any NaN.
func sameF64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
}

// TestSumSquaresKernel checks addSquares with the AVX kernel against the
// Go loop and against a plain per-lane sum, bit for bit: every length to
// 70 and a few long ones, every starting lane, sums that start nonzero,
// with and without infinities and NaNs.
func TestSumSquaresKernel(t *testing.T) {
	if !vecAVX {
		t.Skip("no AVX kernel in this build or on this CPU (or SYNTHGEN_ISA caps it)")
	}
	r := rand.New(rand.NewPCG(1, 2))
	lengths := []int{4099, 16384, 16387}
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for first := 0; first < 4; first++ {
			for _, special := range []bool{false, true} {
				g := vecValues(r, n, special)
				far := append(g[:n:n], vecValues(r, 2048, false)...) // what follows g, read ahead
				start := [4]float64{r.Float64(), 0, -r.Float64(), 1e-3}
				want := start
				for k, x := range g { // the definition: element k to lane (first+k) mod 4, in order
					want[(first+k)&3] += float64(x) * float64(x)
				}
				goAcc, vecAcc := start, start
				withVec(t, false, func() { addSquares(g, far, first, &goAcc) })
				withVec(t, true, func() { addSquares(g, far, first, &vecAcc) })
				for l := range 4 {
					if !sameF64(goAcc[l], want[l]) || !sameF64(vecAcc[l], want[l]) {
						t.Fatalf("n %d, first lane %d, special %t: lane %d: Go %v, AVX %v, want %v",
							n, first, special, l, goAcc[l], vecAcc[l], want[l])
					}
				}
			}
		}
	}
}

// TestScaleKernel checks decayOnly's float32 path with the AVX kernel
// against the Go loop, bit for bit, at every length to 70 and long ones,
// on weights of every kind.
func TestScaleKernel(t *testing.T) {
	if !vecAVX {
		t.Skip("no AVX kernel in this build or on this CPU (or SYNTHGEN_ISA caps it)")
	}
	r := rand.New(rand.NewPCG(3, 4))
	o := &AdamW{Kernel: func(int, []float32, []float32, []float32, []float32, float32, float32, float32, float32, float32, float32, float32, float32, float32) {
		t.Fatal("decayOnly ran the update")
	}}
	j := &stepJob{o: o}
	lengths := []int{4099, 16384, 16391}
	for n := 0; n <= 70; n++ {
		lengths = append(lengths, n)
	}
	for _, n := range lengths {
		for _, decay := range []float64{1 - 1e-4, 0.9, 1} {
			p := vecValues(r, n, true)
			want := make([]float32, n)
			for i, x := range p {
				want[i] = x * float32(decay)
			}
			withVec(t, true, func() { j.decayOnly(decay, p) })
			for i := range p {
				if math.Float32bits(p[i]) != math.Float32bits(want[i]) && !(p[i] != p[i] && want[i] != want[i]) {
					t.Fatalf("n %d, decay %g: p[%d] = %v, want %v", n, decay, i, p[i], want[i])
				}
			}
		}
	}
}
