package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/synthgen/synthgen/bench"
	"github.com/synthgen/synthgen/internal/textfmt"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/synth"
)

// runSteps prints the training-step table: for every spec, whole training
// steps with 1 and 2 workers (tokens/s, bytes and allocations per step,
// peak resident set), beside PyTorch's step of the same model at the same
// batch with 2 threads and the ratio, each measured in a process of its
// own (bench.MeasureRow).
func stepsCmd(e *env, args []string) error {
	fs := newFlagSet(e, "steps", "Measures whole training steps of each spec with 1 and 2 workers (tokens/s, bytes and allocations\nper step, peak resident set) beside PyTorch's step of the same model with 2 threads, each in a\nprocess of its own, and prints one row per spec as it is measured.")
	list := fs.String("specs", "", "comma-separated specs (default: the n 128 family, mid, big and the long-context specs)")
	minSteps := fs.Int("min-steps", 3, "timed steps per measurement, at least")
	minTime := fs.Duration("min-time", 3*time.Second, "time per measurement, at least")
	rounds := fs.Int("rounds", 1, "measurements of each row, each round's ratio from figures taken back to back; the table shows medians and the ratios' range")
	pytorch := fs.Bool("pytorch", true, "measure PyTorch beside (bench/pytorch/bench.py; skipped with a reason if python3-torch is missing)")
	core := fs.String("openblas-core", "auto", openBLASCoreUsage)
	bf16 := fs.Bool("bf16", true, "also measure PyTorch's step under bf16 autocast (skipped with a reason where the CPU lacks AVX512-BF16 and AMX-BF16)")
	md := fs.Bool("md", false, "also print the table as markdown at the end")
	precision := fs.String("precision", "f32", "number format of synthgen's linear-layer products: f32, or bf16 (bf16 operands, float32 accumulation; AMX, else AVX512-BF16)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	prec, err := synth.ParsePrecision(*precision)
	if err != nil {
		return fmt.Errorf("-precision: %w", err)
	}
	var bfLevel string
	if prec == synth.BF16 {
		isa, err := kernels.Level()
		if err != nil {
			return err
		}
		l, err := synth.BF16Level(isa)
		if err != nil {
			return fmt.Errorf("-precision bf16: %w", err)
		}
		bfLevel = l.String()
	}
	names := bench.TableSpecs()
	if *list != "" {
		names = strings.Split(*list, ",")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt)
	defer stop()
	o := bench.RowOptions{Exe: exe, MinSteps: *minSteps, MinTime: *minTime, Rounds: *rounds, GoBF16: prec == synth.BF16}
	var choice string
	if *pytorch {
		if o.PyTorch, choice, err = findPyTorch(ctx, e.out, *core); err != nil {
			return fmt.Errorf("steps: %w", err)
		}
	}
	if o.PyTorch != nil && *bf16 {
		if ok, reason := bench.HostCPU().BF16(); ok {
			o.BF16 = true
		} else {
			fmt.Fprintf(e.out, "PyTorch bf16 column left out: %s\n", reason)
		}
	}
	fmt.Fprintf(e.out, "training steps (forward, backward, clipping, AdamW); each figure from a process of its own; ratio = synthgen 2 workers / PyTorch 2 threads")
	if bfLevel != "" {
		fmt.Fprintf(e.out, "; synthgen's linear layers', aft_full's and the Synthesizer attention's products (factorized dense's and some mixtures' excepted) in bf16 (%s, float32 accumulation); f32 = synthgen's float32 step, 2 workers, measured after the bf16 ones each round, and bf16/f32 = 2 workers bf16 / f32", bfLevel)
	}
	if o.BF16 {
		fmt.Fprintf(e.out, "; bf16 = PyTorch's step under torch.autocast(\"cpu\", dtype=torch.bfloat16), 2 threads")
	}
	if *rounds > 1 {
		fmt.Fprintf(e.out, "; %d rounds a row: medians, and the range of the rounds' ratios", *rounds)
	}
	fmt.Fprintln(e.out)
	// Each row measures 1 and 2 workers (and PyTorch) per round for at
	// least -min-time each: a lower bound now, the pace so far after each
	// row; on standard error, so the table stays whole.
	per := 2
	if o.PyTorch != nil {
		per = 3
	}
	if o.BF16 {
		per = 4
	}
	if o.GoBF16 {
		per++
	}
	fmt.Fprintf(e.errOut, "%d rows × %d rounds × %d measurements of at least %s: at least %s, more for the large specs\n",
		len(names), max(*rounds, 1), per, *minTime, textfmt.Duration(time.Duration(len(names)*max(*rounds, 1)*per)**minTime))
	printStepHead(e.out, o.BF16, o.GoBF16)
	var rows []bench.Row
	start := time.Now()
	for i, name := range names {
		r, err := bench.MeasureRow(ctx, name, o)
		if err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		printStepRow(e.out, r, o.BF16, o.GoBF16)
		rows = append(rows, r)
		if left := len(names) - i - 1; left > 0 {
			took := time.Since(start)
			fmt.Fprintf(e.errOut, "  %d of %d rows in %s; ETA %s at this pace\n", i+1, len(names), textfmt.Duration(took), textfmt.Duration(took/time.Duration(i+1)*time.Duration(left)))
		}
	}
	if *md {
		fmt.Fprintln(e.out)
		if choice != "" {
			fmt.Fprintf(e.out, "PyTorch 2 threads on %s.\n\n", choice)
		}
		printStepsMarkdown(e.out, rows, *rounds > 1, o.BF16, o.GoBF16)
	}
	return nil
}

// openBLASCoreUsage is -openblas-core's usage, in synth steps and bench.
const openBLASCoreUsage = "OpenBLAS core type of PyTorch's figures: auto (OpenBLAS's own unless the CPU has wider vectors than it uses, then the fastest float32 GEMM among the candidates), time (always the fastest), or an OPENBLAS_CORETYPE name such as SKYLAKEX"

// findPyTorch finds PyTorch and chooses its OpenBLAS core type (force as
// -openblas-core gives it), printing the choice; without PyTorch it
// prints why its columns are left out and returns nil. The choice's line
// is returned for the markdown table's caption. A forced core this
// OpenBLAS or CPU cannot run is an error.
func findPyTorch(ctx context.Context, w io.Writer, force string) (*bench.PyTorch, string, error) {
	wd, _ := os.Getwd()
	pt, err := bench.FindPyTorch(wd)
	if err != nil {
		fmt.Fprintf(w, "PyTorch left out: %v\n", err)
		return nil, "", nil
	}
	ch, err := pt.ChooseCore(ctx, force)
	if err != nil {
		if ctx.Err() != nil || !isAuto(force) {
			return nil, "", err
		}
		fmt.Fprintf(w, "PyTorch left out: %v\n", err)
		return nil, "", nil
	}
	fmt.Fprintf(w, "PyTorch on %s\n", ch)
	if env := bench.InheritedCoreType(); env != "" && !strings.EqualFold(env, ch.Env) {
		fmt.Fprintf(w, "  (OPENBLAS_CORETYPE=%s and OPENBLAS_L2_SIZE from the environment are not passed to PyTorch; -openblas-core %s uses that core)\n", env, env)
	}
	return pt, ch.String(), nil
}

// isAuto reports whether -openblas-core leaves the choice to the probes.
func isAuto(force string) bool {
	f := strings.ToLower(strings.TrimSpace(force))
	return f == "" || f == "auto" || f == "time"
}

// ratio is the row's median ratio, with the rounds' range when there are
// several; "-" without PyTorch.
func ratio(r bench.Row) string { return ratioOf(r.Ratio(), r.Ratios) }

// ratioOf is a column's median ratio med, with the range of its rounds'
// ratios v when there are several; "-" for none.
func ratioOf(med float64, v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	lo, hi := slices.Min(v), slices.Max(v)
	s := fmt.Sprintf("%.2f×", med)
	if len(v) > 1 {
		s += fmt.Sprintf(" (%.2f–%.2f)", lo, hi)
	}
	return s
}

func mib(kib int64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(kib)/1024)
}

