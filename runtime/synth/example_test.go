package synth_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// Train a model of a generated package's spec, stop with Ctrl-C (the run
// saves), resume, evaluate on the held-out text and sample.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	_, err := synth.Train(ctx, small.Spec, synth.Steps(200), synth.Out("small.safetensors"), synth.Log(os.Stdout, 50))
	if errors.Is(err, context.Canceled) {
		return // saved: synth.Resume(ctx, "small.safetensors") continues it
	}
	if err != nil {
		log.Fatal(err)
	}
	if _, err := synth.Resume(ctx, "small.safetensors", synth.Steps(400)); err != nil {
		log.Fatal(err)
	}

	m, err := synth.Load(ctx, "small.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	text, err := synth.DefaultText()
	if err != nil {
		log.Fatal(err)
	}
	val, err := synth.HeldOut(text, m.Spec())
	if err != nil {
		log.Fatal(err)
	}
	res, err := m.Evaluate(ctx, val, synth.EvalOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("step %d: %.3f bits per byte\n", m.Step(), res.BPB())
	out, err := m.Sample(ctx, []byte("The light "), synth.SampleOptions{Len: 100, Temp: 0.8, Seed: 1})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("The light %s\n", out)
}
