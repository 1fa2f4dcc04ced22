package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// RowOptions says how MeasureRow measures a row of the training-step table.
type RowOptions struct {
	// Exe is the binary that measures synthgen's steps in a child process
	// (it calls RunStepChild first thing, as synth does).
	Exe string
	// MinSteps and MinTime bound each measurement from below
	// (MeasureSteps).
	MinSteps int
	MinTime  time.Duration
	// Rounds is how many times the row is measured (at least 1): each
	// round measures 1 worker, 2 workers and then PyTorch, so that the
	// round's ratio compares figures taken back to back.
	Rounds int
	// PyTorch, when set, measures PyTorch's step of the same model with 2
	// threads; nil leaves the PyTorch columns out.
	PyTorch *PyTorch
}

// Row is one spec's row of the training-step table.
type Row struct {
	Spec                string
	N, D, Layers, Batch int
	// Go holds synthgen's figures with 1 and 2 workers: the median
	// tokens/s over the rounds, the largest bytes and allocations per
	// step, and the largest peak resident set.
	Go [2]StepResult
	// PyTorch is PyTorch's figures (median tokens/s, largest peak
	// resident set); nil when not measured or when PyTorchErr is set.
	PyTorch    *PyTorchResult
	PyTorchErr error
	// Ratios are each round's synthgen (2 workers) / PyTorch tokens/s.
	Ratios []float64
}

// Ratio is the median of the rounds' ratios, 0 without PyTorch.
func (r Row) Ratio() float64 { return median(r.Ratios) }

// RatioRange is the smallest and largest of the rounds' ratios.
func (r Row) RatioRange() (lo, hi float64) {
	if len(r.Ratios) == 0 {
		return 0, 0
	}
	return slices.Min(r.Ratios), slices.Max(r.Ratios)
}

// MeasureRow measures spec name's row: o.Rounds rounds of synthgen's
// training step with 1 and 2 workers at StepBatch's batch, each in a
// process of its own (MeasureStepsChild), each followed by PyTorch's step
// of the same model when o.PyTorch is set. A PyTorch failure is kept in
// the row (PyTorchErr) and ends its PyTorch measurements; a synthgen
// failure or ctx's end is the error.
func MeasureRow(ctx context.Context, name string, o RowOptions) (Row, error) {
	s, err := SpecOf(name)
	if err != nil {
		return Row{}, err
	}
	if o.Rounds < 1 {
		return Row{}, fmt.Errorf("%s: %d rounds, want at least 1", name, o.Rounds)
	}
	r := Row{Spec: name, N: s.N, D: s.D, Layers: s.Layers, Batch: StepBatch(s.N)}
	var goRuns [2][]StepResult
	var ptRuns []PyTorchResult
	for range o.Rounds {
		for i, w := range []int{1, 2} {
			res, err := MeasureStepsChild(ctx, o.Exe, name, r.Batch, w, o.MinSteps, o.MinTime)
			if err != nil {
				return Row{}, err
			}
			goRuns[i] = append(goRuns[i], res)
		}
		if o.PyTorch == nil || r.PyTorchErr != nil {
			continue
		}
		pt, err := o.PyTorch.Step(ctx, s, r.Batch, 2)
		if err != nil {
			if ctx.Err() != nil {
				return Row{}, fmt.Errorf("%s: %w", name, ctx.Err())
			}
			r.PyTorchErr = err
			continue
		}
		if !(pt.TokensPerSec > 0) {
			r.PyTorchErr = fmt.Errorf("pytorch %s: %v tokens/s", name, pt.TokensPerSec)
			continue
		}
		ptRuns = append(ptRuns, pt)
		r.Ratios = append(r.Ratios, goRuns[1][len(goRuns[1])-1].TokensPerSec/pt.TokensPerSec)
	}
	for i := range r.Go {
		r.Go[i] = mergeSteps(goRuns[i])
	}
	if r.PyTorchErr != nil {
		r.Ratios = nil
	} else if len(ptRuns) > 0 {
		r.PyTorch = mergePyTorch(ptRuns)
	}
	return r, nil
}

// mergeSteps is one result for several measurements of a row: the median
// tokens/s, the largest bytes, allocations and peak resident set, the
// steps summed.
func mergeSteps(runs []StepResult) StepResult {
	out := runs[0]
	rates := make([]float64, len(runs))
	for i, r := range runs {
		rates[i] = r.TokensPerSec
		if i > 0 {
			out.Steps += r.Steps
			out.BytesPerStep = max(out.BytesPerStep, r.BytesPerStep)
			out.AllocsPerStep = max(out.AllocsPerStep, r.AllocsPerStep)
			out.PeakRSSKiB = max(out.PeakRSSKiB, r.PeakRSSKiB)
		}
	}
	out.TokensPerSec = median(rates)
	return out
}

// mergePyTorch is mergeSteps for PyTorch's measurements.
func mergePyTorch(runs []PyTorchResult) *PyTorchResult {
	out := runs[0]
	rates := make([]float64, len(runs))
	for i, r := range runs {
		rates[i] = r.TokensPerSec
		out.PeakRSSKiB = max(out.PeakRSSKiB, r.PeakRSSKiB)
	}
	out.TokensPerSec = median(rates)
	return &out
}

// median is the middle of v (the mean of the two middle values when
// len(v) is even), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
