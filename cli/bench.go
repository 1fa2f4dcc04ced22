package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/synthgen/synthgen/bench"
)

// runBench measures the kernels of one spec on every instruction set this
// CPU has, against plain Go and gonum, and the training step of the
// comparison specs, and prints one table. The same cases back
// `go test ./bench -bench .`, which is the way to get benchstat samples.
func benchCmd(e *env, args []string) error {
	fs := newFlagSet(e, "bench", "Measures one spec's kernels on every instruction set this CPU has, against plain Go and gonum,\nand the training step of the comparison specs with 1 and 2 workers, and prints one table.\n`go test ./bench -bench .` runs the same cases for benchstat.")
	spec := fs.String("spec", "mid", "linked spec whose kernels to measure")
	trainSpecs := fs.String("train-specs", "", "comma-separated specs for the training step (default: the n 128, d 128, 4-head, 4-layer ones)")
	batch := fs.Int("batch", 16, "batch of the training step")
	skipTrain := fs.Bool("kernels-only", false, "measure only the kernels")
	pytorch := fs.Bool("pytorch", true, "print PyTorch's softmax-value at the spec's n and head width beside the kernels (bench/pytorch/bench.py, 1 thread; skipped with a reason if python3-torch is missing)")
	core := fs.String("openblas-core", "auto", openBLASCoreUsage)
	gen := fs.String("generate", "", "measure generation only, for these comma-separated specs: the old path (a forward over the last n bytes per byte), the incremental decoder and PyTorch with a key/value cache (bench/pytorch/generate.py, 1 and 2 threads), from a full-window prompt")
	genWorkers := fs.Int("generate-workers", 1, "with -generate: synthgen's workers (the decoder's steps run on one core; its prefill and the old path on the workers)")
	genReps := fs.Int("generate-reps", 3, "with -generate: runs per figure, the fastest counts")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *gen != "" {
		if *genWorkers < 1 || *genReps < 1 {
			return fmt.Errorf("bench: -generate-workers %d and -generate-reps %d must be ≥ 1", *genWorkers, *genReps)
		}
		var pt *bench.PyTorch
		if *pytorch {
			ctx, stop := signal.NotifyContext(e.context(), os.Interrupt)
			defer stop()
			var err error
			if pt, _, err = findPyTorch(ctx, e.out, *core); err != nil {
				return fmt.Errorf("bench: %w", err)
			}
		}
		return printGenerate(e.context(), e.out, strings.Split(*gen, ","), *genWorkers, *genReps, pt)
	}
	if *batch < 1 {
		return fmt.Errorf("bench: -batch %d must be ≥ 1", *batch)
	}
	var names []string
	if !*skipTrain {
		names = bench.TrainSpecs()
		if *trainSpecs != "" {
			names = strings.Split(*trainSpecs, ",")
		}
	}
	var pt *bench.PyTorch
	if *pytorch {
		ctx, stop := signal.NotifyContext(e.context(), os.Interrupt)
		defer stop()
		var err error
		if pt, _, err = findPyTorch(ctx, e.out, *core); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	return printBench(e.out, *spec, names, *batch, pt)
}

// printBench prints the kernel tables of spec, PyTorch's softmax-value
// beside them when pt is set, and the training steps of trainSpecs.
func printBench(w io.Writer, spec string, trainSpecs []string, batch int, pt *bench.PyTorch) error {
	cases, err := bench.KernelCases(spec)
	if err != nil {
		return err
	}
	gemm, err := bench.GemmCases(spec)
	if err != nil {
		return err
	}
	cases = append(cases, gemm...)
	peak := bench.FMAPeak()
	fmt.Fprintf(w, "FMA peak of one core (measured): %.1f GFLOP/s\n\n", peak)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "kernel\timpl\tµs/call\tGFLOP/s\t%%peak\t\n")
	for _, c := range cases {
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				c.Run()
			}
		})
		sec := r.T.Seconds() / float64(r.N)
		kernel, impl := splitCase(c.Name)
		pct := "-"
		if peak > 0 && c.Flops > 0 {
			pct = fmt.Sprintf("%.0f", 100*c.Executed/sec/1e9/peak)
		}
		gf := "-"
		if c.Flops > 0 {
			gf = fmt.Sprintf("%.1f", c.Flops/sec/1e9)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t\n", kernel, impl, sec*1e6, gf, pct)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	sp, err := bench.SpecOf(spec)
	if err != nil {
		return err
	}
	rows, err := bench.RowKernelCases(spec, sp.N)
	if err != nil {
		return err
	}
	if pt != nil {
		const problems = 32
		dh := sp.DH()
		sv, err := pt.SoftmaxValue(context.Background(), sp.N, dh, problems)
		if err != nil {
			fmt.Fprintf(w, "\nPyTorch softmax-value left out: %v\n", err)
		} else {
			fmt.Fprintf(w, "\nPyTorch %s softmax-value (n %d, dh %d, %d problems, 1 thread; GFLOP/s as dense: 2·n²·dh forward, 6·n²·dh forward+backward): forward %.1f, forward+backward %.1f\n",
				sv.Version, sp.N, dh, problems, sv.Forward, sv.ForwardBackward)
		}
	}
	fmt.Fprintf(w, "\nrow-wise kernels, %d rows, one core\n", sp.N)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "kernel\timpl\tµs/call\tGelem/s\t\n")
	for _, c := range rows {
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				c.Run()
			}
		})
		sec := r.T.Seconds() / float64(r.N)
		kernel, impl := splitCase(c.Name)
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.2f\t\n", kernel, impl, sec*1e6, c.Elems/sec/1e9)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(trainSpecs) == 0 {
		return nil
	}
	text, err := bench.DefaultText()
	if err != nil {
		return fmt.Errorf("bench: default text: %w", err)
	}
	fmt.Fprintf(w, "\ntraining step (batch %d, forward+backward+AdamW), tokens/s\n", batch)
	tw = tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "spec\t1 worker\t2 workers\tspeed-up\t")
	for _, name := range trainSpecs {
		var tps [2]float64
		for i, workers := range []int{1, 2} {
			step, tokens, err := bench.TrainStep(name, batch, workers, text)
			if err != nil {
				return fmt.Errorf("bench: %s: %w", name, err)
			}
			var stepErr error
			r := testing.Benchmark(func(b *testing.B) {
				for b.Loop() {
					if err := step(); err != nil {
						stepErr = err
						b.SkipNow()
					}
				}
			})
			if stepErr != nil {
				return fmt.Errorf("bench: %s: %w", name, stepErr)
			}
			tps[i] = float64(tokens) * float64(r.N) / r.T.Seconds()
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f×\t\n", name, tps[0], tps[1], tps[1]/tps[0])
	}
	return tw.Flush()
}

