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
	"math"
	"math/rand/v2"
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

// aftFlops is the nominal work of one call, 0 when no convention applies.
func aftFlops(op catalog.Op, cfg catalog.Config, t int) float64 {
	tt, dh := float64(t), float64(cfg.DH)
	switch op.Kind {
	case catalog.AFTFull:
		return 4 * tt * tt * dh
	case catalog.AFTFullBack:
		return 8 * tt * tt * dh
	case catalog.Linear:
		return 4 * tt * dh * dh
	case catalog.LinearBack:
		return 12 * tt * dh * dh
	}
	return 0
}

// aftArgs allocates every slice argument of a spec's kernels at full
// length n, with inputs of ordinary size (positive features for linear
// attention), and fills the statistics the backward reads by running the Go
// forward at length t.
func aftArgs(ops []catalog.Op, set kernels.Set, n, t int) map[string][]float32 {
	r := rand.New(rand.NewPCG(3, 4))
	a := map[string][]float32{}
	for _, op := range ops {
		for _, p := range op.Slices {
			if _, ok := a[p.Name]; !ok {
				a[p.Name] = randSlice(r, p.Shape.Need(n), 1)
			}
		}
	}
	for _, name := range []string{"fq", "fk"} {
		for i, x := range a[name] {
			a[name][i] = float32(math.Abs(float64(x))) + 0.1
		}
	}
	for _, op := range ops {
		if fn := kernelOf(set, op.Field); fn != nil && (op.Kind == catalog.AFTFull || op.Kind == catalog.AFTLocal ||
			op.Kind == catalog.AFTConv || op.Kind == catalog.AFTSimple || op.Kind == catalog.Linear) {
			bindAFT(op, fn, t, a)()
		}
	}
	return a
}

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
			a := aftArgs(ops, sets[0], spec.N, t)
			for _, op := range ops {
				for _, s := range sets {
					fn := kernelOf(s, op.Field)
					if fn == nil {
						continue
					}
					run := bindAFT(op, fn, t, a)
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
						if fl := aftFlops(op, cfg, t); fl > 0 {
							reportFlops(b, Case{Flops: fl, Executed: fl})
						}
					})
				}
			}
		}
	}
}