const stepFormat = "%-26s %5s %4s %3s %5s %10s %10s %6s %9s %8s %10s %10s %s"

// printStepHead writes the header of the fixed-width table; bf16 adds
// the bf16 autocast columns, f32 synthgen's own float32 step beside a
// bf16 one.
func printStepHead(w io.Writer, bf16, f32 bool) {
	fmt.Fprintf(w, stepFormat, "spec", "n", "d", "L", "batch", "1 worker", "2 workers", "2 vs 1", "B/step", "RSS MiB", "PyTorch", "PT RSS MiB", "ratio")
	if bf16 {
		fmt.Fprintf(w, "  %10s %s", "PT bf16", "bf16 ratio")
	}
	if f32 {
		fmt.Fprintf(w, "  %10s %s", "f32", "bf16/f32")
	}
	fmt.Fprintln(w)
}

// printStepRow writes a row in fixed-width columns, so rows line up as
// they arrive.
func printStepRow(w io.Writer, r bench.Row, bf16, f32 bool) {
	pt, ptRSS := "-", "-"
	if r.PyTorch != nil {
		pt, ptRSS = fmt.Sprintf("%.0f", r.PyTorch.TokensPerSec), mib(r.PyTorch.PeakRSSKiB)
	}
	fmt.Fprintf(w, stepFormat, r.Spec, fmt.Sprint(r.N), fmt.Sprint(r.D), fmt.Sprint(r.Layers), fmt.Sprint(r.Batch),
		fmt.Sprintf("%.0f", r.Go[0].TokensPerSec), fmt.Sprintf("%.0f", r.Go[1].TokensPerSec),
		fmt.Sprintf("%.2f×", r.Go[1].TokensPerSec/r.Go[0].TokensPerSec),
		fmt.Sprintf("%.0f", r.Go[1].BytesPerStep), mib(r.Go[1].PeakRSSKiB), pt, ptRSS, ratio(r))
	if bf16 {
		bt := "-"
		if r.PyTorchBF16 != nil {
			bt = fmt.Sprintf("%.0f", r.PyTorchBF16.TokensPerSec)
		}
		fmt.Fprintf(w, "  %10s %s", bt, ratioOf(r.BF16Ratio(), r.BF16Ratios))
	}
	if f32 {
		ft := "-"
		if r.F32 != nil {
			ft = fmt.Sprintf("%.0f", r.F32.TokensPerSec)
		}
		fmt.Fprintf(w, "  %10s %s", ft, ratioOf(r.F32Ratio(), r.F32Ratios))
	}
	fmt.Fprintln(w)
	if r.PyTorchErr != nil {
		fmt.Fprintf(w, "  (PyTorch: %v)\n", r.PyTorchErr)
	}
	if bf16 && r.PyTorchBF16Err != nil {
		fmt.Fprintf(w, "  (PyTorch bf16: %v)\n", r.PyTorchBF16Err)
	}
}

