// Command example trains, resumes, evaluates, samples and saves a model through synthgen's API.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"

	"example.com/synthmodels/tiny"
	_ "example.com/synthmodels/wide" // linked too; `go test -bench . ./wide` measures it
	"github.com/synthgen/synthgen/runtime/synth"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt) // Ctrl-C saves, resumable
	defer stop()
	_, err := synth.Train(ctx, tiny.Spec, synth.Steps(200), synth.StopAt(100), synth.Batch(8), synth.Out(tiny.Checkpoint), synth.Log(os.Stdout, 50))
	check(err)
	_, err = synth.Resume(ctx, tiny.Checkpoint, synth.Log(os.Stdout, 50)) // steps 101–200: as one run
	check(err)
	m, err := synth.Load(ctx, tiny.Checkpoint)
	check(err)
	val, err := synth.HeldOut("", m.Spec()) // the default text's last 10%
	check(err)
	res, err := m.Evaluate(ctx, val, synth.EvalOptions{Windows: 100})
	check(err)
	out, err := m.Sample(ctx, []byte("The light "), synth.SampleOptions{Len: 80, Temp: 0.8, Seed: 1})
	check(err)
	fmt.Printf("step %d: held-out loss %.4f (%.3f bits per byte)\nThe light %s\n", m.Step(), res.Loss, res.BPB(), out)
	check(m.Save("tiny-final.safetensors"))
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
