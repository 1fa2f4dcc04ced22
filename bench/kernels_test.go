package bench

import (
	"fmt"
	"os"
	"strings"
	"testing"

	_ "github.com/synthgen/synthgen/generated/all"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// benchSpecs are the specs whose kernels BenchmarkKernels runs;
// SYNTHGEN_BENCH_SPECS (comma-separated) overrides.
func benchSpecs() []string {
	if v := os.Getenv("SYNTHGEN_BENCH_SPECS"); v != "" {
		return strings.Split(v, ",")
	}
	return []string{"mid"}
}

// reportFlops reports nominal GFLOP/s and the percentage of the measured
// FMA peak that the executed FLOPs reach.
func reportFlops(b *testing.B, c Case) {
	gflops, peak := c.Rates(b.N, b.Elapsed().Seconds())
	if gflops <= 0 {
		return
	}
	b.ReportMetric(gflops, "GFLOP/s")
	if peak > 0 {
		b.ReportMetric(peak, "%peak")
	}
}

// BenchmarkKernels runs every kernel of the bench specs (default mid: n 256,
// dh 64) at t = N on every level this CPU has, with the plain-Go and gonum
// versions of the softmax-value forward and backward in the same run.
//
//	go test ./bench -run '^$' -bench Kernels -count 6 | tee new.txt
//	benchstat -col /impl new.txt
func BenchmarkKernels(b *testing.B) {
	for _, name := range benchSpecs() {
		cases, err := KernelCases(name)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cases {
			b.Run(c.Name, func(b *testing.B) {
				for b.Loop() {
					c.Run()
				}
				reportFlops(b, c)
			})
		}
	}
}

// BenchmarkRowKernels runs the row-wise kernels (LayerNorm forward, input
// and parameter gradients, GELU forward and backward) of the bench specs
// on N rows at every level this CPU has, in Gelem/s (elements of the
// [rows, D] or [rows, FFN] matrix per second).
//
//	go test ./bench -run '^$' -bench RowKernels -count 6
func BenchmarkRowKernels(b *testing.B) {
	for _, name := range benchSpecs() {
		spec, err := kernels.Spec(name)
		if err != nil {
			b.Fatal(err)
		}
		cases, err := RowKernelCases(name, spec.N)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cases {
			b.Run(c.Name, func(b *testing.B) {
				for b.Loop() {
					c.Run()
				}
				if sec := b.Elapsed().Seconds(); sec > 0 {
					b.ReportMetric(c.Elems*float64(b.N)/sec/1e9, "Gelem/s")
				}
			})
		}
	}
}

// BenchmarkTrainStep measures whole training steps at StepBatch (16
// sequences up to n 256, 4096 tokens beyond) with 1 and 2 workers,
// reporting tokens/s; SYNTHGEN_TRAIN_SPECS (comma-separated) overrides the
// specs (the n 128 family; TableSpecs has them all). synth steps prints the
// same measurements with peak memory and PyTorch beside.
//
//	go test ./bench -run '^$' -bench TrainStep -count 6
func BenchmarkTrainStep(b *testing.B) {
	text, err := DefaultText()
	if err != nil {
		b.Skip(err)
	}
	names := TrainSpecs()
	if v := os.Getenv("SYNTHGEN_TRAIN_SPECS"); v != "" {
		names = strings.Split(v, ",")
	}
	for _, name := range names {
		spec, err := kernels.Spec(name)
		if err != nil {
			b.Fatal(err)
		}
		batch := StepBatch(spec.N)
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("spec=%s/batch=%d/workers=%d", name, batch, workers), func(b *testing.B) {
				step, tokens, err := TrainStep(name, batch, workers, text)
				if err != nil {
					b.Skipf("%s: %v", name, err)
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

// BenchmarkTrainStepPrecision measures whole training steps of the default
// spec (random) and mid with the linear layers' products in float32 and in
// bf16 (AMX, else AVX512-BF16; skipped with the reason on a CPU with
// neither), 2 workers, one sub-benchmark after the other in one run, so
// their tokens/s can be compared (SYNTHGEN_TRAIN_SPECS picks other specs).
//
//	go test ./bench -run '^$' -bench TrainStepPrecision -count 3
func BenchmarkTrainStepPrecision(b *testing.B) {
	text, err := DefaultText()
	if err != nil {
		b.Skip(err)
	}
	names := []string{"random", "mid"}
	if v := os.Getenv("SYNTHGEN_TRAIN_SPECS"); v != "" {
		names = strings.Split(v, ",")
	}
	for _, name := range names {
		spec, err := kernels.Spec(name)
		if err != nil {
			b.Fatal(err)
		}
		batch := StepBatch(spec.N)
		for _, bf := range []bool{false, true} {
			prec := "f32"
			if bf {
				prec = "bf16"
			}
			b.Run(fmt.Sprintf("spec=%s/batch=%d/precision=%s", name, batch, prec), func(b *testing.B) {
				step, tokens, level, err := TrainStepPrecision(name, bf, batch, 2, text)
				if err != nil {
					b.Skipf("%s: %v", name, err)
				}
				b.Logf("%s: %s", name, level)
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
