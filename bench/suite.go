// Package bench is synthgen's benchmark suite: every generated kernel of a
// spec on each instruction set this CPU has, next to what a Go user writes
// without synthgen (plain loops, and gonum's blas32.Gemm with a plain Go
// softmax), the training step per spec, and the FMA peak all figures are a
// percentage of. The benchmarks (go test ./bench -bench .) and
// `synth bench` both run the cases defined here.
//
// GFLOP/s counts FLOPs nominally, as for a dense (unmasked) computation,
// so that figures compare with dense libraries' (PyTorch's softmax(QKᵀ)·V
// counts 2·t²·dh): it is a time ratio against them. The causal kernels
// execute about half of those FLOPs, and %peak — how much of this core's
// measured FMA peak a kernel uses — is computed from the FLOPs executed
// (the dense gonum products execute all of them). The convention per
// kernel kind is in Flops.
package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
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

// Flops is the nominal floating-point work of one call of op at length t,
// 0 for a kernel without a dense convention (the row-wise kernels, the
// GEMM micro-kernel, and aft_local, aft_conv and aft_simple, which are
// measured in elements per second). aft_full counts the two [t,t]×[t,dh]
// products of its dense form exp(w)·(exp(K)⊙V) and exp(w)·exp(K)
// (4·t²·dh, the backward 8·t²·dh); linear attention its state updates and
// reads (4·t·dh² forward, 12·t·dh² backward).
func Flops(op catalog.Op, cfg catalog.Config, t int) float64 {
	tt := float64(t) * float64(t)
	dh := float64(cfg.DH)
	switch op.Kind {
	case catalog.SoftmaxValue:
		return 2 * tt * dh // A·V
	case catalog.SoftmaxValueBack:
		return 4 * tt * dh // Aᵀ·dY and dY·Vᵀ
	case catalog.Product, catalog.ProductBackX, catalog.ProductBackW:
		return 2 * tt * float64(op.W)
	case catalog.Tile, catalog.TriScale:
		return tt
	case catalog.TileBack:
		return 4 * tt
	case catalog.TriAxpy, catalog.TriDot:
		return 2 * tt
	case catalog.AFTFull:
		return 4 * tt * dh
	case catalog.AFTFullBack:
		return 8 * tt * dh
	case catalog.Linear:
		return 4 * float64(t) * dh * dh
	case catalog.LinearBack:
		return 12 * float64(t) * dh * dh
	}
	return 0
}

// Executed is the floating-point work one call of op at length t really
// does, which %peak is computed from: Flops, less the masked half for the
// causal attention kernels (the attention-free ones count Flops whole).
func Executed(op catalog.Op, cfg catalog.Config, t int) float64 {
	f := Flops(op, cfg, t)
	if attentionKind(op.Kind) && t > 0 {
		return f * float64(t+1) / float64(2*t) // the causal triangle's share
	}
	return f
}

// attentionKind reports whether k is one of the Synthesizer attention
// kernels (softmax-value, the logit products, the triangle operations)
// that KernelCases benchmarks.
func attentionKind(k catalog.Kind) bool {
	switch k {
	case catalog.SoftmaxValue, catalog.SoftmaxValueBack, catalog.Product, catalog.ProductBackX, catalog.ProductBackW,
		catalog.Tile, catalog.TileBack, catalog.TriScale, catalog.TriAxpy, catalog.TriDot:
		return true
	}
	return false
}

// RowElems is the number of elements one call of row-wise kernel op on
// rows rows processes: rows·D (LayerNorm), rows·FFN (GELU), rows·Vocab
// (the cross-entropy's softmax) or rows floats (the Flat kinds: AdamW's
// parameters, Exp, the gate).
func RowElems(op catalog.Op, cfg catalog.Config, rows int) float64 {
	switch {
	case op.Kind == catalog.Gelu || op.Kind == catalog.GeluBack:
		return float64(rows * cfg.FFN)
	case op.Kind == catalog.SoftmaxStats || op.Kind == catalog.SoftmaxScale:
		return float64(rows * cfg.Vocab)
	case op.Kind.Flat():
		return float64(rows)
	}
	return float64(rows * cfg.D)
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

func randSlice(r *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (r.Float32()*2 - 1) * scale
	}
	return s
}

