package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

// env is where a command writes and what cancels it, so tests can run
// commands with buffers and their own context.
type env struct {
	out, errOut io.Writer
	ctx         context.Context // nil: never cancelled
	terminal    bool            // out is a terminal: live progress line
}

func stdEnv() *env {
	return &env{out: os.Stdout, errOut: os.Stderr, terminal: isTerminal(os.Stdout)}
}

// context is the command's context.
func (e *env) context() context.Context {
	if e.ctx == nil {
		return context.Background()
	}
	return e.ctx
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

// explicit reports whether flag name was given on the command line.
func explicit(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
