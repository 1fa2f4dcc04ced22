package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/synthgen/synthgen/runtime/synth"
)

// env is where a command writes and what cancels it, so tests can run
// commands with buffers and their own context.
type env struct {
	out, errOut io.Writer
	ctx         context.Context // nil: never cancelled
	terminal    bool            // out is a terminal: live progress line
}

// context is the command's context.
func (e *env) context() context.Context {
	if e.ctx == nil {
		return context.Background()
	}
	return e.ctx
}

// defaultSpec is the spec synth train uses without -spec: random (the
// README's default: random synthesizer, n 128, d 128, 4 heads, 4 layers)
// when the program links it, else the only spec the program links, else
// "" (-spec is then required).
func defaultSpec() string {
	linked := synth.Linked()
	if slices.Contains(linked, "random") {
		return "random"
	}
	if len(linked) == 1 {
		return linked[0]
	}
	return ""
}

// linkedList names the linked specs for an error message.
func linkedList() string {
	linked := synth.Linked()
	if len(linked) == 0 {
		return "no spec: import a generated package in the program's main.go"
	}
	return "the specs " + strings.Join(linked, ", ")
}

// ckptUsage adds the -ckpt flag: by default the checkpoint synth train
// writes without -out (when the default spec is known).
func ckptUsage(fs *flag.FlagSet, p *string) {
	def := ""
	if s := defaultSpec(); s != "" {
		def = s + ".safetensors"
	}
	fs.StringVar(p, "ckpt", def, "checkpoint `file` to read (written by synth train)")
}

// needCkpt checks that a checkpoint was named.
func needCkpt(ckpt string) error {
	if ckpt == "" {
		return errors.New("-ckpt is required (this program links no single default spec whose checkpoint to read)")
	}
	return nil
}

// newFlagSet makes a subcommand's flag set, reporting to e.errOut.
func newFlagSet(e *env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.errOut)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: synth %s [flags]\n\n%s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// explicit reports whether flag name was given on the command line.
func explicit(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// trainFlags maps synth's options to synth train's flags.
var trainFlags = map[string]string{
	"Steps": "steps", "LRSteps": "lr-steps", "Batch": "batch", "LR": "lr", "Warmup": "warmup",
	"Clip": "clip", "WeightDecay": "wd", "Seed": "seed", "StopAt": "stop-at", "Workers": "workers",
	"EvalEvery": "eval-every", "EvalWindows": "eval-windows", "SaveEvery": "save-every",
	"Data": "data", "Out": "out", "Valid": "valid", "HoldOut": "hold-out", "Precision": "precision",
}

// flagError says err in the command's terms: an option's error names the
// flag that set it.
func flagError(err error) error {
	var oe *synth.OptionError
	if errors.As(err, &oe) {
		if f, ok := trainFlags[oe.Option]; ok {
			return fmt.Errorf("-%s %v: %s", f, oe.Value, oe.Rule)
		}
	}
	return err
}
