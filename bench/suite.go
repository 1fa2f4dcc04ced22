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

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/internal/kernelbench"
	"github.com/synthgen/synthgen/kerneltest/trainstep"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// Case is one benchmarked computation (see kernelbench.Case).
type Case = kernelbench.Case

// Flops is the nominal floating-point work of one call of op at length t,
// 0 for a kernel without a dense convention (the row-wise kernels, the
// GEMM micro-kernel, and aft_local, aft_conv and aft_simple, which are
// measured in elements per second). aft_full counts the two [t,t]×[t,dh]
// products of its dense form exp(w)·(exp(K)⊙V) and exp(w)·exp(K)
// (4·t²·dh, the backward 8·t²·dh); linear attention its state updates and
// reads (4·t·dh² forward, 12·t·dh² backward).
func Flops(op catalog.Op, cfg catalog.Config, t int) float64 { return op.Flops(cfg, t) }

// Executed is the floating-point work one call of op at length t really
// does, which %peak is computed from: Flops, less the masked half for the
// causal attention kernels (the catalog's Causal kinds; the attention-free
// ones count Flops whole).
func Executed(op catalog.Op, cfg catalog.Config, t int) float64 { return op.Executed(cfg, t) }

// RowElems is the number of elements one call of row-wise kernel op on
// rows rows processes: rows·D (LayerNorm), rows·FFN (GELU), rows·Vocab
// (the cross-entropy's softmax) or rows floats (the Flat kinds: AdamW's
// parameters, Exp, the gate).
func RowElems(op catalog.Op, cfg catalog.Config, rows int) float64 { return op.RowElems(rows) }

// FMAPeak measures this core's single-precision FMA peak in GFLOP/s (see
// kernelbench.FMAPeak), once per process.
func FMAPeak() float64 { return kernelbench.FMAPeak() }

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
		if !op.Entry().Causal {
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
			out = append(out, Case{Name: prefix + s.ISA.String(), Flops: flops, Executed: executed, Run: run})
		}
		n, d, dh := spec.N, spec.D, cfg.DH
		switch op.Kind {
		case catalog.SoftmaxValue:
			out = append(out,
				Case{Name: prefix + "plain", Flops: flops, Executed: executed, Run: func() { plainSoftmaxValue(t, n, d, dh, a["b"], a["a"], a["v"], a["y"]) }},
				Case{Name: prefix + "gonum", Flops: flops, Executed: flops, Run: func() { gonumSoftmaxValue(t, n, d, dh, a["b"], a["a"], a["v"], a["y"]) }})
		case catalog.SoftmaxValueBack:
			g := make([]float32, t*n)
			out = append(out,
				Case{Name: prefix + "plain", Flops: flops, Executed: executed, Run: func() { plainSoftmaxValueBack(t, n, d, dh, a["a"], a["v"], a["dy"], a["db"], a["dv"]) }},
				Case{Name: prefix + "gonum", Flops: flops, Executed: flops, Run: func() { gonumSoftmaxValueBack(t, n, d, dh, a["a"], a["v"], a["dy"], a["db"], a["dv"], g) }})
		}
	}
	return out, nil
}

// runner turns a bound kernel into a benchmark body, keeping its result
// alive in Sink; nil stays nil.
func runner(f func() float32) func() {
	if f == nil {
		return nil
	}
	return func() { kernelbench.Sink = f() }
}

// Bind returns a closure that calls fn, op's kernel (a function of the
// kernels.*Func type of its kind, as KernelOf returns it), once at length t
// (rows for the row-wise kernels) on the slices of a, by parameter name;
// see catalog.Op.Bind.
func Bind(op catalog.Op, fn any, t int, a map[string][]float32, sc map[string]float32) func() float32 {
	return op.Bind(fn, t, a, sc)
}

// Args returns the arguments the benchmarks call op with at length t; see
// kernelbench.Args.
func Args(spec specs.Spec, op catalog.Op, ref kernels.Set, t int) map[string][]float32 {
	return kernelbench.Args(spec, op, ref, t)
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
func KernelOf(s kernels.Set, field string) any { return kernelbench.KernelOf(s, field) }

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
func DefaultText() ([]byte, error) { return trainstep.DefaultText() }

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

// TrainStepAt is TrainStep with the kernels dispatched at level l or below
// (trainstep.At).
func TrainStepAt(name string, l kernels.ISA, batch, workers int, text []byte) (step func() error, tokens int, err error) {
	return trainstep.At(name, l, batch, workers, text)
}

// TrainStepPrecision is TrainStep with the linear layers' products in
// bf16 when bf is set (trainstep.AtPrecision), and the precision it runs
// ("f32", or "bf16-amx", "bf16-avx512bf16").
func TrainStepPrecision(name string, bf bool, batch, workers int, text []byte) (step func() error, tokens int, precision string, err error) {
	l, err := kernels.Level()
	if err != nil {
		return nil, 0, "", err
	}
	return trainstep.AtPrecision(name, l, bf, batch, workers, text)
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
