// Package trainstep measures whole training steps of a generated package's
// spec: the BenchmarkTrainStep of every generated kernels_test.go calls
// Benchmark, and the benchmark suite (package bench) builds its
// training-step table on At. It links the training runtime (runtime/train),
// which package kerneltest does not.
package trainstep

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/synthgen/synthgen/kerneltest"
	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
	"github.com/synthgen/synthgen/specs"
)

// DefaultText is the text every Go installation ships, the default
// training data.
func DefaultText() ([]byte, error) {
	return os.ReadFile(filepath.Join(goruntime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
}

// Batch is the batch the training-step measurements use at sequence length
// n: 16 sequences up to n 256, then 4096 tokens per step (n 512: 8, 1024:
// 4, 2048: 2), so that the long-context steps stay within a few GB.
func Batch(n int) int {
	if n <= 256 {
		return 16
	}
	return max(1, 4096/n)
}

// At returns a function that runs one whole training step (batch sampling,
// forward, backward, clipping, AdamW) of spec name, with its kernels
// dispatched at level l or below, at the given batch with the given number
// of workers, and the tokens one step trains on.
func At(name string, l kernels.ISA, batch, workers int, text []byte) (step func() error, tokens int, err error) {
	step, tokens, _, err = AtPrecision(name, l, false, batch, workers, text)
	return step, tokens, err
}

// AtPrecision is At with the linear layers' products in bf16 when bf is
// set, at the bf16 level training chooses (bf16.ForISA of the kernels'
// level: AMX, else AVX512-BF16), and returns that level ("f32" without
// bf); a CPU with neither is an error saying why.
func AtPrecision(name string, l kernels.ISA, bf bool, batch, workers int, text []byte) (step func() error, tokens int, level string, err error) {
	k, err := kernels.LookupAt(name, l)
	if err != nil {
		return nil, 0, "", err
	}
	m, err := model.New(k.Spec, k, 1)
	if err != nil {
		return nil, 0, "", err
	}
	level = "f32"
	if bf {
		bl, err := bf16.ForISA(k.ISA)
		if err != nil {
			return nil, 0, "", fmt.Errorf("bf16: %w", err)
		}
		kn, err := bf16.New(bl)
		if err != nil {
			return nil, 0, "", fmt.Errorf("bf16: %w", err)
		}
		m.SetBF16(kn)
		level = "bf16-" + bl.String()
	}
	m.SetWorkers(workers)
	tr, err := train.New(m, text, train.DefaultConfig(1<<30, batch))
	if err != nil {
		return nil, 0, "", err
	}
	if err := tr.TrainStep(); err != nil { // sizes the arena
		return nil, 0, "", err
	}
	return tr.TrainStep, batch * k.Spec.N, level, nil
}

// Benchmark measures whole training steps of spec (batch sampling,
// forward, backward, clipping, AdamW; At) at Batch (16 sequences up to n
// 256, then 4096 tokens) on the text every Go installation ships, with the
// kernels dispatched at each level this run allows and with 1 and
// GOMAXPROCS workers: sub-benchmarks batch=<b>/workers=<w>/isa=<level>,
// reporting tokens/s; a level this run cannot execute is skipped with the
// reason (kerneltest.Levels).
func Benchmark(b *testing.B, spec specs.Spec) {
	b.Helper()
	levels := kerneltest.Levels(b, spec)
	text, err := DefaultText()
	if err != nil {
		b.Skipf("no training text: %v", err)
	}
	batch := Batch(spec.N)
	workers := []int{1}
	if p := goruntime.GOMAXPROCS(0); p > 1 {
		workers = append(workers, p)
	}
	for _, l := range levels {
		for _, w := range workers {
			b.Run(fmt.Sprintf("batch=%d/workers=%d/isa=%s", batch, w, l.ISA), func(b *testing.B) {
				if l.Skip != "" {
					b.Skip(l.Skip)
				}
				step, tokens, err := At(spec.Name, l.ISA, batch, w, text)
				if err != nil {
					b.Fatalf("trainstep: %v", err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := step(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N*tokens)/b.Elapsed().Seconds(), "tokens/s")
			})
		}
	}
}
