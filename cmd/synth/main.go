// Command synth trains, evaluates, samples and inspects the byte-level
// language models of synthgen's specs (shared/design/model.md), running
// their attention on the generated kernels of every shipped spec:
//
//	synth train   [-spec random] [-data file] [-steps N] [-batch B] [-out x.safetensors] [-resume x.safetensors] …
//	synth eval    [-ckpt x.safetensors] [-data file] [-windows N]
//	synth sample  [-ckpt x.safetensors] [-prompt text] [-len N] [-temp T] [-topk K] [-seed S]
//	synth inspect [-ckpt x.safetensors]
//	synth compare [-specs a,b,specs/aft_*.json] [-data file] [-steps N] [-batch B] [-seeds N] [-out folder] [-resume]
//	synth attn    [-ckpt x.safetensors] [-prompt text] [-out folder]
//	synth info
//	synth bench   [-spec mid] [-kernels-only] [-pytorch=false] [-openblas-core auto]
//	synth steps   [-specs a,b] [-min-time 3s] [-rounds N] [-pytorch=false] [-openblas-core auto] [-bf16=false] [-md]
//
// Run "synth <command> -h" for a command's flags.
//
// Training defaults: spec random on Go's own Isaac.Newton-Opticks.txt (the
// last 10% held out), AdamW (β1 0.9, β2 0.95, eps 1e-8, weight decay 0.1
// on matrices and embeddings only) at a peak learning rate of 1e-3, linear
// warm-up over min(100 steps, 5% of -steps), cosine decay to 10% of the
// peak at the last step, gradients clipped to a global norm of 1.0, seed 1.
// Each step's batch is a function of (seed, step), so a run is
// reproducible bit for bit whatever GOMAXPROCS is, and a run stopped
// early (-stop-at, or Ctrl-C, which saves before exiting) and continued
// with -resume ends with exactly the weights of an uninterrupted run.
// A run writes <name>.safetensors (the checkpoint), <name>.opt.safetensors
// (AdamW's moments and the run's settings, for resuming) and <name>.csv
// (step, loss, val_loss, lr, tokens_per_s).
//
// Built with -tags mpi (cgo and Open MPI: apt-get install openmpi-bin
// libopenmpi-dev), synth train started by mpirun trains data-parallel:
// mpirun -np P synth train … runs P ranks that each compute a share of
// every step's batch and sum their gradients with MPI_Allreduce; rank 0
// evaluates, prints and saves, and the checkpoint is the one-process run's
// to float32 rounding (runtime/mpi, synth.Ranks).
//
// synth compare is the variant study (package runtime/study): by default it
// trains the 14 specs of the n128 d128 h4 L4 family for 600 steps of batch
// 16 each on the same data and seed, prints the table (parameters, train
// loss, validation loss and bits per byte on every held-out window,
// tokens/s, wall time; mean ± std with -seeds N) and writes it with the
// loss curves (loss.png) and every run's checkpoint into -out (default
// study/). Ctrl-C keeps the finished runs and saves the current one;
// synth compare -resume continues without retraining them and gives the
// same table. synth attn draws a checkpoint's attention maps (softmax
// probabilities, linear attention's implicit weights or AFT's normalised
// position biases) as one PNG grid per layer.
//
// synth steps and synth bench measure PyTorch beside (Debian's
// python3-torch on OpenBLAS, bench/pytorch/bench.py). OpenBLAS picks its
// kernels by CPU model and falls back to slower ones on CPUs it does not
// know, so before a table they ask it which core it chose and, when the
// CPU has wider vectors than that core uses, time a float32 GEMM under
// each candidate OPENBLAS_CORETYPE and run PyTorch on the fastest; the
// line above the table names the core and how it was chosen, and
// -openblas-core NAME forces one (bench.ChooseOpenBLASCore).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/synthgen/synthgen/bench"
	_ "github.com/synthgen/synthgen/generated/all" // links every shipped spec's kernels
)

// command is one subcommand of synth.
type command struct {
	run     func(args []string) error
	summary string
}

// commands is the subcommand table.
var commands = map[string]command{
	"train":   {runTrain, "train a model (or resume a run) and write a checkpoint"},
	"eval":    {runEval, "score a checkpoint on a data file: loss in nats and bits per byte"},
	"sample":  {runSample, "generate text from a checkpoint and a prompt"},
	"inspect": {runInspect, "list a checkpoint's tensors, shapes, parameter count, spec and step"},
	"info":    {runInfo, "show the linked specs, the CPU and the kernels dispatch picks"},
	"bench":   {runBench, "measure kernel and training throughput"},
	"steps":   {runSteps, "tabulate training-step speed and memory per spec beside PyTorch"},
	"compare": {runCompare, "train a list of specs on the same data and tabulate and plot their losses"},
	"attn":    {runAttn, "draw a checkpoint's attention maps per layer and head as PNG heatmaps"},
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: synth <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-8s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `Run "synth <command> -h" for a command's flags.`)
}

func main() {
	// synth steps measures each row in a child process: this binary, re-run.
	if handled, err := bench.RunStepChild(); handled {
		if err != nil {
			fmt.Fprintf(os.Stderr, "synth steps (child): %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run dispatches args to a subcommand and returns the exit status.
func run(args []string, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		usage(os.Stdout)
		return 0
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "synth: unknown command %q\n\n", name)
		usage(stderr)
		return 2
	}
	if err := c.run(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		if errors.Is(err, errUsage) {
			return 2
		}
		fmt.Fprintf(stderr, "synth %s: %v\n", name, err)
		return 1
	}
	return 0
}

// errUsage marks a flag error the flag package has already reported.
var errUsage = errors.New("bad usage")

// parseFlags parses args into fs, rejecting positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only; see synth %s -h)", fs.Arg(0), fs.Name())
	}
	return nil
}

// isTerminal reports whether f is a character device (a terminal).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