// KernelCases returns, for every kernel of spec name at t = N, one case per
// instruction set this CPU runs (impl=go|avx2|avx512), plus impl=plain
// (loops as a Go programmer writes them) and impl=gonum (blas32.Gemm with
// a plain softmax) for the softmax-value forward and backward.
func KernelCases(name string) ([]Case, error) {
	spec, err := kernels.Spec(name)
	if err != nil {
		return nil, err
	}
	sets, err := kernels.Sets(name)
	if err != nil {
		return nil, err
	}
	cfg := catalog.ConfigOf(&spec)
	t := spec.N
	var out []Case
	for _, op := range catalog.Ops(&spec) {
		if !attentionKind(op.Kind) {
			continue
		}
		a := Args(spec, op, kernels.Set{}, t)
		prefix := fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=", name, t, cfg.DH, op.Field)
		flops, executed := Flops(op, cfg, t), Executed(op, cfg, t)
		for _, s := range sets {
			run := runner(Bind(op, KernelOf(s, op.Field), t, a, nil))
			if run == nil {
				continue
			}
			out = append(out, Case{prefix + s.ISA.String(), flops, executed, run})
		}
		n, d, dh := spec.N, spec.D, cfg.DH
		switch op.Kind {
		case catalog.SoftmaxValue:
			out = append(out,
				Case{prefix + "plain", flops, executed, func() { plainSoftmaxValue(t, n, d, dh, a["b"], a["a"], a["v"], a["y"]) }},
				Case{prefix + "gonum", flops, flops, func() { gonumSoftmaxValue(t, n, d, dh, a["b"], a["a"], a["v"], a["y"]) }})
		case catalog.SoftmaxValueBack:
			g := make([]float32, t*n)
			out = append(out,
				Case{prefix + "plain", flops, executed, func() { plainSoftmaxValueBack(t, n, d, dh, a["a"], a["v"], a["dy"], a["db"], a["dv"]) }},
				Case{prefix + "gonum", flops, flops, func() { gonumSoftmaxValueBack(t, n, d, dh, a["a"], a["v"], a["dy"], a["db"], a["dv"], g) }})
		}
	}
	return out, nil
}

// Sink keeps results of kernels that return a value alive.
var Sink float32

// runner turns a bound kernel into a benchmark body, keeping its result
// alive in Sink; nil stays nil.
func runner(f func() float32) func() {
	if f == nil {
		return nil
	}
	return func() { Sink = f() }
}

