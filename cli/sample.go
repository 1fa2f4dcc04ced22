package cli

import (
	"fmt"
	"io"
	"math"

	"github.com/synthgen/synthgen/runtime/synth"
)

func sampleCmd(e *env, args []string) error {
	fs := newFlagSet(e, "sample", "Continues a prompt with bytes sampled from a checkpoint and prints the prompt and the continuation.")
	var ckpt, prompt string
	var o synth.SampleOptions
	ckptUsage(fs, &ckpt)
	fs.StringVar(&prompt, "prompt", "The ", "text to continue (bytes; the model sees the last n of them)")
	fs.IntVar(&o.Len, "len", 300, "bytes to generate")
	fs.Float64Var(&o.Temp, "temp", 0.8, "sampling temperature (0: always the most likely byte)")
	fs.IntVar(&o.TopK, "topk", 0, "sample among the k most likely bytes only (0: all)")
	fs.Uint64Var(&o.Seed, "seed", 1, "random seed")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := needCkpt(ckpt); err != nil {
		return err
	}
	switch {
	case o.Len < 1:
		return fmt.Errorf("-len %d must be ≥ 1", o.Len)
	case !(o.Temp >= 0) || math.IsInf(o.Temp, 0):
		return fmt.Errorf("-temp %g must be a number ≥ 0", o.Temp)
	case o.TopK < 0:
		return fmt.Errorf("-topk %d must be ≥ 0", o.TopK)
	case prompt == "":
		return fmt.Errorf("-prompt must not be empty: the model needs at least one byte to continue")
	}
	m, err := synth.Load(e.context(), ckpt)
	if err != nil {
		return err
	}
	if _, err := io.WriteString(e.out, prompt); err != nil {
		return err
	}
	if err := m.Generate(e.context(), e.out, []byte(prompt), o); err != nil {
		return err
	}
	_, err = io.WriteString(e.out, "\n")
	return err
}
