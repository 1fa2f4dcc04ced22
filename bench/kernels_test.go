// Package bench holds synthgen's benchmarks: every generated kernel of a
// spec on each instruction set this CPU has, next to the plain Go a user
// would write without synthgen, reported in GFLOP/s.
//
//	go test ./bench -run '^$' -bench Kernels -count 6 | tee new.txt
//	benchstat -col /impl new.txt
//
// FLOPs are counted nominally, as for a dense (unmasked) computation, so that
// figures compare with dense libraries' (PyTorch's softmax(QKᵀ)·V counts
// 2·t²·dh): the causal kernels execute about half of them. Convention per
// kernel kind is in flops below.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/gen/asmgen"
	"github.com/synthgen/synthgen/gen/catalog"
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

// flops is the nominal floating-point work of one call at length t.
func flops(op catalog.Op, cfg catalog.Config, t int) float64 {
	tt := float64(t) * float64(t)
	switch op.Kind {
	case catalog.SoftmaxValue:
		return 2 * tt * float64(cfg.DH) // A·V
	case catalog.SoftmaxValueBack:
		return 4 * tt * float64(cfg.DH) // Aᵀ·dY and dY·Vᵀ
	case catalog.Product, catalog.ProductBackX, catalog.ProductBackW:
		return 2 * tt * float64(op.W)
	case catalog.Tile:
		return tt
	case catalog.TileBack:
		return 4 * tt
	case catalog.TriScale:
		return tt
	case catalog.TriAxpy, catalog.TriDot:
		return 2 * tt
	}
	return 0
}

func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (r.Float32()*2 - 1) * scale
	}
	return s
}

// args allocates an op's slice arguments at full length N.
func args(op catalog.Op, n int) map[string][]float32 {
	r := rand.New(rand.NewPCG(1, 2))
	out := map[string][]float32{}
	for _, p := range op.Slices {
		out[p.Name] = randSlice(r, p.Shape.Need(n), 1)
	}
	return out
}

// bind returns a closure that runs kernel fn (a field of kernels.Set) of
// kind op.Kind once on the prepared arguments.
func bind(op catalog.Op, fn any, t int, a map[string][]float32) func() {
	switch f := fn.(type) {
	case kernels.SoftmaxValueFunc:
		return func() { f(t, a["b"], a["a"], a["v"], a["y"]) }
	case kernels.SoftmaxValueBackFunc:
		return func() { f(t, a["a"], a["v"], a["dy"], a["db"], a["dv"]) }
	case kernels.ProductFunc:
		return func() { f(t, a["x"], a["w"], a["bias"], a["c"], 0.125) }
	case kernels.ProductBackXFunc:
		return func() { f(t, a["dc"], a["w"], a["dx"], 0.125) }
	case kernels.ProductBackWFunc:
		return func() { f(t, a["dc"], a["x"], a["dw"], a["dbias"], 0.125) }
	case kernels.TileFunc:
		return func() { f(t, a["fa"], a["fb"], a["c"]) }
	case kernels.TileBackFunc:
		return func() { f(t, a["dc"], a["fa"], a["fb"], a["dfa"], a["dfb"]) }
	case kernels.TriScaleFunc:
		return func() { f(t, 0.5, a["x"], a["y"]) }
	case kernels.TriAxpyFunc:
		return func() { f(t, 1e-7, a["x"], a["y"]) }
	case kernels.TriDotFunc:
		return func() { sink = f(t, a["x"], a["y"]) }
	}
	panic(fmt.Sprintf("bench: kernel %s has unknown type %T", op.Field, fn))
}

var sink float32

// kernelOf returns set s's implementation of field, or nil.
func kernelOf(s kernels.Set, field string) any {
	v := reflect.ValueOf(s).FieldByName(field)
	if !v.IsValid() || v.IsNil() {
		return nil
	}
	return v.Interface()
}

func reportFlops(b *testing.B, perOp float64) {
	sec := b.Elapsed().Seconds()
	if sec <= 0 {
		return
	}
	g := perOp * float64(b.N) / sec / 1e9
	b.ReportMetric(g, "GFLOP/s")
	if p := FMAPeak(); p > 0 {
		b.ReportMetric(100*g/p, "%peak")
	}
}