// Bind returns a closure that calls fn, op's kernel (a function of the
// kernels.*Func type of its kind, as KernelOf returns it), once at length t
// (rows for the row-wise kernels) on the slices of a, by parameter name,
// and returns its result (0 for kernels without one). sc gives the scalar
// arguments by name (scale, alpha, and AdamW's decay, gscale, b1, c1, b2,
// c2, eps, step, rbc2); those it lacks take the benchmarks' values. Bind
// returns nil for the GEMM micro-kernel, whose arguments are not slices of
// a fixed shape, and for a nil fn or one of another type.
func Bind(op catalog.Op, fn any, t int, a map[string][]float32, sc map[string]float32) func() float32 {
	scalar := func(name string, def float32) float32 {
		if v, ok := sc[name]; ok {
			return v
		}
		return def
	}
	switch f := fn.(type) {
	case kernels.SoftmaxValueFunc:
		return func() float32 { f(t, a["b"], a["a"], a["v"], a["y"]); return 0 }
	case kernels.SoftmaxValueBackFunc:
		return func() float32 { f(t, a["a"], a["v"], a["dy"], a["db"], a["dv"]); return 0 }
	case kernels.ProductFunc:
		scale := scalar("scale", 0.125)
		return func() float32 { f(t, a["x"], a["w"], a["bias"], a["c"], scale); return 0 }
	case kernels.ProductBackXFunc:
		scale := scalar("scale", 0.125)
		return func() float32 { f(t, a["dc"], a["w"], a["dx"], scale); return 0 }
	case kernels.ProductBackWFunc:
		scale := scalar("scale", 0.125)
		return func() float32 { f(t, a["dc"], a["x"], a["dw"], a["dbias"], scale); return 0 }
	case kernels.TileFunc:
		return func() float32 { f(t, a["fa"], a["fb"], a["c"]); return 0 }
	case kernels.TileBackFunc:
		return func() float32 { f(t, a["dc"], a["fa"], a["fb"], a["dfa"], a["dfb"]); return 0 }
	case kernels.TriScaleFunc:
		alpha := scalar("alpha", 0.5)
		return func() float32 { f(t, alpha, a["x"], a["y"]); return 0 }
	case kernels.TriAxpyFunc:
		alpha := scalar("alpha", 1e-7)
		return func() float32 { f(t, alpha, a["x"], a["y"]); return 0 }
	case kernels.TriDotFunc:
		return func() float32 { return f(t, a["x"], a["y"]) }
	case kernels.AFTFullFunc:
		return func() float32 { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"]); return 0 }
	case kernels.AFTFullBackFunc:
		return func() float32 {
			f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["dw"])
			return 0
		}
	case kernels.AFTLocalFunc:
		return func() float32 { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"]); return 0 }
	case kernels.AFTLocalBackFunc:
		return func() float32 {
			f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["dw"])
			return 0
		}
	case kernels.AFTConvFunc:
		return func() float32 { f(t, a["k"], a["v"], a["u"], a["z"], a["m"], a["rd"]); return 0 }
	case kernels.AFTConvBackFunc:
		return func() float32 {
			f(t, a["k"], a["v"], a["u"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["du"])
			return 0
		}
	case kernels.AFTSimpleFunc:
		return func() float32 { f(t, a["k"], a["v"], a["z"], a["m"], a["rd"]); return 0 }
	case kernels.AFTSimpleBackFunc:
		return func() float32 { f(t, a["k"], a["v"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"]); return 0 }
	case kernels.LinearFunc:
		return func() float32 { f(t, a["fq"], a["fk"], a["v"], a["y"], a["rd"]); return 0 }
	case kernels.LinearBackFunc:
		return func() float32 {
			f(t, a["fq"], a["fk"], a["v"], a["y"], a["rd"], a["dy"], a["dfq"], a["dfk"], a["dv"])
			return 0
		}
	case kernels.LayerNormFunc:
		return func() float32 { f(t, a["x"], a["gamma"], a["beta"], a["y"], a["mu"], a["rs"]); return 0 }
	case kernels.LayerNormBackFunc:
		return func() float32 { f(t, a["dy"], a["x"], a["mu"], a["rs"], a["gamma"], a["dx"]); return 0 }
	case kernels.LayerNormGradFunc:
		return func() float32 { f(t, a["dy"], a["x"], a["mu"], a["rs"], a["dgamma"], a["dbeta"]); return 0 }
	case kernels.GeluFunc: // u becomes gelu'(u), in [−0.13, 1.13]: ordinary inputs again
		return func() float32 { f(t, a["u"], a["g"]); return 0 }
	case kernels.GeluBackFunc:
		return func() float32 { f(t, a["a"], a["b"]); return 0 }
	case kernels.SoftmaxStatsFunc:
		return func() float32 { f(t, a["x"], a["mx"], a["s"]); return 0 }
	case kernels.SoftmaxScaleFunc:
		scale := scalar("scale", 1/float32(max(t, 1)))
		return func() float32 { f(t, a["x"], a["lse"], a["y"], scale); return 0 }
	case kernels.ExpFunc: // x becomes e^x, then e^(e^x), …: from the second call on, 1 ≤ x ≤ e^88, as the clamp keeps it
		return func() float32 { f(t, a["x"]); return 0 }
	case kernels.GateFunc: // q becomes σ(q), then σ(σ(q)), …: from the second call on, ½ < q < 0.74
		return func() float32 { f(t, a["q"], a["z"], a["y"]); return 0 }
	case kernels.GateBackFunc: // Args makes σ ≡ 1, so dy keeps its values (no decay into subnormals)
		return func() float32 { f(t, a["dy"], a["q"], a["z"], a["dq"]); return 0 }
	case kernels.AFTFactorsFunc:
		return func() float32 { f(t, a["k"], a["kappa"], a["v"], a["kv"], a["ek"]); return 0 }
	case kernels.AFTQuotBackFunc:
		return func() float32 { f(t, a["dz"], a["z"], a["den"], a["dnum"], a["dden"]); return 0 }
	case kernels.AFTKVBackFunc:
		return func() float32 { f(t, a["ek"], a["v"], a["g1"], a["g2"], a["dk"], a["dv"]); return 0 }
	case kernels.AdamWFunc:
		k := func(name string) float32 { return scalar(name, AdamWScalars[name]) }
		decay, gscale, b1, c1, b2, c2, eps, step, rbc2 := k("decay"), k("gscale"), k("b1"), k("c1"), k("b2"), k("c2"), k("eps"), k("step"), k("rbc2")
		return func() float32 {
			f(t, a["p"], a["g"], a["m"], a["v"], decay, gscale, b1, c1, b2, c2, eps, step, rbc2)
			return 0
		}
	}
	return nil
}

// AdamWScalars are the constants the benchmarks (and Bind's defaults) pass
// the AdamW kernel: its update at step 3 with lr 1e-3, weight decay 0.1
// and a clipping factor of 0.7.
var AdamWScalars = map[string]float32{
	"decay": 1 - 1e-4, "gscale": 0.7, "b1": 0.9, "c1": 0.1, "b2": 0.95, "c2": 0.05,
	"eps": 1e-8, "step": float32(1e-3 / (1 - 0.9*0.9*0.9)), "rbc2": float32(1 / math.Sqrt(1-0.95*0.95*0.95)),
}

// Args returns the arguments the benchmarks call op with at length t
// (rows for the row-wise kernels): every slice argument of op allocated at
// its length for t and filled with deterministic values in [−1, 1], then
// made what the kernel expects: probabilities for the softmax-value
// backward, positive features for linear attention, a log-sum-exp above
// every logit for the cross-entropy's backward, non-negative second
// moments for AdamW, positive denominators for AFTQuotBack, σ ≡ 1 for
// GateBack. For a backward kernel whose forward writes statistics
// it reads (the attention-free and linear attention kernels, LayerNorm),
// the forward of set ref runs on the arguments first when ref has it.
func Args(spec specs.Spec, op catalog.Op, ref kernels.Set, t int) map[string][]float32 {
	r := rand.New(rand.NewPCG(1, 2))
	a := map[string][]float32{}
	for _, p := range op.Slices {
		a[p.Name] = randSlice(r, p.Shape.Need(t), 1)
	}
	switch op.Kind {
	case catalog.SoftmaxValueBack:
		probabilities(a["a"], spec.N, t)
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
	case catalog.AFTQuotBack: // denominators are positive
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
	fwdField := ""
	switch op.Kind {
	case catalog.AFTFullBack, catalog.AFTLocalBack, catalog.AFTConvBack, catalog.AFTSimpleBack, catalog.LinearBack:
		fwdField = strings.TrimSuffix(op.Field, "Back")
	case catalog.LayerNormBack, catalog.LayerNormGrad:
		fwdField = "LayerNorm"
	}
	if fwdField == "" {
		return a
	}
	for _, fwd := range catalog.Ops(&spec) {
		if fwd.Field != fwdField {
			continue
		}
		for _, p := range fwd.Slices {
			if _, ok := a[p.Name]; !ok {
				a[p.Name] = randSlice(r, p.Shape.Need(t), 1)
			}
		}
		if run := Bind(fwd, KernelOf(ref, fwdField), t, a, nil); run != nil {
			run()
		}
	}
	return a
}

// RowCase is one benchmarked call of a row-wise kernel (LayerNorm, GELU),
// measured in elements per second rather than FLOP/s.
type RowCase struct {
	Name  string  // key=value path, e.g. spec=mid/rows=1024/kernel=Gelu/impl=avx512
	Elems float64 // elements one Run processes: rows·D (LayerNorm), rows·FFN (GELU) or rows·Vocab (cross-entropy)
	Run   func()
}

// RowKernelCases returns, for every row-wise kernel of spec name at rows
// rows, one case per instruction set this CPU runs.
func RowKernelCases(name string, rows int) ([]RowCase, error) {
	spec, err := kernels.Spec(name)
	if err != nil {
		return nil, err
	}
	sets, err := kernels.Sets(name)
	if err != nil {
		return nil, err
	}
	cfg := catalog.ConfigOf(&spec)
	var out []RowCase
	for _, op := range catalog.Ops(&spec) {
		if !op.Kind.RowWise() || op.Kind.Flat() { // their own benchmarks (kerneltest)
			continue
		}
		var a map[string][]float32
		for _, s := range sets {
			if a == nil {
				a = Args(spec, op, s, rows) // sets[0] is the Go set
			}
			run := runner(Bind(op, KernelOf(s, op.Field), rows, a, nil))
			if run == nil {
				continue
			}
			out = append(out, RowCase{fmt.Sprintf("spec=%s/rows=%d/kernel=%s/impl=%s", name, rows, op.Field, s.ISA), RowElems(op, cfg, rows), run})
		}
	}
	return out, nil
}

// KernelOf returns set s's implementation of kernel field (a function of
// one of the kernels.*Func types), or nil when s does not provide it.
func KernelOf(s kernels.Set, field string) any {
	v := reflect.ValueOf(s).FieldByName(field)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return nil
	}
	return v.Interface()
}

// probabilities turns random values into causal softmax rows.
func probabilities(a []float32, n, t int) {
	for i := 0; i < t; i++ {
		var s float32
		for j := 0; j <= i; j++ {
			a[i*n+j] = float32(math.Abs(float64(a[i*n+j]))) + 1e-3
			s += a[i*n+j]
		}
		for j := 0; j <= i; j++ {
			a[i*n+j] /= s
		}
	}
}

// softmaxRows is the plain Go causal softmax of b into a.
func softmaxRows(t, n int, b, a []float32) {
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
		for j := i + 1; j < t; j++ {
			a[i*n+j] = 0 // a dense Gemm reads the masked part too
		}
	}
}

// plainSoftmaxValue is the forward as a Go programmer writes it without
// synthgen: a softmax per row and a triple loop for A·V.
func plainSoftmaxValue(t, n, d, dh int, b, a, v, y []float32) {
	softmaxRows(t, n, b, a)
	for i := 0; i < t; i++ {
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
	for i := 0; i < t; i++ {
		var dot float32
		for j := 0; j <= i; j++ {
			var acc float32
			for c := 0; c < dh; c++ {
				acc += dy[i*d+c] * v[j*d+c]
			}
			db[i*n+j] = acc
			dot += acc * a[i*n+j]
		}
		for j := 0; j <= i; j++ {
			db[i*n+j] = a[i*n+j] * (db[i*n+j] - dot)
		}
	}
}

func general(rows, cols, stride int, data []float32) blas32.General {
	return blas32.General{Rows: rows, Cols: cols, Stride: stride, Data: data[:(rows-1)*stride+cols]}
}

// gonumSoftmaxValue is the forward with gonum: plain softmax, then
// Y = A·V with blas32.Gemm.
func gonumSoftmaxValue(t, n, d, dh int, b, a, v, y []float32) {
	softmaxRows(t, n, b, a)
	blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, general(t, t, n, a), general(t, dh, d, v), 0, general(t, dh, d, y))
}

// gonumSoftmaxValueBack is the backward with gonum: dV = Aᵀ·dY and
// G = dY·Vᵀ with blas32.Gemm, then the softmax backward in plain Go.
func gonumSoftmaxValueBack(t, n, d, dh int, a, v, dy, db, dv, g []float32) {
	blas32.Gemm(blas.Trans, blas.NoTrans, 1, general(t, t, n, a), general(t, dh, d, dy), 0, general(t, dh, d, dv))
	blas32.Gemm(blas.NoTrans, blas.Trans, 1, general(t, dh, d, dy), general(t, dh, d, v), 0, general(t, t, n, g))
	for i := 0; i < t; i++ {
		var dot float32
		for j := 0; j <= i; j++ {
			dot += g[i*n+j] * a[i*n+j]
		}
		for j := 0; j <= i; j++ {
			db[i*n+j] = a[i*n+j] * (g[i*n+j] - dot)
		}
	}
}

// DefaultText is the text every Go installation ships, the default training data.
func DefaultText() ([]byte, error) {
	return os.ReadFile(filepath.Join(goruntime.GOROOT(), "src", "testdata", "Isaac.Newton-Opticks.txt"))
}

// TrainStep returns a function that runs one whole training step (batch
// sampling, forward, backward, clipping, AdamW) of spec name at the given
// batch with the given number of workers, and the tokens one step trains on.
// Its kernels are dispatched at Level() (the CPU's best, or SYNTHGEN_ISA's).
func TrainStep(name string, batch, workers int, text []byte) (step func() error, tokens int, err error) {
	l, err := kernels.Level()
	if err != nil {
		return nil, 0, err
	}
	return TrainStepAt(name, l, batch, workers, text)
}

// TrainStepAt is TrainStep with the kernels dispatched at level l or below.
func TrainStepAt(name string, l kernels.ISA, batch, workers int, text []byte) (step func() error, tokens int, err error) {
	k, err := kernels.LookupAt(name, l)
	if err != nil {
		return nil, 0, err
	}
	m, err := model.New(k.Spec, k, 1)
	if err != nil {
		return nil, 0, err
	}
	m.SetWorkers(workers)
	tr, err := train.New(m, text, train.DefaultConfig(1<<30, batch))
	if err != nil {
		return nil, 0, err
	}
	if err := tr.TrainStep(); err != nil { // sizes the arena
		return nil, 0, err
	}
	return tr.TrainStep, batch * k.Spec.N, nil
}

// TrainSpecs are the specs the training-step benchmark runs by default: the
// shipped specs of the shape PyTorch was measured at (n 128, d 128, 4
// heads, 4 layers).
func TrainSpecs() []string {
	var out []string
	for _, name := range kernels.Names() {
		s, err := kernels.Spec(name)
		if err == nil && s.N == 128 && s.D == 128 && s.Heads == 4 && s.Layers == 4 {
			out = append(out, name)
		}
	}
	return out
}
