package model

import (
	"math"
	"testing"
)

func TestExp32(t *testing.T) {
	worst := 0.0
	for x := float32(-87); x <= 88; x += 0.001 {
		got := float64(exp32(x))
		want := math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Fatalf("exp32: worst relative error %.3g > 3e-7", worst)
	}
	if exp32(-100) != 0 || math.IsInf(float64(exp32(100)), 0) || math.IsNaN(float64(exp32(100))) {
		t.Fatalf("exp32 out of range: %v %v", exp32(-100), exp32(100))
	}
}

func BenchmarkGelu(b *testing.B) {
	x := make([]float32, 4096)
	y := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i-2048) / 500
	}
	j := ewJob{op: ewGelu, a: x, b: y, n: len(x)}
	for b.Loop() {
		j.Run(0, 0)
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*len(x)), "ns/elem")
}

func TestTanhRational(t *testing.T) {
	worst := 0.0
	for x := float32(-12); x <= 12; x += 0.0007 {
		d := math.Abs(float64(tanhRational(x)) - math.Tanh(float64(x)))
		worst = math.Max(worst, d)
	}
	if worst > 4e-7 {
		t.Fatalf("tanhRational: worst absolute error %.3g > 4e-7", worst)
	}
	t.Logf("worst %g", worst)
}

func BenchmarkGelu4(b *testing.B) {
	x := make([]float32, 4096)
	y := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i-2048) / 500
	}
	for b.Loop() {
		geluForward(x, y)
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N*len(x)), "ns/elem")
}

func TestGelu(t *testing.T) {
	var x []float32
	for v := float32(-12); v <= 12; v += 0.0137 {
		x = append(x, v)
	}
	y := make([]float32, len(x))
	dy := append([]float32(nil), x...)
	geluForward(dy, y)
	for i, v := range x {
		xv := float64(v)
		th := math.Tanh(geluC * (xv + 0.044715*xv*xv*xv))
		want := 0.5 * xv * (1 + th)
		wantD := 0.5*(1+th) + 0.5*xv*(1-th*th)*geluC*(1+3*0.044715*xv*xv)
		if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(xv)) {
			t.Fatalf("gelu(%g) = %g, want %g", v, y[i], want)
		}
		if math.Abs(float64(dy[i])-wantD) > 2e-6*(1+xv*xv) {
			t.Fatalf("gelu'(%g) = %g, want %g", v, dy[i], wantD)
		}
		if i%4 == 3 { // the 4-wide and scalar paths agree bit for bit
			one, d1 := []float32{0}, []float32{v}
			geluForward(d1, one)
			if one[0] != y[i] || d1[0] != dy[i] {
				t.Fatalf("gelu(%g): 4-wide %g %g, scalar %g %g", v, y[i], dy[i], one[0], d1[0])
			}
		}
	}
}