// printGenerate prints generation's table (bench.MeasureGenerate and
// PyTorch.Generate): bytes per second of wall time and per CPU-second.
func printGenerate(ctx context.Context, w io.Writer, names []string, workers, reps int, pt *bench.PyTorch) error {
	fmt.Fprintf(w, "generation from a full-window prompt (n bytes), greedy; each cell bytes/s (wall) / bytes per CPU-second; old path %d bytes, decoder and PyTorch n bytes (prefill and re-encodes included); synthgen %d worker(s); best of %d\n",
		bench.OldPathBytes, workers, reps)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "spec\told path\tdecoder\tdecoder/old\tPyTorch cached, 1 thread\tPyTorch cached, 2 threads\tdecoder/PyTorch 1 thread (CPU-s)\t")
	for _, name := range names {
		name = strings.TrimSpace(name)
		r, err := bench.MeasureGenerate(name, workers, reps)
		if err != nil {
			return fmt.Errorf("bench: -generate: %w", err)
		}
		rate := func(wall, cpu float64) string { return fmt.Sprintf("%.1f / %.1f", wall, cpu) }
		pts, vs := [2]string{"-", "-"}, "-"
		if pt != nil {
			s, err := bench.SpecOf(name)
			if err != nil {
				return err
			}
			for i, threads := range []int{1, 2} {
				p, err := pt.Generate(ctx, s, threads, reps)
				if err != nil {
					pts[i] = "error"
					fmt.Fprintf(w, "PyTorch left out: %v\n", err)
					continue
				}
				pts[i] = rate(p.BytesPerSec, p.BytesPerCPUSec)
				if i == 0 && p.BytesPerCPUSec > 0 {
					vs = fmt.Sprintf("%.2f×", r.Decoder.PerCPUSec()/p.BytesPerCPUSec)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.0f×\t%s\t%s\t%s\t\n", name, rate(r.Old.PerSec(), r.Old.PerCPUSec()),
			rate(r.Decoder.PerSec(), r.Decoder.PerCPUSec()), r.Decoder.PerSec()/r.Old.PerSec(), pts[0], pts[1], vs)
	}
	return tw.Flush()
}

// splitCase turns "spec=mid/n=256/dh=64/kernel=X/impl=avx512" into
// ("X (n 256, dh 64)", "avx512"), a GEMM case into ("Gemm fwd (m …, k …,
// n …)", impl) and a row-wise case into (kernel, impl).
func splitCase(name string) (kernel, impl string) {
	kv := map[string]string{}
	for _, part := range strings.Split(name, "/") {
		if k, v, ok := strings.Cut(part, "="); ok {
			kv[k] = v
		}
	}
	switch {
	case kv["kernel"] == "Gemm":
		return fmt.Sprintf("Gemm %s (m %s, k %s, n %s)", kv["pass"], kv["m"], kv["k"], kv["n"]), kv["impl"]
	case kv["rows"] != "":
		return kv["kernel"], kv["impl"]
	}
	return fmt.Sprintf("%s (n %s, dh %s)", kv["kernel"], kv["n"], kv["dh"]), kv["impl"]
}
