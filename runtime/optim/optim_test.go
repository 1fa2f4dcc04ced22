package optim

import (
	"math"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/parallel"
)

func approx(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

// TestAdamWHand checks two AdamW steps against the PyTorch formulas
// written out by hand.
func TestAdamWHand(t *testing.T) {
	w := &model.Param{Name: "w", Shape: []int{2}, Data: []float32{0.5, -1.5}, Grad: []float32{0.2, -0.4}, Decay: true}
	b := &model.Param{Name: "b", Shape: []int{1}, Data: []float32{0.25}, Grad: []float32{3}}
	r := &model.Param{Name: "R", Shape: []int{1}, Data: []float32{7}, Frozen: true}
	cfg := Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}
	o := NewAdamW([]*model.Param{w, b, r}, cfg)
	if o.M[2] != nil {
		t.Fatal("frozen parameter got moments")
	}
	const lr, scale = 0.01, 0.5

	// Step 1 by hand: g = 0.5·grad; m = 0.1 g; v = 0.05 g²; m̂ = g, v̂ = g²;
	// p ← p·(1 − lr·wd) − lr·g/(|g| + eps).
	type st struct{ p, m, v float64 }
	hand := func(p0, g, m0, v0 float64, k int, decay bool) st {
		if decay {
			p0 *= 1 - lr*0.1
		}
		m := 0.9*m0 + 0.1*g
		v := 0.95*v0 + 0.05*g*g
		mh := m / (1 - math.Pow(0.9, float64(k)))
		vh := v / (1 - math.Pow(0.95, float64(k)))
		return st{p0 - lr*mh/(math.Sqrt(vh)+1e-8), m, v}
	}
	w0 := hand(0.5, 0.1, 0, 0, 1, true)
	w1 := hand(-1.5, -0.2, 0, 0, 1, true)
	b0 := hand(0.25, 1.5, 0, 0, 1, false)
	o.Step(lr, scale)
	check := func(name string, got float32, want float64) {
		t.Helper()
		if !approx(float64(got), want, 1e-6) {
			t.Errorf("%s = %.9g, want %.9g", name, got, want)
		}
	}
	check("w[0]", w.Data[0], w0.p)
	check("w[1]", w.Data[1], w1.p)
	check("b[0]", b.Data[0], b0.p)
	check("m w[1]", o.M[0][1], w1.m)
	check("v b[0]", o.V[1][0], b0.v)
	// By construction step 1 moves each element by ≈ lr (Adam's sign-like first step).
	check("w[0] step", w.Data[0], 0.5*(1-lr*0.1)-lr)
	if r.Data[0] != 7 {
		t.Errorf("frozen parameter changed to %v", r.Data[0])
	}

	// Step 2 with new gradients, no clipping.
	w.Grad[0], w.Grad[1], b.Grad[0] = -0.3, 0.1, 0.5
	w0b := hand(float64(w.Data[0]), -0.3, float64(o.M[0][0]), float64(o.V[0][0]), 2, true)
	b0b := hand(float64(b.Data[0]), 0.5, float64(o.M[1][0]), float64(o.V[1][0]), 2, false)
	o.Step(lr, 1)
	check("step 2 w[0]", w.Data[0], w0b.p)
	check("step 2 b[0]", b.Data[0], b0b.p)
	if o.Steps != 2 {
		t.Errorf("Steps = %d", o.Steps)
	}
}

func TestClip(t *testing.T) {
	ps := []*model.Param{
		{Data: make([]float32, 2), Grad: []float32{3, 0}},
		{Data: make([]float32, 1), Frozen: true},
		{Data: make([]float32, 1), Grad: []float32{4}},
	}
	if n := GradNorm(ps); n != 5 {
		t.Fatalf("norm %v, want 5", n)
	}
	if c := ClipScale(5, 1); !approx(c, 1/(5+1e-6), 1e-15) {
		t.Fatalf("clip scale %v", c)
	}
	if c := ClipScale(0.5, 1); c != 1 {
		t.Fatalf("norm below the bound scaled by %v", c)
	}
	if c := ClipScale(50, 0); c != 1 {
		t.Fatalf("clipping off scaled by %v", c)
	}
}

