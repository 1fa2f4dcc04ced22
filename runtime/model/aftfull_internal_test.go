package model

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestAFTFullProducts checks the factorised aft_full (aftfull.go) against
// its per-row-stabilised kernels, forward and every gradient, on ordinary
// weights and on keys and biases spread so wide that some (i, c) fall back
// to the direct computation; unmasked (enc_aft_full, a classifier, whose
// loss and gradients come through the pooled head) too.
func TestAFTFullProducts(t *testing.T) {
	for _, name := range []string{"odd_aft_full", "aft_full", "enc_aft_full", "odd_enc_aft_full"} {
		for _, scale := range []float64{1, 120} {
			t.Run(fmt.Sprintf("%s/scale=%g", name, scale), func(t *testing.T) {
				k, err := kernels.Lookup(name)
				if err != nil {
					t.Skip(err)
				}
				var models [2]*Model
				for i := range models {
					m, err := New(k.Spec, k, 1)
					if err != nil {
						t.Fatal(err)
					}
					m.aftKernels = i == 1
					rng := rand.New(rand.NewPCG(3, 5))
					for _, p := range m.Params {
						s := 0.05
						switch {
						case strings.HasSuffix(p.Name, ".attn.k.weight"):
							s *= scale
						case strings.HasSuffix(p.Name, ".attn.w"):
							s = 0.5 * scale
						}
						for j := range p.Data {
							p.Data[j] += float32(s * rng.NormFloat64())
						}
					}
					models[i] = m
				}
				const batch = 3
				tt := min(k.Spec.N, 40)
				if k.Spec.Bidirectional {
					tt = min(k.Spec.N, 101) // two row blocks of full rows
				}
				rng := rand.New(rand.NewPCG(9, 9))
				in, tg := make([]int32, batch*tt), make([]int32, batch*tt)
				for i := range in {
					in[i], tg[i] = int32(rng.IntN(256)), int32(rng.IntN(256))
				}
				labels := make([]int32, batch)
				for b := range labels {
					labels[b] = int32(rng.IntN(max(k.Spec.Classes, 1)))
				}
				var loss [2]float64
				var ws [2]*Workspace
				for i, m := range models {
					ws[i] = m.NewWorkspace(batch)
					if m.classes > 0 { // a bidirectional spec: the classifier, labelled by tg
						loss[i] = m.ForwardClassify(ws[i], in, labels, batch)
					} else {
						loss[i] = m.Forward(ws[i], in, tg, batch)
					}
					m.Backward(ws[i])
				}
				if math.Abs(loss[0]-loss[1]) > 1e-5*math.Abs(loss[1]) {
					t.Errorf("loss %.8f, kernels %.8f", loss[0], loss[1])
				}
				direct := 0
				for l := range models[0].layers {
					lw := &ws[0].lay[l]
					nx := batch * 2 * models[0].d
					for i := 0; i < tt; i++ {
						for s := 0; s < batch; s++ {
							for _, den := range lw.nd[i*nx+s*nx/batch+nx/batch/2 : i*nx+(s+1)*nx/batch] {
								if den < aftTiny {
									direct++
								}
							}
						}
					}
				}
				if scale > 1 && direct == 0 {
					t.Fatalf("no (i, c) took the direct path: the test does not reach it")
				}
				t.Logf("%d (i, c) computed directly", direct)
				for pi, p := range models[0].Params {
					q := models[1].Params[pi]
					mag := 0.0
					for _, g := range q.Grad {
						mag = math.Max(mag, math.Abs(float64(g)))
					}
					for j, g := range p.Grad {
						if d := math.Abs(float64(g) - float64(q.Grad[j])); d > 2e-3*mag+1e-7 {
							t.Errorf("%s[%d]: gradient %g, kernels %g (largest %g)", p.Name, j, g, q.Grad[j], mag)
							break
						}
					}
				}
			})
		}
	}
}

