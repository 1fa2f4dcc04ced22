// Package kernelbench is what the kernel benchmarks of package kerneltest
// (which every generated package's tests use) and of the benchmark suite
// (package bench) share: a benchmarked case and its rates against this
// core's measured FMA peak, a kernel's benchmark arguments, and the linear
// layers' products on a set's GEMM micro-kernel. It depends on the kernel
// contract, the catalog and runtime/mat only, so that a generated
// package's test binary does not link the suite's comparisons.
package kernelbench

import (
	"math"
	"math/rand/v2"
	"reflect"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// Case is one benchmarked computation.
type Case struct {
	Name  string  // key=value path, e.g. spec=mid/n=256/dh=64/kernel=SoftmaxValue/impl=avx512
	Flops float64 // nominal floating-point work of one Run (dense counting)
	// Executed is the work the kernel really does: for the causal kernels
	// about half of Flops. %peak is computed from it.
	Executed float64
	Run      func()
}

// Rates returns the nominal GFLOP/s of n runs of c that took sec seconds,
// and the percentage of this core's FMA peak (FMAPeak) the executed FLOPs
// reach (0 when the peak is unknown); both 0 when c has no FLOP count.
func (c Case) Rates(n int, sec float64) (gflops, pctPeak float64) {
	if sec <= 0 || c.Flops <= 0 {
		return 0, 0
	}
	gflops = c.Flops * float64(n) / sec / 1e9
	if p := FMAPeak(); p > 0 {
		pctPeak = 100 * c.Executed * float64(n) / sec / 1e9 / p
	}
	return gflops, pctPeak
}

// Sink keeps results of kernels that return a value alive.
var Sink float32

// KernelOf returns set s's implementation of kernel field (a function of
// one of the kernels.*Func types), or nil when s does not provide it.
func KernelOf(s kernels.Set, field string) any {
	v := reflect.ValueOf(s).FieldByName(field)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return nil
	}
	return v.Interface()
}

// RandSlice returns n deterministic values of r in [−scale, scale].
func RandSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (r.Float32()*2 - 1) * scale
	}
	return s
}

// Args returns the arguments the benchmarks call op with at length t
// (rows for the row-wise kernels): every slice argument of op allocated at
// its length for t and filled with deterministic values in [−1, 1], then
// made what the kernel expects: probabilities for the softmax-value
// backward, positive features for linear attention, a log-sum-exp above
// every logit for the cross-entropy's backward, non-negative second
// moments for AdamW, positive denominators for AFTQuot and AFTQuotBack, σ ≡ 1 for
// GateBack. For a backward kernel whose forward writes statistics it reads
// (the catalog entry's Forward: the attention-free and linear attention
// kernels, LayerNorm), the forward of set ref runs on the arguments first
// when ref has it.
func Args(spec specs.Spec, op catalog.Op, ref kernels.Set, t int) map[string][]float32 {
	r := rand.New(rand.NewPCG(1, 2))
	a := map[string][]float32{}
	for _, p := range op.Slices {
		a[p.Name] = RandSlice(r, p.Shape.Need(t), 1)
	}
	switch op.Kind {
	case catalog.SoftmaxValueBack, catalog.SoftmaxRowsBack:
		probabilities(a["a"], spec.N, t, spec.Bidirectional)
	case catalog.Linear, catalog.LinearBack:
		for _, name := range []string{"fq", "fk"} {
			for i, x := range a[name] {
				a[name][i] = float32(math.Abs(float64(x))) + 0.1
			}
		}
	case catalog.SoftmaxScale:
		for i := range a["lse"] {
			a["lse"][i] = 8 // above every logit (|x| < 4.5)
		}
	case catalog.AdamW:
		for i, x := range a["v"] {
			a["v"][i] = x * x * 1e-4
		}
	case catalog.AFTQuotBack, catalog.AFTQuot: // denominators are positive
		for i, x := range a["den"] {
			a["den"][i] = float32(math.Abs(float64(x))) + 0.5
		}
	case catalog.GateBack:
		// σ ≡ 1: the benchmark's repeated calls then leave dy as it is,
		// where σ < 1 would shrink it call after call into subnormals.
		for i := range a["q"] {
			a["q"][i] = 1
		}
	}
	fwdKind := op.Entry().Forward
	if fwdKind == catalog.NoKind {
		return a
	}
	for _, fwd := range catalog.Ops(&spec) {
		if fwd.Kind != fwdKind {
			continue
		}
		for _, p := range fwd.Slices {
			if _, ok := a[p.Name]; !ok {
				a[p.Name] = RandSlice(r, p.Shape.Need(t), 1)
			}
		}
		if run := fwd.Bind(KernelOf(ref, fwd.Field), t, a, nil); run != nil {
			run()
		}
	}
	return a
}

// probabilities turns random values into softmax rows: causal (row i has
// i+1 keys), or of all t keys for a bidirectional spec.
func probabilities(a []float32, n, t int, bidi bool) {
	for i := 0; i < t; i++ {
		keys := i + 1
		if bidi {
			keys = t
		}
		var s float32
		for j := 0; j < keys; j++ {
			a[i*n+j] = float32(math.Abs(float64(a[i*n+j]))) + 1e-3
			s += a[i*n+j]
		}
		for j := 0; j < keys; j++ {
			a[i*n+j] /= s
		}
	}
}
