package bench

// Benchmarks of the attention-free and linear-attention kernels on the
// bench-only specs of bench/specs (n 1024, d 128, 4 heads of width 32),
// generated into bench/generated so that the repository-wide kernel tests
// (whose float64 references are O(t²)) do not run them:
//
//	go run ./cmd/synthgen -spec bench/specs/aft_full_bench.json -out bench/generated/aft_full_bench   (etc.)
//	go test ./bench -run '^$' -bench AFT -count 6 | tee aft.txt
//	benchstat -col /impl aft.txt
//
// Every kernel runs one (sequence, head) at t = 256 and t = 1024 on each
// level this CPU has. Metrics: Gelem/s counts output elements (t·dh per
// call) for every kernel; GFLOP/s is reported where a dense convention
// exists: aft_full as the two [t,t]×[t,dh] products of its dense form
// exp(w)·(exp(K)⊙V) and exp(w)·exp(K) (4·t²·dh; the backward 8·t²·dh), and
// linear attention as its state updates and reads (4·t·dh² forward,
// 12·t·dh² backward).

import (
	"fmt"
	"testing"

	_ "github.com/synthgen/synthgen/bench/generated/aft_conv_bench"
	_ "github.com/synthgen/synthgen/bench/generated/aft_full_bench"
	_ "github.com/synthgen/synthgen/bench/generated/aft_local_bench"
	_ "github.com/synthgen/synthgen/bench/generated/aft_simple_bench"
	_ "github.com/synthgen/synthgen/bench/generated/linear_bench"
	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// aftBenchSpecs are the bench-only specs of BenchmarkAFT.
var aftBenchSpecs = []string{"aft_full_bench", "aft_local_bench", "aft_conv_bench", "aft_simple_bench", "linear_bench"}

// BenchmarkAFT runs every attention-free and linear-attention kernel of the
// bench specs on every level this CPU has, at t = 256 and t = 1024.
func BenchmarkAFT(b *testing.B) {
	for _, name := range aftBenchSpecs {
		spec, err := kernels.Spec(name)
		if err != nil {
			b.Fatal(err)
		}
		sets, err := kernels.Sets(name)
		if err != nil {
			b.Fatal(err)
		}
		cfg := catalog.ConfigOf(&spec)
		ops := catalog.Ops(&spec)
		for _, t := range []int{256, 1024} {
			for _, op := range ops {
				if !aftKind(op.Kind) {
					continue
				}
				a := Args(spec, op, sets[0], t) // the backward's statistics from the Go forward
				for _, s := range sets {
					run := runner(Bind(op, KernelOf(s, op.Field), t, a, nil))
					if run == nil {
						continue
					}
					b.Run(fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=%s", name, t, cfg.DH, op.Field, s.ISA), func(b *testing.B) {
						for b.Loop() {
							run()
						}
						if sec := b.Elapsed().Seconds(); sec > 0 {
							b.ReportMetric(float64(t*cfg.DH)*float64(b.N)/sec/1e9, "Gelem/s")
						}
						if fl := Flops(op, cfg, t); fl > 0 {
							reportFlops(b, Case{Flops: fl, Executed: Executed(op, cfg, t)})
						}
					})
				}
			}
		}
	}
}

// aftKind reports whether k is an attention-free or linear-attention
// kernel: a sequence kernel (not row-wise) outside the Synthesizer's causal
// attention, other than the GEMM micro-kernel.
func aftKind(k catalog.Kind) bool {
	return !k.RowWise() && !catalog.Of(k).Causal && k != catalog.GemmTile
}