// TestAFTFullBF16 runs the factorised aft_full with a bf16 kernel (every
// level this CPU has) beside float32: its forward product [num | den] is
// checked against the float64 product of its own Ew and X rounded to bf16
// (the float32-sum bound) and shown to be rounded (farther from the
// unrounded product than float32 sums go); every (i, c) whose bf16
// denominator is below aftTiny (0 included) takes the direct path, bit
// for bit, the others num/den; the loss and every gradient are within a
// bf16-sized tolerance of float32's; a step allocates nothing once
// warmed up; and the bf16 results are bit-identical with 1, 2 and 3
// workers. Keys and biases are spread (scale
// 120) so that some (i, c) fall back to the direct computation.
func TestAFTFullBF16(t *testing.T) {
	var levels []*bf16.Kernel
	for _, l := range []bf16.Level{bf16.Go, bf16.AVX512BF16, bf16.AMX} {
		kn, err := bf16.New(l)
		if errors.Is(err, bf16.ErrNoFeature) {
			t.Logf("bf16 level %s not tested: %v", l, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		levels = append(levels, kn)
	}
	names := []string{"odd_aft_full", "aft_full", "enc_aft_full", "odd_enc_aft_full"}
	if testing.Short() { // the odd sizes only, every level (the race detector's pass in CI runs -short)
		names = []string{"odd_aft_full", "odd_enc_aft_full"}
	}
	for _, name := range names {
		for _, scale := range []float64{1, 120} {
			for _, kn := range levels {
				t.Run(fmt.Sprintf("%s/scale=%g/%s", name, scale, kn.Level), func(t *testing.T) {
					testAFTFullBF16(t, name, scale, kn)
				})
			}
		}
	}
}

func testAFTFullBF16(t *testing.T, name string, scale float64, kn *bf16.Kernel) {
	k, err := kernels.Lookup(name)
	if err != nil {
		t.Skip(err)
	}
	const batch = 3
	tt := min(k.Spec.N, 128) // two row blocks where n allows
	if k.Spec.Bidirectional {
		tt = min(k.Spec.N, 101)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	in, tg := make([]int32, batch*tt), make([]int32, batch*tt)
	for i := range in {
		in[i], tg[i] = int32(rng.IntN(256)), int32(rng.IntN(256))
	}
	labels := make([]int32, batch)
	for b := range labels {
		labels[b] = int32(rng.IntN(max(k.Spec.Classes, 1)))
	}
	newModel := func(bf bool) *Model {
		m, err := New(k.Spec, k, 1)
		if err != nil {
			t.Fatal(err)
		}
		if bf {
			m.SetBF16(kn)
		}
		rng := rand.New(rand.NewPCG(3, 5))
		for _, p := range m.Params {
			s := 0.05
			switch {
			case strings.HasSuffix(p.Name, ".attn.k.weight"):
				s *= scale
			case strings.HasSuffix(p.Name, ".attn.w"):
				s = 0.5 * scale
			}
			for j := range p.Data {
				p.Data[j] += float32(s * rng.NormFloat64())
			}
		}
		return m
	}
	step := func(m *Model, ws *Workspace) float64 {
		var loss float64
		if m.classes > 0 {
			loss = m.ForwardClassify(ws, in, labels, batch)
		} else {
			loss = m.Forward(ws, in, tg, batch)
		}
		m.Backward(ws)
		return loss
	}
	f32, bf := newModel(false), newModel(true)
	wsF, wsB := f32.NewWorkspace(batch), bf.NewWorkspace(batch)
	lossF := step(f32, wsF)
	lossB := step(bf, wsB)

	// The forward product and the fallback, layer by layer, on the bf16
	// model's own operands.
	d := bf.d
	nx := batch * 2 * d
	direct, maxRel := 0, 0.0
	for l := range bf.layers {
		lw := &wsB.lay[l]
		for i := 0; i < tt; i++ {
			i0, _, bw, off := aftBlockOf(i/aftBlock, tt, bf.Spec.Bidirectional)
			ew := lw.ew[off+(i-i0)*bw:]
			nk := bf.aftKeys(i, tt)
			for col := 0; col < nx; col++ {
				var s, abs, exact, eabs float64
				for j := 0; j < nk; j++ {
					e, x := ew[j], lw.x[j*nx+col]
					v := float64(bf16.Round(e)) * float64(bf16.Round(x))
					s += v
					abs += math.Abs(v)
					v = float64(e) * float64(x)
					exact += v
					eabs += math.Abs(v)
				}
				got := float64(lw.nd[i*nx+col])
				// Float32 sums (the bound of TestLinearBF16), and sums below
				// float32's normal range flushed to 0.
				if diff := math.Abs(got - s); !(diff <= 2*float64(nk+2)*0x1p-24*abs+float64(nk)*0x1p-126) {
					t.Fatalf("layer %d: [num | den][%d, %d] = %v, float64 product of the bf16-rounded Ew and X %v", l, i, col, got, s)
				}
				if eabs > 0x1p-100 { // not near float32's underflow
					maxRel = max(maxRel, math.Abs(got-exact)/eabs)
				}
			}
			for s := 0; s < batch; s++ {
				nd := lw.nd[i*nx+s*2*d : i*nx+(s+1)*2*d]
				z := lw.z[(s*tt+i)*d:]
				for c := 0; c < d; c++ {
					want := nd[c] / nd[d+c]
					if nd[d+c] < aftTiny {
						want = bf.aftExact(wsB, l, s, i, c, 0)
						direct++
					}
					if math.Float32bits(z[c]) != math.Float32bits(want) {
						t.Fatalf("layer %d, sequence %d: Z[%d, %d] = %v, want %v (den %g)", l, s, i, c, z[c], want, nd[d+c])
					}
				}
			}
		}
	}
	if maxRel < 1e-5 {
		t.Errorf("[num | den]: largest error %g relative to Σ|terms|: Ew and X were not rounded to bf16", maxRel)
	}
	if scale > 1 && direct == 0 {
		t.Fatalf("no (i, c) took the direct path: the test does not reach it")
	}
	t.Logf("%d (i, c) computed directly; [num | den] largest error %.3g of Σ|terms|", direct, maxRel)

	// Loss and gradients beside float32's (scale 1: at 120 the keys' bf16
	// rounding in the linear layers moves the peaked weights by far more
	// than bf16's 2⁻⁸). A gradient is held to 2⁻⁵ of its tensor's largest
	// (at least 2⁻¹⁰ of the model's largest); the keys' bias, whose gradient
	// is 0 in exact arithmetic (a channel's keys shifted together cancel in
	// num / den) and only rounding in float32 (1e−10) or bf16, to 2⁻¹² of
	// the model's largest.
	if scale > 1 {
		for _, p := range bf.Params {
			for j, g := range p.Grad {
				if math.IsNaN(float64(g)) || math.IsInf(float64(g), 0) {
					t.Fatalf("%s[%d]: bf16 gradient %v", p.Name, j, g)
				}
			}
		}
	} else {
		if math.Abs(lossF-lossB) > 0x1p-7*math.Abs(lossF) {
			t.Errorf("loss: bf16 %.6f, float32 %.6f", lossB, lossF)
		}
		global := 0.0
		for _, q := range f32.Params {
			for _, g := range q.Grad {
				global = math.Max(global, math.Abs(float64(g)))
			}
		}
		worst, worstName := 0.0, ""
		for pi, p := range bf.Params {
			q := f32.Params[pi]
			mag := 0x1p-10 * global
			for _, g := range q.Grad {
				mag = math.Max(mag, math.Abs(float64(g)))
			}
			if strings.HasSuffix(p.Name, ".attn.k.bias") {
				for j, g := range p.Grad {
					if !(math.Abs(float64(g)) <= 0x1p-12*global) {
						t.Errorf("%s[%d]: bf16 gradient %g, float32 %g: want 0 (within %g)", p.Name, j, g, q.Grad[j], 0x1p-12*global)
						break
					}
				}
				continue
			}
			for j, g := range p.Grad {
				diff := math.Abs(float64(g) - float64(q.Grad[j]))
				if !(diff <= 0x1p-5*mag) {
					t.Errorf("%s[%d]: bf16 gradient %g, float32 %g (largest %g)", p.Name, j, g, q.Grad[j], mag)
					break
				}
				if diff/mag > worst {
					worst, worstName = diff/mag, p.Name
				}
			}
		}
		t.Logf("loss bf16 %.6f, float32 %.6f; gradients within %.3g of their tensor's largest (%s)", lossB, lossF, worst, worstName)
	}

	// A step allocates nothing once the engine's bf16 buffers exist.
	if allocs := testing.AllocsPerRun(2, func() { step(bf, wsB) }); allocs != 0 {
		t.Errorf("bf16 Forward+Backward allocate %v times per step", allocs)
	}

	// Bit-identical for 1, 2 and 3 workers.
	for _, p := range bf.Params {
		clear(p.Grad)
	}
	if loss := step(bf, wsB); math.Float64bits(loss) != math.Float64bits(lossB) {
		t.Fatalf("loss %v again, %v the first time", loss, lossB)
	}
	grads := make([][]float32, len(bf.Params))
	for pi, p := range bf.Params {
		grads[pi] = slices.Clone(p.Grad)
	}
	for _, w := range []int{2, 3} {
		bf.SetWorkers(w)
		for _, p := range bf.Params {
			clear(p.Grad)
		}
		if loss := step(bf, wsB); math.Float64bits(loss) != math.Float64bits(lossB) {
			t.Fatalf("%d workers: loss %v, 1 worker %v", w, loss, lossB)
		}
		for pi, p := range bf.Params {
			if !slices.Equal(p.Grad, grads[pi]) {
				t.Fatalf("%d workers: %s's gradient differs from 1 worker's", w, p.Name)
			}
		}
	}
}

// TestMissingKernelNamed: a kernel set without a kernel the spec needs (a
// package generated before the kind existed) is an error from New that
// names the kernel and says how to get it.
func TestMissingKernelNamed(t *testing.T) {
	k, err := kernels.Lookup("aft_full")
	if err != nil {
		t.Skip(err)
	}
	old := *k
	old.AFTMax, old.AFTQuot = nil, nil
	_, err = New(old.Spec, &old, 1)
	if err == nil {
		t.Fatal("New accepted a kernel set without AFTMax and AFTQuot")
	}
	for _, want := range []string{"AFTMax", "AFTQuot", "go generate"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
