package cli

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/synth"
)

func evalCmd(e *env, args []string) error {
	fs := newFlagSet(e, "eval", "Prints the mean next-byte cross-entropy of a checkpoint on a text (loss in nats, and bits\nper byte) over its consecutive, non-overlapping windows of n+1 bytes; for a classifier, the\nmean cross-entropy (nats) and the accuracy on a labelled -data file.")
	var ckpt, dataArg string
	var windows, batch, workers int
	var force bool
	ckptUsage(fs, &ckpt)
	fs.StringVar(&dataArg, "data", "", "text to score, whole, as bytes, or a classifier's labelled file (default: the held-out last 10% of Go's Isaac.Newton-Opticks.txt, the default training text)")
	fs.IntVar(&windows, "windows", 0, "score at most this many windows (0: all)")
	fs.IntVar(&batch, "batch", 16, "windows per forward pass (speed and memory only)")
	fs.IntVar(&workers, "workers", 0, "goroutine workers (0: GOMAXPROCS)")
	fs.BoolVar(&force, "force", false, "allow a -batch whose memory estimate exceeds the machine's memory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := needCkpt(ckpt); err != nil {
		return err
	}
	switch {
	case windows < 0:
		return fmt.Errorf("-windows %d must be ≥ 0", windows)
	case batch < 1:
		return fmt.Errorf("-batch %d must be ≥ 1", batch)
	case workers < 0 || workers > synth.MaxWorkers():
		return fmt.Errorf("-workers %d must satisfy 0 ≤ workers ≤ %d (%d per CPU)", workers, synth.MaxWorkers(), synth.WorkersPerCPU)
	}
	m, err := synth.Load(e.context(), ckpt)
	if err != nil {
		return err
	}
	m.SetWorkers(workers)
	if m.IsClassifier() {
		if dataArg == "" {
			return fmt.Errorf("-data: checkpoint %s is a classifier (spec %s): give a labelled file to evaluate it on", ckpt, m.Spec().Name)
		}
		res, err := m.EvaluateLabelled(e.context(), dataArg, batch)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "checkpoint: %s (spec %s, step %d, %d classes); %s: %d examples\n", ckpt, m.Spec().Name, m.Step(), m.Spec().Classes, dataArg, res.Examples)
		fmt.Fprintf(e.out, "loss %.6f\n", res.Loss)
		fmt.Fprintf(e.out, "accuracy %.6f (%d of %d)\n", res.Accuracy, res.Correct, res.Examples)
		return nil
	}
	var text []byte
	if dataArg == "" {
		p, err := synth.DefaultText()
		if err != nil {
			return err
		}
		if text, err = synth.HeldOut(p, m.Spec()); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "no -data given: scoring the held-out last 10%% (%d bytes) of the default text %s\n", len(text), p)
	} else {
		if text, err = data.ReadFile(dataArg); err != nil {
			return err
		}
		fmt.Fprintf(e.out, "data: %s (%d bytes)\n", dataArg, len(text))
	}
	res, err := m.Evaluate(e.context(), text, synth.EvalOptions{Windows: windows, Batch: batch, AllowLargeMemory: force})
	if err != nil {
		if dataArg != "" {
			return fmt.Errorf("data file %s: %w", dataArg, err)
		}
		return err
	}
	n := m.Spec().N
	fmt.Fprintf(e.out, "checkpoint: %s (spec %s, step %d); %d windows of %d bytes, %d bytes scored\n", ckpt, m.Spec().Name, m.Step(), res.Windows, n+1, res.Tokens)
	fmt.Fprintf(e.out, "loss %.6f\n", res.Loss)
	fmt.Fprintf(e.out, "bpb %.6f\n", res.BPB())
	return nil
}
