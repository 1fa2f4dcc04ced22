// Package synth is synthgen's Go API: train, resume, evaluate, sample,
// save and load the byte-level language models of the model card
// (Synthesizer, AFT and linear attention), running on the kernels of the
// generated packages a program links.
//
// A model's kernels come from a package generated for its spec (by
// cmd/synthgen, usually from a //go:generate line); importing that package
// registers them, and the generated package's Spec variable is the spec:
//
//	import (
//		"github.com/synthgen/synthgen/runtime/synth"
//		"example.com/mymodel/small" // generated: go:generate go tool synthgen -spec small.json -out .
//	)
//
//	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
//	defer stop()
//	sum, err := synth.Train(ctx, small.Spec,
//		synth.Data("input.txt"), synth.Steps(2000), synth.Out("small.safetensors"),
//		synth.Log(os.Stdout, 100))
//	// Ctrl-C: the run saves at the step it reached; errors.Is(err, context.Canceled).
//	sum, err = synth.Resume(ctx, "small.safetensors", synth.Steps(4000))
//
//	m, err := synth.Load(ctx, "small.safetensors") // or with synth.ISA(kernels.AVX2)
//	res, err := m.Evaluate(ctx, text, synth.EvalOptions{})
//	out, err := m.Sample(ctx, []byte("The light "), synth.SampleOptions{Len: 200, Temp: 0.8})
//
//	srv, err := synth.NewServer(map[string]*synth.Model{"small": m}, synth.ServeOptions{})
//	err = synth.Serve(ctx, "127.0.0.1:8080", srv, nil) // POST /v1/generate streams text
//
// Sample, Generate and the Server decode incrementally (model.Decoder):
// the prompt is encoded in one batched forward pass, then each byte costs
// one position's work; past n bytes the last n/2 are re-encoded (decode.go).
//
// Training is deterministic: a step's batch is a function of (seed, step),
// results do not depend on the number of workers, and a run stopped early
// (StopAt, or a cancelled context) and resumed ends with exactly the
// weights of an uninterrupted run. A run writes three files: the
// checkpoint (safetensors, the card's tensor names), the optimizer state
// beside it (<name>.opt.safetensors: AdamW's moments and the run's
// settings) and a CSV log (<name>.csv: step, loss, val_loss, lr,
// tokens_per_s, and for a classifier val_accuracy); checkpoints are replaced atomically. A new run never
// replaces files it did not start from: an existing checkpoint at Out is
// an error that says to resume it, unless Overwrite is given.
//
// A classifier (spec "task": "classify", "classes": K) runs the same
// blocks, then mean pooling and a linear head (the card's "Encoders and
// classification"). It trains on a labelled file (Data: TSV, CSV or JSON
// Lines), its labels becoming the classes in order of first appearance and
// saved in the checkpoint, validated on a file (Valid) or a held-out share
// (HoldOut); Model.EvaluateLabelled gives its loss and accuracy on a
// labelled file and Model.Predict its labels for texts:
//
//	sum, err := synth.Train(ctx, clsSpec, synth.Data("train.tsv"), synth.Valid("val.tsv"))
//	m, err := synth.Load(ctx, "cls.safetensors")
//	res, err := m.EvaluateLabelled(ctx, "test.tsv", 0) // res.Loss, res.Accuracy
//	preds, err := m.Predict(ctx, [][]byte{[]byte("some text")}) // preds[0].Label, .Probs
//
// Errors are returned, wrapped with the file or setting they concern; the
// package never exits the program. A spec whose generated package the
// program does not link gives an error matching ErrNotLinked that says how
// to generate it.
package synth
