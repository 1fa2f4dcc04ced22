// Command synth trains, evaluates, samples and inspects the byte-level
// language models of synthgen's specs (docs/model.md), running
// their attention on the generated kernels of every shipped spec:
//
//	synth train   [-spec random] [-data file] [-steps N] [-batch B] [-out x.safetensors] [-resume x.safetensors] …
//	synth eval    [-ckpt x.safetensors] [-data file] [-windows N]
//	synth sample  [-ckpt x.safetensors] [-prompt text] [-len N] [-temp T] [-topk K] [-seed S]
//	synth inspect [-ckpt x.safetensors]
//	synth compare [-specs a,b,specs/aft_*.json] [-data file] [-steps N] [-batch B] [-seeds N] [-out folder] [-resume]
//	synth attn    [-ckpt x.safetensors] [-prompt text] [-out folder]
//	synth serve   [-ckpt x.safetensors …] [-addr 127.0.0.1:8080]
//	synth listops [-out folder] [-seed S] [-train N] [-min-len L] [-max-len L] [-format tsv|csv|jsonl]
//	synth info
//	synth bench   [-spec mid] [-kernels-only] [-pytorch=false] [-openblas-core auto]
//	synth steps   [-specs a,b] [-min-time 3s] [-rounds N] [-pytorch=false] [-openblas-core auto] [-bf16=false] [-md]
//
// Run "synth help <command>" for a command's flags, "synth version" for the
// versions it was built from.
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
// synth compare is the variant study (package internal/study): by default it
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
// The command is package cli run over this repository's generated
// packages; a module with specs of its own builds the same command over
// its packages with a main.go like this one (see package cli).
package main

import (
	"github.com/synthgen/synthgen/cli"

	_ "github.com/synthgen/synthgen/generated/all" // links every shipped spec's kernels
)

func main() { cli.Main() }
