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

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/synthgen/synthgen/gen/catalog"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
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

// Flops is the nominal floating-point work of one call of op at length t.
func Flops(op catalog.Op, cfg catalog.Config, t int) float64 {
	tt := float64(t) * float64(t)
	switch op.Kind {
	case catalog.SoftmaxValue:
		return 2 * tt * float64(cfg.DH) // A·V
	case catalog.SoftmaxValueBack:
		return 4 * tt * float64(cfg.DH) // Aᵀ·dY and dY·Vᵀ
	case catalog.Product, catalog.ProductBackX, catalog.ProductBackW:
		return 2 * tt * float64(op.W)
	case catalog.Tile, catalog.TriScale:
		return tt
	case catalog.TileBack:
		return 4 * tt
	case catalog.TriAxpy, catalog.TriDot:
		return 2 * tt
	}
	return 0 // the attention-free kernels have their own benchmark (BenchmarkAFT)
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
		if op.Slices == nil {
			continue
		}
		r := rand.New(rand.NewPCG(1, 2))
		a := map[string][]float32{}
		for _, p := range op.Slices {
			a[p.Name] = randSlice(r, p.Shape.Need(t), 1)
		}
		if op.Kind == catalog.SoftmaxValueBack {
			probabilities(a["a"], spec.N, t)
		}
		prefix := fmt.Sprintf("spec=%s/n=%d/dh=%d/kernel=%s/impl=", name, t, cfg.DH, op.Field)
		flops := Flops(op, cfg, t)
		executed := flops * float64(t+1) / float64(2*t) // the causal triangle's share
		for _, s := range sets {
			fn := kernelOf(s, op.Field)
			if fn == nil {
				continue
			}
			run := bind(fn, t, a)
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

// bind returns a closure that runs kernel fn on the prepared arguments, or
// nil for a kernel kind the suite does not know.
func bind(fn any, t int, a map[string][]float32) func() {
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
		return func() { Sink = f(t, a["x"], a["y"]) }
	}
	return nil
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
		if !op.Kind.RowWise() {
			continue
		}
		r := rand.New(rand.NewPCG(1, 2))
		a := map[string][]float32{}
		for _, p := range op.Slices {
			a[p.Name] = randSlice(r, p.Shape.Need(rows), 1)
		}
		elems := float64(rows * cfg.D)
		switch op.Kind {
		case catalog.Gelu, catalog.GeluBack:
			elems = float64(rows * cfg.FFN)
		case catalog.SoftmaxStats, catalog.SoftmaxScale:
			elems = float64(rows * cfg.Vocab)
			if lse := a["lse"]; lse != nil {
				for i := range lse {
					lse[i] = 8 // above every logit (|x| < 4.5)
				}
			}
		}
		for _, s := range sets {
			var run func()
			switch f := kernelOf(s, op.Field).(type) {
			case kernels.LayerNormFunc:
				run = func() { f(rows, a["x"], a["gamma"], a["beta"], a["y"], a["mu"], a["rs"]) }
			case kernels.LayerNormBackFunc:
				run = func() { f(rows, a["dy"], a["x"], a["mu"], a["rs"], a["gamma"], a["dx"]) }
			case kernels.LayerNormGradFunc:
				run = func() { f(rows, a["dy"], a["x"], a["mu"], a["rs"], a["dgamma"], a["dbeta"]) }
			case kernels.GeluFunc: // u becomes gelu'(u), in [−0.13, 1.13]: ordinary inputs again
				run = func() { f(rows, a["u"], a["g"]) }
			case kernels.GeluBackFunc:
				run = func() { f(rows, a["a"], a["b"]) }
			case kernels.SoftmaxStatsFunc:
				run = func() { f(rows, a["x"], a["mx"], a["s"]) }
			case kernels.SoftmaxScaleFunc:
				run = func() { f(rows, a["x"], a["lse"], a["y"], 1/float32(rows)) }
			default:
				continue
			}
			out = append(out, RowCase{fmt.Sprintf("spec=%s/rows=%d/kernel=%s/impl=%s", name, rows, op.Field, s.ISA), elems, run})
		}
	}
	return out, nil
}

// kernelOf returns set s's implementation of field, or nil.
func kernelOf(s kernels.Set, field string) any {
	v := reflect.ValueOf(s).FieldByName(field)
	if !v.IsValid() || v.IsNil() {
		return nil
	}
	return v.Interface()
}

// bindAFT returns a closure running attention-free kernel fn once, or nil
// for a kernel of another kind.
func bindAFT(op catalog.Op, fn any, t int, a map[string][]float32) func() {
	switch f := fn.(type) {
	case kernels.AFTFullFunc:
		return func() { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"]) }
	case kernels.AFTFullBackFunc:
		return func() { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["dw"]) }
	case kernels.AFTLocalFunc:
		return func() { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"]) }
	case kernels.AFTLocalBackFunc:
		return func() { f(t, a["k"], a["v"], a["w"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["dw"]) }
	case kernels.AFTConvFunc:
		return func() { f(t, a["k"], a["v"], a["u"], a["z"], a["m"], a["rd"]) }
	case kernels.AFTConvBackFunc:
		return func() { f(t, a["k"], a["v"], a["u"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"], a["du"]) }
	case kernels.AFTSimpleFunc:
		return func() { f(t, a["k"], a["v"], a["z"], a["m"], a["rd"]) }
	case kernels.AFTSimpleBackFunc:
		return func() { f(t, a["k"], a["v"], a["z"], a["m"], a["rd"], a["dz"], a["dk"], a["dv"]) }
	case kernels.LinearFunc:
		return func() { f(t, a["fq"], a["fk"], a["v"], a["y"], a["rd"]) }
	case kernels.LinearBackFunc:
		return func() {
			f(t, a["fq"], a["fk"], a["v"], a["y"], a["rd"], a["dy"], a["dfq"], a["dfk"], a["dv"])
		}
	}
	return nil // not an attention-free kernel
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
func TrainStep(name string, batch, workers int, text []byte) (step func() error, tokens int, err error) {
	k, err := kernels.Lookup(name)
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
