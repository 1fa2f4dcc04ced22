package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/synthgen/synthgen/bench"
)

// runSteps prints the training-step table: for every spec, whole training
// steps with 1 and 2 workers (tokens/s, bytes and allocations per step,
// peak resident set), beside PyTorch's step of the same model at the same
// batch with 2 threads and the ratio, each measured in a process of its
// own (bench.MeasureStepsChild, bench.PyTorch).
func runSteps(args []string) error {
	fs := flag.NewFlagSet("steps", flag.ContinueOnError)
	list := fs.String("specs", "", "comma-separated specs (default: the n 128 family, mid, big and the long-context specs)")
	minSteps := fs.Int("min-steps", 3, "timed steps per measurement, at least")
	minTime := fs.Duration("min-time", 3*time.Second, "time per measurement, at least")
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
	var pt *bench.PyTorch
	if *pytorch {
		wd, _ := os.Getwd()
		if pt, err = bench.FindPyTorch(wd); err != nil {
			fmt.Printf("PyTorch columns left out: %v\n", err)
			pt = nil
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("training steps (forward, backward, clipping, AdamW); each figure from a process of its own; ratio = synthgen 2 workers / PyTorch 2 threads\n")
	head := stepRow{}
	head.print(os.Stdout, true)
	var rows []stepRow
	for _, name := range names {
		s, err := bench.SpecOf(name)
		if err != nil {
			return fmt.Errorf("steps: %w", err)
		}
		r := stepRow{spec: name, n: s.N, d: s.D, layers: s.Layers, batch: bench.StepBatch(s.N)}
		for i, w := range []int{1, 2} {
			if r.go_[i], err = bench.MeasureStepsChild(ctx, exe, name, r.batch, w, *minSteps, *minTime); err != nil {
				return fmt.Errorf("steps: %w", err)
			}
		}
		if pt != nil {
			res, err := pt.Step(ctx, s, r.batch, 2)
			if err != nil {
				r.ptErr = err.Error()
			} else {
				r.pt = &res
			}
		}
		r.print(os.Stdout, false)
		rows = append(rows, r)
	}
	if *md {
		fmt.Println()
		printStepsMarkdown(os.Stdout, rows)
	}
	return nil
}

// stepRow is one spec's row.
type stepRow struct {
	spec                string
	n, d, layers, batch int
	go_                 [2]bench.StepResult // 1 and 2 workers
	pt                  *bench.PyTorchResult
	ptErr               string
}

func (r stepRow) ratio() string {
	if r.pt == nil || r.pt.TokensPerSec <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", r.go_[1].TokensPerSec/r.pt.TokensPerSec)
}

func mib(kib int64) string {
	if kib <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", float64(kib)/1024)
}

// print writes the row (or, with head, the header) in fixed-width columns,
// so rows line up as they arrive.
func (r stepRow) print(w io.Writer, head bool) {
	const f = "%-26s %5s %4s %3s %5s %10s %10s %6s %9s %8s %10s %10s %8s\n"
	if head {
		fmt.Fprintf(w, f, "spec", "n", "d", "L", "batch", "1 worker", "2 workers", "2 vs 1", "B/step", "RSS MiB", "PyTorch", "PT RSS MiB", "ratio")
		return
	}
	pt, ptRSS := "-", "-"
	if r.pt != nil {
		pt, ptRSS = fmt.Sprintf("%.0f", r.pt.TokensPerSec), mib(r.pt.PeakRSSKiB)
	}
	fmt.Fprintf(w, f, r.spec, fmt.Sprint(r.n), fmt.Sprint(r.d), fmt.Sprint(r.layers), fmt.Sprint(r.batch),
		fmt.Sprintf("%.0f", r.go_[0].TokensPerSec), fmt.Sprintf("%.0f", r.go_[1].TokensPerSec),
		fmt.Sprintf("%.2f×", r.go_[1].TokensPerSec/r.go_[0].TokensPerSec),
		fmt.Sprintf("%.0f", r.go_[1].BytesPerStep), mib(r.go_[1].PeakRSSKiB), pt, ptRSS, r.ratio())
	if r.ptErr != "" {
		fmt.Fprintf(w, "  (PyTorch: %s)\n", r.ptErr)
	}
}

func printStepsMarkdown(w io.Writer, rows []stepRow) {
	fmt.Fprintln(w, "| spec | n | d | layers | batch | 1 worker | 2 workers | 2 vs 1 | bytes/step | peak RSS (MiB) | PyTorch, 2 threads | PyTorch peak RSS (MiB) | synthgen / PyTorch |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		pt, ptRSS := "", ""
		if r.pt != nil {
			pt, ptRSS = group(r.pt.TokensPerSec), mib(r.pt.PeakRSSKiB)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s | %.2f× | %.0f | %s | %s | %s | %s |\n",
			r.spec, r.n, r.d, r.layers, r.batch, group(r.go_[0].TokensPerSec), group(r.go_[1].TokensPerSec),
			r.go_[1].TokensPerSec/r.go_[0].TokensPerSec, r.go_[1].BytesPerStep, mib(r.go_[1].PeakRSSKiB), pt, ptRSS, r.ratio())
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
