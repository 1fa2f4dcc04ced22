package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/runtime/train"
)

func runInspect(args []string) error { return inspectCmd(stdEnv(), args) }

func inspectCmd(e *env, args []string) error {
	fs := newFlagSet(e, "inspect", "Lists a checkpoint's tensors and shapes, its parameter count, spec and step, and its optimizer state.")
	var ckpt string
	ckptUsage(fs, &ckpt)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	h, err := checkpoint.ReadHeader(ckpt)
	if err != nil {
		return err
	}
	k, err := checkpoint.Kernels(ckpt, &h.Spec)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	m, err := model.New(h.Spec, k, 0)
	if err != nil {
		return fmt.Errorf("load checkpoint %s: %w", ckpt, err)
	}
	if err := h.Into(m); err != nil {
		return err
	}
	fi, err := os.Stat(ckpt)
	if err != nil {
		return fmt.Errorf("load checkpoint: %w", err)
	}
	s := m.Spec
	fmt.Fprintf(e.out, "checkpoint %s (%d bytes)\n", ckpt, fi.Size())
	fmt.Fprintf(e.out, "spec       %s\n", s.JSON())
	fmt.Fprintf(e.out, "           variant %s, n %d, d %d, %d heads (dh %d), %d layers, ffn %d, vocab %d\n",
		s.Variant, s.N, s.D, s.Heads, s.DH(), s.Layers, s.FFN, s.Vocab)
	fmt.Fprintf(e.out, "step       %d\n", h.Step)
	wName := len("tensor")
	for _, p := range m.Params {
		wName = max(wName, len(p.Name))
	}
	fmt.Fprintf(e.out, "\n%-*s  %-5s  %-16s  %10s  %s\n", wName, "tensor", "dtype", "shape", "elements", "notes")
	trainable := 0
	for _, p := range m.Params {
		shape := make([]string, len(p.Shape))
		for i, d := range p.Shape {
			shape[i] = fmt.Sprint(d)
		}
		var notes []string
		if p.Frozen {
			notes = append(notes, "frozen")
		} else {
			trainable += len(p.Data)
		}
		if p.Decay {
			notes = append(notes, "decay")
		}
		row := fmt.Sprintf("%-*s  %-5s  %-16s  %10d  %s", wName, p.Name, h.File.Tensors[p.Name].DType, "["+strings.Join(shape, ", ")+"]", len(p.Data), strings.Join(notes, ", "))
		fmt.Fprintln(e.out, strings.TrimRight(row, " "))
	}
	fmt.Fprintf(e.out, "\n%d tensors, %d parameters (%s), %d trainable\n", len(m.Params), m.NumParams(), humanCount(float64(m.NumParams())), trainable)

	opt := checkpoint.OptPath(ckpt)
	f, err := checkpoint.Read(opt)
	switch {
	case err == nil:
		c, cerr := train.ConfigFromMetadata(opt, f.Metadata)
		if cerr != nil {
			fmt.Fprintf(e.out, "optimizer  %s: %v\n", opt, cerr)
			break
		}
		fmt.Fprintf(e.out, "optimizer  %s: AdamW state at step %s of %d; batch %d, lr %g, warm-up %d, seed %d", opt, f.Metadata[checkpoint.KeyStep], c.Steps, c.Batch, c.LR, c.Warmup, c.Seed)
		if d := f.Metadata[synth.KeyData]; d != "" {
			fmt.Fprintf(e.out, ", data %s", d)
		}
		fmt.Fprintln(e.out)
	case os.IsNotExist(err) || strings.Contains(err.Error(), "no such file"):
		fmt.Fprintf(e.out, "optimizer  none (%s absent)\n", opt)
	default:
		fmt.Fprintf(e.out, "optimizer  %v\n", err)
	}
	return nil
}
