package train

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	_ "github.com/synthgen/synthgen/generated/odd"
	_ "github.com/synthgen/synthgen/generated/random"
	_ "github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// specTrainer is a trainer of spec name; plain clears every CausalTri mark
// first, so its optimizer updates R's masked triangle as any other
// elements (the path before the marks).
func specTrainer(t *testing.T, name string, plain bool, workers int) *Trainer {
	t.Helper()
	k, err := kernels.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(k.Spec, k, 3)
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, p := range m.Params {
		if p.CausalTri {
			marked++
		}
		if plain {
			p.CausalTri = false
		}
	}
	if marked == 0 {
		t.Fatalf("%s: no parameter is marked CausalTri", name)
	}
	m.SetWorkers(workers)
	cfg := tinyConfig(20)
	cfg.LR = 1e-2 // large steps: a wrong decay or moment shows in the bits
	tr, err := New(m, text(t).Train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// sameBits fails unless a and b hold bit-identical weights, moments,
// update counts and last gradient norms.
func sameBits(t *testing.T, what string, a, b *Trainer) {
	t.Helper()
	if math.Float64bits(a.GradNorm) != math.Float64bits(b.GradNorm) || a.Opt.Steps != b.Opt.Steps {
		t.Fatalf("%s: gradient norm %.17g (update %d), plain path's %.17g (update %d)", what, a.GradNorm, a.Opt.Steps, b.GradNorm, b.Opt.Steps)
	}
	for i, p := range a.Model.Params {
		q := b.Model.Params[i]
		for _, s := range []struct {
			name string
			x, y []float32
		}{{"weight", p.Data, q.Data}, {"m", a.Opt.M[i], b.Opt.M[i]}, {"v", a.Opt.V[i], b.Opt.V[i]}} {
			for j := range s.x {
				if math.Float32bits(s.x[j]) != math.Float32bits(s.y[j]) {
					t.Fatalf("%s: %s of %s[%d] = %g, plain path's %g", what, s.name, p.Name, j, s.x[j], s.y[j])
				}
			}
		}
	}
}

// deadMoments writes moments ≠ 0 on the masked triangle of every
// CausalTri parameter of a (and the same on b's parameter of that index),
// as a state file could hold them.
func deadMoments(a, b *Trainer) {
	for i, p := range a.Model.Params {
		if !p.CausalTri {
			continue
		}
		n := p.Shape[len(p.Shape)-1]
		for j := range p.Data {
			if r, c := j/n%n, j%n; c > r {
				x := float32(1e-3 * math.Sin(float64(j)))
				a.Opt.M[i][j], b.Opt.M[i][j] = x, x
				a.Opt.V[i][j], b.Opt.V[i][j] = x*x+1e-7, x*x+1e-7
			}
		}
	}
}

// TestCausalTriBitIdentical: training a causal random spec and mixtures
// with random (odd: every logit source) for 5 steps with R's masked
// triangle only decayed and skipped by the norm gives the plain path's
// weights, moments and gradient norms bit for bit, on 2 workers against
// 1. Then moments ≠ 0 on that triangle (written by hand, and loaded from
// a saved state) are honoured: the next steps again match the plain path.
func TestCausalTriBitIdentical(t *testing.T) {
	for _, name := range []string{"small", "random", "odd"} {
		t.Run(name, func(t *testing.T) {
			a, b := specTrainer(t, name, false, 2), specTrainer(t, name, true, 1)
			for s := range 5 {
				runSteps(t, a, s+1)
				runSteps(t, b, s+1)
				sameBits(t, fmt.Sprint("step ", s+1), a, b)
			}
			// Dead moments written by hand, announced.
			deadMoments(a, b)
			a.Opt.MomentsChanged()
			runSteps(t, a, 7)
			runSteps(t, b, 7)
			sameBits(t, "after moments written on the masked triangle", a, b)

			// The same state through a file, into a fresh trainer.
			deadMoments(a, b)
			path := filepath.Join(t.TempDir(), "ck.safetensors")
			if err := a.Save(path, nil); err != nil {
				t.Fatal(err)
			}
			c := specTrainer(t, name, false, 2)
			for i, p := range c.Model.Params {
				copy(p.Data, a.Model.Params[i].Data)
			}
			runSteps(t, c, 1) // c's optimizer has checked its own (zero) moments
			for i, p := range c.Model.Params {
				copy(p.Data, a.Model.Params[i].Data)
			}
			if _, err := c.LoadState(path, a.Step); err != nil {
				t.Fatal(err)
			}
			runSteps(t, c, 10)
			runSteps(t, b, 10)
			sameBits(t, "resumed from a state with moments on the masked triangle", c, b)
		})
	}
}