// printStepsMarkdown writes the table as markdown; with ranges, a last
// column holds the range of the rounds' ratios; bf16 adds PyTorch's bf16
// autocast step and synthgen's ratio to it before that, and f32
// synthgen's own float32 step (2 workers) and the bf16/f32 ratio, with its
// rounds' range when there are several.
func printStepsMarkdown(w io.Writer, rows []bench.Row, ranges, bf16, f32 bool) {
	head := "| spec | n | d | layers | batch | 1 worker | 2 workers | 2 vs 1 | bytes/step | peak RSS (MiB) | PyTorch, 2 threads | PyTorch peak RSS (MiB) | synthgen / PyTorch |"
	rule := "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	if bf16 {
		head += " PyTorch bf16 autocast, 2 threads | synthgen / PyTorch bf16 |"
		rule += "---|---|"
	}
	if f32 {
		head += " synthgen f32, 2 workers | bf16 / f32 |"
		rule += "---|---|"
	}
	if ranges {
		head += " rounds' ratios |"
		rule += "---|"
	}
	fmt.Fprintln(w, head)
	fmt.Fprintln(w, rule)
	for _, r := range rows {
		pt, ptRSS, rt := "", "", "-"
		if r.PyTorch != nil {
			pt, ptRSS = group(r.PyTorch.TokensPerSec), mib(r.PyTorch.PeakRSSKiB)
		}
		if len(r.Ratios) > 0 {
			rt = fmt.Sprintf("%.2f×", r.Ratio())
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s | %.2f× | %.0f | %s | %s | %s | %s |",
			r.Spec, r.N, r.D, r.Layers, r.Batch, group(r.Go[0].TokensPerSec), group(r.Go[1].TokensPerSec),
			r.Go[1].TokensPerSec/r.Go[0].TokensPerSec, r.Go[1].BytesPerStep, mib(r.Go[1].PeakRSSKiB), pt, ptRSS, rt)
		if bf16 {
			bt, brt := "", "-"
			if r.PyTorchBF16 != nil {
				bt = group(r.PyTorchBF16.TokensPerSec)
			}
			if len(r.BF16Ratios) > 0 {
				brt = fmt.Sprintf("%.2f×", r.BF16Ratio())
			}
			fmt.Fprintf(w, " %s | %s |", bt, brt)
		}
		if f32 {
			ft := ""
			if r.F32 != nil {
				ft = group(r.F32.TokensPerSec)
			}
			fmt.Fprintf(w, " %s | %s |", ft, ratioOf(r.F32Ratio(), r.F32Ratios))
		}
		if ranges {
			if lo, hi := r.RatioRange(); len(r.Ratios) > 0 {
				fmt.Fprintf(w, " %.2f–%.2f (%d) |", lo, hi, len(r.Ratios))
			} else {
				fmt.Fprint(w, " - |")
			}
		}
		fmt.Fprintln(w)
	}
}

// group formats a rate with thousands separators: 41721 → "41,721".
func group(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