func TestSchedule(t *testing.T) {
	if w := DefaultWarmup(1000); w != 50 {
		t.Errorf("warm-up of 1000 steps = %d, want 50 (5%%)", w)
	}
	if w := DefaultWarmup(10000); w != 100 {
		t.Errorf("warm-up of 10000 steps = %d, want 100", w)
	}
	if w := DefaultWarmup(10); w != 0 {
		t.Errorf("warm-up of 10 steps = %d, want 0", w)
	}
	s := Schedule{Peak: 1e-3, MinFrac: 0.1, Warmup: 10, Total: 111}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step int
		want float64
	}{
		{0, 1e-4},     // first warm-up step: peak/warmup
		{4, 5e-4},     // linear
		{9, 1e-3},     // last warm-up step reaches the peak
		{10, 1e-3},    // cosine starts at the peak
		{60, 0.55e-3}, // halfway: (peak+min)/2
		{110, 1e-4},   // last step: 10% of the peak
		{500, 1e-4},   // past the end: stays at the minimum
	} {
		if got := s.LR(c.step); !approx(got, c.want, 1e-12) {
			t.Errorf("LR(%d) = %g, want %g", c.step, got, c.want)
		}
	}
	// Monotone: up during warm-up, down after.
	for i := 1; i < s.Total; i++ {
		if i < s.Warmup && s.LR(i) <= s.LR(i-1) || i > s.Warmup && s.LR(i) > s.LR(i-1) {
			t.Fatalf("not monotone at step %d", i)
		}
	}
	one := Schedule{Peak: 1e-3, MinFrac: 0.1, Total: 1}
	if got := one.LR(0); got != 1e-3 {
		t.Errorf("single-step run LR = %g", got)
	}
	for _, bad := range []Schedule{{Peak: 0, Total: 1}, {Peak: 1, Total: 0}, {Peak: 1, Total: 5, Warmup: 6}, {Peak: math.NaN(), Total: 1}, {Peak: 1, Total: 1, MinFrac: 2}} {
		if bad.Validate() == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestAdamWWorkers checks that GradNorm and Step give the same bits on 1, 2
// and 3 workers as on the calling goroutine alone, with parameters cut into
// several chunks (one larger than chunkSize), and that GradNorm agrees with
// the free function and with a float64 sum.
func TestAdamWWorkers(t *testing.T) {
	mk := func() []*model.Param {
		var ps []*model.Param
		for i, n := range []int{3, chunkSize + 5, 1, 2*chunkSize + 17} {
			p := &model.Param{Name: "p", Shape: []int{n}, Data: make([]float32, n), Grad: make([]float32, n), Decay: i%2 == 0}
			for j := range p.Data {
				p.Data[j] = float32(math.Sin(float64(i*7919 + j)))
				p.Grad[j] = float32(math.Cos(float64(i*104729+j))) * 0.01
			}
			ps = append(ps, p)
		}
		return ps
	}
	run := func(r Runner) ([]*model.Param, float64) {
		ps := mk()
		o := NewAdamW(ps, DefaultConfig())
		o.Runner = r
		var norm float64
		for range 3 {
			norm = o.GradNorm()
			o.Step(1e-3, ClipScale(norm, 1))
		}
		return ps, norm
	}
	ref, refNorm := run(nil)
	moved := 0
	for i, p := range mk() {
		for j := range p.Data {
			if ref[i].Data[j] != p.Data[j] {
				moved++
			}
		}
	}
	if total := 3 + chunkSize + 5 + 1 + 2*chunkSize + 17; moved != total {
		t.Fatalf("Step moved %d of %d parameters", moved, total)
	}
	want := 0.0
	for _, p := range mk() {
		for _, g := range p.Grad {
			want += float64(g) * float64(g)
		}
	}
	if free := GradNorm(mk()); free != refNorm || !approx(free, math.Sqrt(want), 1e-12) {
		t.Errorf("GradNorm %v, AdamW.GradNorm %v, float64 sum %v", free, refNorm, math.Sqrt(want))
	}
	for _, n := range []int{1, 2, 3} {
		pool := parallel.New(n)
		got, norm := run(pool)
		pool.Close()
		if norm != refNorm {
			t.Errorf("%d workers: norm %v, want %v", n, norm, refNorm)
		}
		for i := range got {
			for j := range got[i].Data {
				if math.Float32bits(got[i].Data[j]) != math.Float32bits(ref[i].Data[j]) {
					t.Fatalf("%d workers: param %d[%d] = %v, want %v", n, i, j, got[i].Data[j], ref[i].Data[j])
				}
			}
		}
	}
}
