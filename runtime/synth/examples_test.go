package synth_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// exampleDir is a temporary folder for an example's files.
func exampleDir() (string, func()) {
	dir, err := os.MkdirTemp("", "synth-example")
	if err != nil {
		log.Fatal(err)
	}
	return dir, func() { os.RemoveAll(dir) }
}

// Train a new model of spec small for 20 steps on the default text.
func ExampleTrain() {
	dir, done := exampleDir()
	defer done()
	sum, err := synth.Train(context.Background(), small.Spec,
		synth.Steps(20), synth.Batch(4), synth.EvalEvery(10), synth.EvalWindows(8),
		synth.Out(filepath.Join(dir, "small.safetensors")))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("trained steps %d→%d of %d into %s\n", sum.Start, sum.Step, sum.Steps, filepath.Base(sum.Out))
	fmt.Println("training loss below a uniform guess's ln 256:", sum.Loss < math.Log(256))
	fmt.Println("held-out loss below it too:", sum.ValLoss < math.Log(256))
	// Output:
	// trained steps 0→20 of 20 into small.safetensors
	// training loss below a uniform guess's ln 256: true
	// held-out loss below it too: true
}

// Stop a run at step 10 and resume it: the weights are exactly those of
// an uninterrupted run.
func ExampleResume() {
	dir, done := exampleDir()
	defer done()
	ctx := context.Background()
	opts := []synth.Option{synth.Steps(20), synth.Batch(4), synth.EvalEvery(0)}
	whole := filepath.Join(dir, "whole.safetensors")
	if _, err := synth.Train(ctx, small.Spec, append(opts, synth.Out(whole))...); err != nil {
		log.Fatal(err)
	}
	parts := filepath.Join(dir, "parts.safetensors")
	sum, err := synth.Train(ctx, small.Spec, append(opts, synth.Out(parts), synth.StopAt(10))...)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stopped at step %d of %d\n", sum.Step, sum.Steps)
	sum, err = synth.Resume(ctx, parts) // the saved run's settings, to its 20 steps
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("resumed steps %d→%d\n", sum.Start, sum.Step)
	a, _ := os.ReadFile(whole)
	b, _ := os.ReadFile(parts)
	fmt.Println("the same checkpoint bytes as one run:", bytes.Equal(a, b))
	// Output:
	// stopped at step 10 of 20
	// resumed steps 10→20
	// the same checkpoint bytes as one run: true
}

// Load a checkpoint and continue a prompt; the same seed gives the same
// text.
func ExampleModel_Sample() {
	dir, done := exampleDir()
	defer done()
	ctx := context.Background()
	ck := filepath.Join(dir, "small.safetensors")
	if _, err := synth.Train(ctx, small.Spec, synth.Steps(10), synth.Batch(4), synth.EvalEvery(0), synth.Out(ck)); err != nil {
		log.Fatal(err)
	}
	m, err := synth.Load(ctx, ck)
	if err != nil {
		log.Fatal(err)
	}
	opts := synth.SampleOptions{Len: 40, Temp: 0.8, TopK: 20, Seed: 1}
	a, err := m.Sample(ctx, []byte("The light "), opts)
	if err != nil {
		log.Fatal(err)
	}
	b, _ := m.Sample(ctx, []byte("The light "), opts)
	fmt.Printf("spec %s at step %d: %d bytes, the same for the same seed: %v\n", m.Spec().Name, m.Step(), len(a), bytes.Equal(a, b))
	// Output:
	// spec small at step 10: 40 bytes, the same for the same seed: true
}

// Prepare a run, read its plan, then train it.
func ExampleNewRun() {
	dir, done := exampleDir()
	defer done()
	ctx := context.Background()
	r, err := synth.NewRun(ctx, small.Spec, synth.Steps(40), synth.StopAt(5), synth.Batch(4), synth.EvalEvery(0),
		synth.Out(filepath.Join(dir, "small.safetensors")))
	if err != nil {
		log.Fatal(err)
	}
	p := r.Plan()
	fmt.Printf("spec %s, %d parameters, steps %d→%d of %d, warm-up %d, lr %g\n",
		p.Spec.Name, p.NumParams, p.Start, p.Stop, p.Config.Steps, p.Config.Warmup, p.Config.LR)
	fmt.Println("writes", filepath.Base(p.Out), filepath.Base(p.OptOut), filepath.Base(p.CSV))
	sum, err := r.Train(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("stopped at step %d: %v\n", sum.Step, sum.Stopped)
	// Output:
	// spec small, 120320 parameters, steps 0→5 of 40, warm-up 2, lr 0.001
	// writes small.safetensors small.opt.safetensors small.csv
	// stopped at step 5: true
}
