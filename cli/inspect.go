package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/synthgen/synthgen/internal/textfmt"
	"github.com/synthgen/synthgen/runtime/synth"
)

func inspectCmd(e *env, args []string) error {
	flags := newFlagSet(e, "inspect", "Lists a checkpoint's tensors and shapes, its parameter count, spec and step, and its optimizer state.")
	var ckpt string
	ckptUsage(flags, &ckpt)
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if err := needCkpt(ckpt); err != nil {
		return err
	}
	in, err := synth.Inspect(ckpt)
	if err != nil {
		return err
	}
	s := in.Spec
	fmt.Fprintf(e.out, "checkpoint %s (%d bytes)\n", ckpt, in.Size)
	fmt.Fprintf(e.out, "spec       %s\n", s.JSON())
	fmt.Fprintf(e.out, "           variant %s, n %d, d %d, %d heads (dh %d), %d layers, ffn %d, vocab %d\n",
		s.Variant, s.N, s.D, s.Heads, s.DH(), s.Layers, s.FFN, s.Vocab)
	fmt.Fprintf(e.out, "step       %d\n", in.Step)
	if s.IsClassifier() {
		fmt.Fprintf(e.out, "labels     %d classes: %q\n", len(in.Labels), in.Labels)
	}
	wName := len("tensor")
	for _, t := range in.Tensors {
		wName = max(wName, len(t.Name))
	}
	fmt.Fprintf(e.out, "\n%-*s  %-5s  %-16s  %10s  %s\n", wName, "tensor", "dtype", "shape", "elements", "notes")
	for _, t := range in.Tensors {
		shape := make([]string, len(t.Shape))
		for i, d := range t.Shape {
			shape[i] = fmt.Sprint(d)
		}
		var notes []string
		if t.Frozen {
			notes = append(notes, "frozen")
		}
		if t.Decay {
			notes = append(notes, "decay")
		}
		row := fmt.Sprintf("%-*s  %-5s  %-16s  %10d  %s", wName, t.Name, t.DType, "["+strings.Join(shape, ", ")+"]", t.Elems, strings.Join(notes, ", "))
		fmt.Fprintln(e.out, strings.TrimRight(row, " "))
	}
	fmt.Fprintf(e.out, "\n%d tensors, %d parameters (%s), %d trainable\n", len(in.Tensors), in.NumParams, textfmt.Count(float64(in.NumParams)), in.Trainable)

	switch {
	case in.OptErr == nil:
		c := in.OptConfig
		fmt.Fprintf(e.out, "optimizer  %s: AdamW state at step %s of %d; batch %d, lr %g, warm-up %d, seed %d", in.OptPath, in.OptStep, c.Steps, c.Batch, c.LR, c.Warmup, c.Seed)
		if in.OptData != "" {
			fmt.Fprintf(e.out, ", data %s", in.OptData)
		}
		fmt.Fprintln(e.out)
	case errors.Is(in.OptErr, fs.ErrNotExist):
		fmt.Fprintf(e.out, "optimizer  none (%s absent)\n", in.OptPath)
	default:
		fmt.Fprintf(e.out, "optimizer  %v\n", in.OptErr)
	}
	return nil
}
