package train

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// weights copies every parameter of tr's model, and its optimizer moments.
func weights(tr *Trainer) [][]float32 {
	var w [][]float32
	for i, p := range tr.Model.Params {
		w = append(w, slices.Clone(p.Data))
		if tr.Opt.M[i] != nil {
			w = append(w, slices.Clone(tr.Opt.M[i]), slices.Clone(tr.Opt.V[i]))
		}
	}
	return w
}

func sameWeights(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool { return slices.Equal(x, y) })
}

// TestInterruptMidStep: an interrupt at any of the checks between layers
// of a step's forward and backward passes abandons the step with
// ErrInterrupted, leaving the weights, the optimizer state and Step those
// of the step before; the step run again then gives the weights of an
// uninterrupted run bit for bit. An interrupt during an evaluation stops
// it with ctx's error.
func TestInterruptMidStep(t *testing.T) {
	ref := newTrainer(t, tinyConfig(4), 1)
	runSteps(t, ref, 3)
	want := weights(ref)

	// small has 2 layers: the forward checks before each layer and the
	// logits (3), the backward at its start and before each layer (3).
	const checks = 6
	for k := 1; k <= checks; k++ {
		tr := newTrainer(t, tinyConfig(4), 1)
		runSteps(t, tr, 2)
		before := weights(tr)
		calls := 0
		tr.WS.SetInterrupt(func() bool { calls++; return calls >= k })
		err := tr.TrainStep()
		if !errors.Is(err, ErrInterrupted) {
			t.Fatalf("interrupt at check %d: TrainStep error %v, want ErrInterrupted", k, err)
		}
		if calls != k {
			t.Errorf("interrupt at check %d: the pass went on to check %d", k, calls)
		}
		if tr.Step != 2 || !sameWeights(weights(tr), before) || tr.Opt.Steps != 2 {
			t.Errorf("interrupt at check %d: step %d, optimizer updates %d, weights changed %v", k, tr.Step, tr.Opt.Steps, !sameWeights(weights(tr), before))
		}
		tr.WS.SetInterrupt(nil)
		runSteps(t, tr, 3)
		if !sameWeights(weights(tr), want) {
			t.Errorf("interrupt at check %d: the step run again differs from an uninterrupted run's", k)
		}
	}

	// The checks a step makes: the count above covers them all.
	tr := newTrainer(t, tinyConfig(4), 1)
	calls := 0
	tr.WS.SetInterrupt(func() bool { calls++; return false })
	runSteps(t, tr, 1)
	if calls != checks {
		t.Errorf("a step checks the interrupt %d times, the test assumes %d", calls, checks)
	}

	ctx, cancel := context.WithCancel(context.Background())
	tr.WS.SetInterrupt(func() bool { cancel(); return ctx.Err() != nil })
	if _, err := tr.EvaluateContext(ctx, text(t).Val, 4); !errors.Is(err, context.Canceled) {
		t.Errorf("evaluation interrupted: error %v, want context.Canceled", err)
	}
}
