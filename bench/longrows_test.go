package bench

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/kernels"
)

// gapSpecs are the short-row and long-row specs BenchmarkLongRows compares;
// SYNTHGEN_GAP_SPECS=short,long overrides.
func gapSpecs() (short, long string) {
	if v := os.Getenv("SYNTHGEN_GAP_SPECS"); v != "" {
		if s, l, ok := strings.Cut(v, ","); ok {
			return s, l
		}
	}
	return "mid", "long2048_random"
}

// findCase returns the case of cases for kernel field at level impl.
func findCase(cases []Case, field, impl string) (Case, bool) {
	suffix := "/kernel=" + field + "/impl=" + impl
	for _, c := range cases {
		if strings.HasSuffix(c.Name, suffix) {
			return c, true
		}
	}
	return Case{}, false
}

// BenchmarkLongRows measures the softmax-value kernels at long rows against
// the same kernels at short rows in one interleaved run: each iteration
// calls the long spec's kernel once, then the short spec's as many times
// as make the same executed work, and times the two parts apart. Both
// then run on the same machine at the same moments (its clock, and what
// its neighbours do to memory and L3), and the difference of their %peak,
// reported as gap-pts, is not one run's conditions against another's, as
// it is between two separate benchmarks on a shared machine.
//
//	go test ./bench -run '^$' -bench LongRows -count 6
//
// The default pair is mid (N 256) and long2048_random (N 2048, the same
// head width 64).
func BenchmarkLongRows(b *testing.B) {
	shortName, longName := gapSpecs()
	short, err := KernelCases(shortName)
	if err != nil {
		b.Fatal(err)
	}
	long, err := KernelCases(longName)
	if err != nil {
		b.Fatal(err)
	}
	for _, field := range []string{"SoftmaxValue", "SoftmaxValueBack"} {
		for _, isa := range []kernels.ISA{kernels.AVX512, kernels.AVX2} {
			sc, ok1 := findCase(short, field, isa.String())
			lc, ok2 := findCase(long, field, isa.String())
			if !ok1 || !ok2 {
				continue // a level this CPU or build lacks
			}
			b.Run("kernel="+field+"/impl="+isa.String(), func(b *testing.B) {
				reps := max(1, int(math.Round(lc.Executed/sc.Executed)))
				var tl, ts time.Duration
				for b.Loop() {
					t0 := time.Now()
					lc.Run()
					t1 := time.Now()
					for range reps {
						sc.Run()
					}
					tl += t1.Sub(t0)
					ts += time.Since(t1)
				}
				_, pl := lc.Rates(b.N, tl.Seconds())
				_, ps := sc.Rates(b.N*reps, ts.Seconds())
				if pl <= 0 || ps <= 0 {
					return // no measured peak (no FMA level)
				}
				b.ReportMetric(ps, "short-%peak")
				b.ReportMetric(pl, "long-%peak")
				b.ReportMetric(ps-pl, "gap-pts")
			})
		}
	}
}
