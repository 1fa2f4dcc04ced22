package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// env is where a command writes and what can interrupt it, so tests can
// run commands with buffers and their own interrupt channel.
type env struct {
	out, errOut io.Writer
	interrupt   <-chan os.Signal // nil: never interrupted
	terminal    bool             // out is a terminal: live progress line
}

func stdEnv() *env {
	return &env{out: os.Stdout, errOut: os.Stderr, terminal: isTerminal(os.Stdout)}
}

// DefaultSpec is the spec synth train uses without -spec (the README's
// default: random synthesizer, n 128, d 128, 4 heads, 4 layers).
const DefaultSpec = "random"

// lookupSpec resolves -spec: the name of a linked spec, or the path of a
// spec file whose (linked) package must match it.
func lookupSpec(arg string) (specs.Spec, *kernels.Kernels, error) {
	name := arg
	var file *specs.Spec
	if strings.HasSuffix(arg, ".json") || strings.ContainsRune(arg, filepath.Separator) {
		s, err := specs.Load(arg)
		if err != nil {
			return specs.Spec{}, nil, fmt.Errorf("-spec %s: %w", arg, err)
		}
		file, name = s, s.Name
	}
	linked, err := kernels.Spec(name)
	if err != nil {
		return specs.Spec{}, nil, fmt.Errorf("-spec %s: %w", arg, err)
	}
	if file != nil && file.JSON() != linked.JSON() {
		return specs.Spec{}, nil, fmt.Errorf("-spec %s: the file's spec %s differs from the linked %q %s (regenerate with go run ./cmd/synthgen -all)", arg, file.JSON(), name, linked.JSON())
	}
	k, err := kernels.Lookup(name)
	if err != nil {
		return specs.Spec{}, nil, fmt.Errorf("-spec %s: %w", arg, err)
	}
	return linked, k, nil
}

// dataPath resolves -data: the path given, or the default text (and a
// note saying so).
func dataPath(arg string) (path, note string, err error) {
	if arg != "" {
		return arg, "", nil
	}
	p, err := data.DefaultFile()
	if err != nil {
		return "", "", err
	}
	return p, "no -data given: using the default text " + p, nil
}

// defaultCkpt is the checkpoint eval, sample and inspect read without -ckpt:
// the default output of synth train.
const defaultCkpt = DefaultSpec + ".safetensors"

func ckptUsage(fs *flag.FlagSet, p *string) {
	fs.StringVar(p, "ckpt", defaultCkpt, "checkpoint `file` to read (written by synth train)")
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

// humanCount writes n as 1.23M, 45.6k or 789.
func humanCount(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
