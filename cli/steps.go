package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/synthgen/synthgen/bench"
	"github.com/synthgen/synthgen/internal/textfmt"
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
	md := fs.Bool("md", false, "also print the table as markdown at the end")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	names := bench.TableSpecs()
	if *list != "" {
		names = strings.Split(*list, ",")
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("steps: %w", err)
	}
	o := bench.RowOptions{Exe: exe, MinSteps: *minSteps, MinTime: *minTime, Rounds: *rounds}
	if *pytorch {
		wd, _ := os.Getwd()
		if o.PyTorch, err = bench.FindPyTorch(wd); err != nil {
			fmt.Fprintf(e.out, "PyTorch columns left out: %v\n", err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Fprintf(e.out, "training steps (forward, backward, clipping, AdamW); each figure from a process of its own; ratio = synthgen 2 workers / PyTorch 2 threads")
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
	fmt.Fprintf(e.errOut, "%d rows × %d rounds × %d measurements of at least %s: at least %s, more for the large specs\n",
		len(names), max(*rounds, 1), per, *minTime, textfmt.Duration(time.Duration(len(names)*max(*rounds, 1)*per)**minTime))
	printStepHead(e.out)
	var rows []bench.Row
	start := time.Now()
	for i, name := range names {
		r, err := bench.MeasureRow(ctx, name, o)
		if err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		printStepRow(e.out, r)
		rows = append(rows, r)
		if left := len(names) - i - 1; left > 0 {
			took := time.Since(start)
			fmt.Fprintf(e.errOut, "  %d of %d rows in %s; ETA %s at this pace\n", i+1, len(names), textfmt.Duration(took), textfmt.Duration(took/time.Duration(i+1)*time.Duration(left)))
		}
	}
	if *md {
		fmt.Fprintln(e.out)
		printStepsMarkdown(e.out, rows, *rounds > 1)
	}
	return nil
}

// ratio is the row's median ratio, with the rounds' range when there are
// several; "-" without PyTorch.
func ratio(r bench.Row) string {
	if len(r.Ratios) == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.2f×", r.Ratio())
	if len(r.Ratios) > 1 {
		lo, hi := r.RatioRange()
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

const stepFormat = "%-26s %5s %4s %3s %5s %10s %10s %6s %9s %8s %10s %10s %s\n"

// printStepHead writes the header of the fixed-width table.
func printStepHead(w io.Writer) {
	fmt.Fprintf(w, stepFormat, "spec", "n", "d", "L", "batch", "1 worker", "2 workers", "2 vs 1", "B/step", "RSS MiB", "PyTorch", "PT RSS MiB", "ratio")
}

// printStepRow writes a row in fixed-width columns, so rows line up as
// they arrive.
func printStepRow(w io.Writer, r bench.Row) {
	pt, ptRSS := "-", "-"
	if r.PyTorch != nil {
		pt, ptRSS = fmt.Sprintf("%.0f", r.PyTorch.TokensPerSec), mib(r.PyTorch.PeakRSSKiB)
	}
	fmt.Fprintf(w, stepFormat, r.Spec, fmt.Sprint(r.N), fmt.Sprint(r.D), fmt.Sprint(r.Layers), fmt.Sprint(r.Batch),
		fmt.Sprintf("%.0f", r.Go[0].TokensPerSec), fmt.Sprintf("%.0f", r.Go[1].TokensPerSec),
		fmt.Sprintf("%.2f×", r.Go[1].TokensPerSec/r.Go[0].TokensPerSec),
		fmt.Sprintf("%.0f", r.Go[1].BytesPerStep), mib(r.Go[1].PeakRSSKiB), pt, ptRSS, ratio(r))
	if r.PyTorchErr != nil {
		fmt.Fprintf(w, "  (PyTorch: %v)\n", r.PyTorchErr)
	}
}

// printStepsMarkdown writes the table as markdown; with ranges, a last
// column holds the range of the rounds' ratios.
func printStepsMarkdown(w io.Writer, rows []bench.Row, ranges bool) {
	head := "| spec | n | d | layers | batch | 1 worker | 2 workers | 2 vs 1 | bytes/step | peak RSS (MiB) | PyTorch, 2 threads | PyTorch peak RSS (MiB) | synthgen / PyTorch |"
	rule := "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
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