// BenchmarkKernels runs every kernel of the bench specs on every level this
// CPU has, at t = N, plus the plain-Go triple loops of the softmax-value
// forward and backward (impl=plain) for comparison.
func BenchmarkKernels(b *testing.B) {
	for _, name := range benchSpecs() {
		spec, err := kernels.Spec(name)
		if err != nil {
			b.Fatal(err)
		}
		sets, err := kernels.Sets(name)
		if err != nil {
			b.Fatal(err)
		}
		cfg := catalog.ConfigOf(&spec)
		t := spec.N
		for _, op := range catalog.Ops(&spec) {
			a := args(op, spec.N)
			if op.Kind == catalog.SoftmaxValueBack {
				prepareProbabilities(a["a"], spec.N, t)
			}
			for _, s := range sets {
				fn := kernelOf(s, op.Field)
				if fn == nil {
					continue
				}
				run := bind(op, fn, t, a)
				b.Run(fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=%s", name, t, cfg.DH, op.Field, s.ISA), func(b *testing.B) {
					for b.Loop() {
						run()
					}
					reportFlops(b, flops(op, cfg, t))
				})
			}
			switch op.Kind {
			case catalog.SoftmaxValue:
				b.Run(fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=plain", name, t, cfg.DH, op.Field), func(b *testing.B) {
					for b.Loop() {
						plainSoftmaxValue(t, spec.N, spec.D, cfg.DH, a["b"], a["a"], a["v"], a["y"])
					}
					reportFlops(b, flops(op, cfg, t))
				})
			case catalog.SoftmaxValueBack:
				b.Run(fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=plain", name, t, cfg.DH, op.Field), func(b *testing.B) {
					for b.Loop() {
						plainSoftmaxValueBack(t, spec.N, spec.D, cfg.DH, a["a"], a["v"], a["dy"], a["db"], a["dv"])
					}
					reportFlops(b, flops(op, cfg, t))
				})
			}
		}
	}
}

// prepareProbabilities turns random values into causal softmax rows.
func prepareProbabilities(a []float32, n, t int) {
	for i := 0; i < t; i++ {
		var s float32
		for j := 0; j <= i; j++ {
			a[i*n+j] = float32(math.Abs(float64(a[i*n+j])))
			s += a[i*n+j]
		}
		for j := 0; j <= i; j++ {
			a[i*n+j] /= s
		}
	}
}

// plainSoftmaxValue is the forward as a Go programmer writes it without
// synthgen: a softmax per row and a triple loop for A·V.
func plainSoftmaxValue(t, n, d, dh int, b, a, v, y []float32) {
	for i := 0; i < t; i++ {
		m := float32(math.Inf(-1))
		for j := 0; j <= i; j++ {
			m = max(m, b[i*n+j])
		}
		var s float32
		for j := 0; j <= i; j++ {
			e := float32(math.Exp(float64(b[i*n+j] - m)))
			a[i*n+j] = e
			s += e
		}
		for j := 0; j <= i; j++ {
			a[i*n+j] /= s
		}
		for c := 0; c < dh; c++ {
			var acc float32
			for j := 0; j <= i; j++ {
				acc += a[i*n+j] * v[j*d+c]
			}
			y[i*d+c] = acc
		}
	}
}

// plainSoftmaxValueBack is the backward written the same way.
func plainSoftmaxValueBack(t, n, d, dh int, a, v, dy, db, dv []float32) {
	for j := 0; j < t; j++ {
		for c := 0; c < dh; c++ {
			var acc float32
			for i := j; i < t; i++ {
				acc += a[i*n+j] * dy[i*d+c]
			}
			dv[j*d+c] = acc
		}
	}
	g := make([]float32, t)
	for i := 0; i < t; i++ {
		var dot float32
		for j := 0; j <= i; j++ {
			var acc float32
			for c := 0; c < dh; c++ {
				acc += dy[i*d+c] * v[j*d+c]
			}
			g[j] = acc
			dot += acc * a[i*n+j]
		}
		for j := 0; j <= i; j++ {
			db[i*n+j] = a[i*n+j] * (g[j] - dot)
		}
	}
}

// BenchmarkFMAPeak reports this core's measured FMA peak, the 100% of %peak.
func BenchmarkFMAPeak(b *testing.B) {
	lanes, run := peakKernel()
	if run == nil {
		b.Skip("no AVX2 or AVX-512 on this CPU (or purego build)")
	}
	const iters = 1 << 16
	for b.Loop() {
		run(iters)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)*iters*asmgen.PeakChains*float64(lanes)*2/sec/1e9, "GFLOP/s")
}
