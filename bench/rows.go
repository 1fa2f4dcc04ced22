package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/synthgen/synthgen/specs"
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
	// round measures 1 worker, 2 workers (then, with GoBF16, float32 on 2
	// workers) and then PyTorch, so that the round's ratios compare
	// figures taken back to back.
	Rounds int
	// PyTorch, when set, measures PyTorch's step of the same model with 2
	// threads; nil leaves the PyTorch columns out.
	PyTorch *PyTorch
	// BF16 also measures PyTorch's step under bf16 autocast (after the
	// float32 one, each round), for CPUs with bf16 instructions
	// (CPUFeatures.BF16).
	BF16 bool
	// GoBF16 measures synthgen's steps with the linear layers' products in
	// bf16 (synth steps -precision bf16), and each round also synthgen's
	// float32 step with 2 workers right after its bf16 one (Row.F32), so
	// that the bf16/f32 ratio compares figures of the same run.
	GoBF16 bool
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
	// PyTorchBF16, PyTorchBF16Err and BF16Ratios are the same for
	// PyTorch's step under bf16 autocast (RowOptions.BF16).
	PyTorchBF16    *PyTorchResult
	PyTorchBF16Err error
	BF16Ratios     []float64
	// F32 is synthgen's float32 step with 2 workers beside a bf16 row
	// (RowOptions.GoBF16; nil otherwise), and F32Ratios each round's
	// bf16 (2 workers) / float32 (2 workers) tokens/s.
	F32       *StepResult
	F32Ratios []float64
}

// F32Ratio is the median of the rounds' bf16 / float32 ratios, 0 without
// the float32 column.
func (r Row) F32Ratio() float64 { return median(r.F32Ratios) }

// BF16Ratio is the median of the rounds' ratios against PyTorch's bf16
// autocast step, 0 without it.
func (r Row) BF16Ratio() float64 { return median(r.BF16Ratios) }

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
// of the same model when o.PyTorch is set (float32, then with o.BF16 under
// bf16 autocast). A PyTorch failure is kept in the row (PyTorchErr,
// PyTorchBF16Err) and ends that column's measurements; a synthgen failure
// or ctx's end is the error.
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
	var f32Runs []StepResult
	var pt, bf ptColumn
	bf.bf16 = true
	for range o.Rounds {
		for i, w := range []int{1, 2} {
			res, err := MeasureStepsChildPrecision(ctx, o.Exe, name, o.GoBF16, r.Batch, w, o.MinSteps, o.MinTime)
			if err != nil {
				return Row{}, err
			}
			goRuns[i] = append(goRuns[i], res)
		}
		if o.GoBF16 {
			res, err := MeasureStepsChildPrecision(ctx, o.Exe, name, false, r.Batch, 2, o.MinSteps, o.MinTime)
			if err != nil {
				return Row{}, err
			}
			f32Runs = append(f32Runs, res)
			r.F32Ratios = append(r.F32Ratios, goRuns[1][len(goRuns[1])-1].TokensPerSec/res.TokensPerSec)
		}
		if o.PyTorch == nil {
			continue
		}
		last := goRuns[1][len(goRuns[1])-1].TokensPerSec
		cols := []*ptColumn{&pt}
		if o.BF16 {
			cols = append(cols, &bf)
		}
		for _, c := range cols {
			if err := c.measure(ctx, o.PyTorch, s, r.Batch, last); err != nil {
				return Row{}, fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	for i := range r.Go {
		r.Go[i] = mergeSteps(goRuns[i])
	}
	if len(f32Runs) > 0 {
		f := mergeSteps(f32Runs)
		r.F32 = &f
	}
	r.PyTorch, r.Ratios, r.PyTorchErr = pt.result()
	r.PyTorchBF16, r.BF16Ratios, r.PyTorchBF16Err = bf.result()
	return r, nil
}

// ptColumn gathers one PyTorch column of a row over the rounds: float32
// or bf16 autocast. Its first failure ends its measurements and is kept.
type ptColumn struct {
	bf16   bool
	runs   []PyTorchResult
	ratios []float64
	err    error
}

// measure runs one round of the column, goTPS being the round's synthgen
// (2 workers) rate; only ctx's end is an error.
func (c *ptColumn) measure(ctx context.Context, p *PyTorch, s specs.Spec, batch int, goTPS float64) error {
	if c.err != nil {
		return nil
	}
	res, err := p.Step(ctx, s, batch, 2, c.bf16)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.err = err
		return nil
	}
	if !(res.TokensPerSec > 0) {
		c.err = fmt.Errorf("pytorch %s: %v tokens/s", s.Name, res.TokensPerSec)
		return nil
	}
	c.runs = append(c.runs, res)
	c.ratios = append(c.ratios, goTPS/res.TokensPerSec)
	return nil
}

// result is the column's merged figures, or its error and no ratios.
func (c *ptColumn) result() (*PyTorchResult, []float64, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	if len(c.runs) == 0 {
		return nil, nil, nil
	}
	return mergePyTorch(c.runs), c.ratios, nil
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
