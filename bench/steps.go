package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synthgen/synthgen/kerneltest/trainstep"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/specs"
)

// The training-step table (synth steps): every row is measured in a
// process of its own, so that the peak resident set is that row's alone —
// synthgen by re-executing the running binary with StepChildEnv set,
// PyTorch by running bench/pytorch/bench.py --one.

// StepBatch is the batch the training-step measurements use at sequence
// length n (trainstep.Batch): 16 sequences up to n 256, then 4096 tokens
// per step (n 512: 8, 1024: 4, 2048: 2), so that the long-context steps
// stay within a few GB.
func StepBatch(n int) int { return trainstep.Batch(n) }

// TableSpecs are the specs of the training-step table: the n 128 family
// (TrainSpecs), mid, big and the long-context specs, those linked.
func TableSpecs() []string {
	out := TrainSpecs()
	var long []string
	for _, name := range kernels.Names() {
		if name == "mid" || name == "big" || strings.HasPrefix(name, "long") {
			long = append(long, name)
		}
	}
	// mid and big first, then by length and name.
	rank := func(name string) int {
		s, _ := kernels.Spec(name)
		switch name {
		case "mid":
			return 0
		case "big":
			return 1
		}
		return s.N
	}
	for i := 1; i < len(long); i++ {
		for j := i; j > 0 && (rank(long[j]) < rank(long[j-1]) || rank(long[j]) == rank(long[j-1]) && long[j] < long[j-1]); j-- {
			long[j], long[j-1] = long[j-1], long[j]
		}
	}
	return append(out, long...)
}

// StepResult is one measurement of whole training steps.
type StepResult struct {
	Spec          string  `json:"spec"`
	Workers       int     `json:"workers"`
	Batch         int     `json:"batch"`
	Steps         int     `json:"steps"`
	TokensPerSec  float64 `json:"tokens_per_s"`
	BytesPerStep  float64 `json:"bytes_per_step"`
	AllocsPerStep float64 `json:"allocs_per_step"`
	PeakRSSKiB    int64   `json:"peak_rss_kib"`        // of the process that ran it; 0 if unknown
	Precision     string  `json:"precision,omitempty"` // the linear layers' products: "f32", "bf16-amx", "bf16-avx512bf16"
}

// MeasureSteps runs spec name's training step at the given batch and
// workers in this process: one warm-up step (it sizes the buffers), then
// steps until both minSteps and minTime are reached, reporting tokens/s
// and the bytes and allocations per step after the warm-up.
func MeasureSteps(name string, batch, workers, minSteps int, minTime time.Duration) (StepResult, error) {
	return MeasureStepsPrecision(name, false, batch, workers, minSteps, minTime)
}

// MeasureStepsPrecision is MeasureSteps with the linear layers' products
// in bf16 when bf is set (TrainStepPrecision).
func MeasureStepsPrecision(name string, bf bool, batch, workers, minSteps int, minTime time.Duration) (StepResult, error) {
	text, err := DefaultText()
	if err != nil {
		return StepResult{}, fmt.Errorf("default text: %w", err)
	}
	step, tokens, prec, err := TrainStepPrecision(name, bf, batch, workers, text)
	if err != nil {
		return StepResult{}, err
	}
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	start := time.Now()
	n := 0
	for n < minSteps || time.Since(start) < minTime {
		if err := step(); err != nil {
			return StepResult{}, err
		}
		n++
	}
	sec := time.Since(start).Seconds()
	goruntime.ReadMemStats(&after)
	return StepResult{
		Spec: name, Workers: workers, Batch: batch, Steps: n,
		TokensPerSec:  float64(n*tokens) / sec,
		BytesPerStep:  float64(after.TotalAlloc-before.TotalAlloc) / float64(n),
		AllocsPerStep: float64(after.Mallocs-before.Mallocs) / float64(n),
		Precision:     prec,
	}, nil
}

// StepChildEnv is the environment variable that makes a binary calling
// RunStepChild measure one row and exit: "spec,batch,workers,minSteps,minTime".
const StepChildEnv = "SYNTHGEN_STEP_CHILD"

// RunStepChild, if StepChildEnv is set, measures the row it names, prints
// the StepResult as one JSON line on stdout and returns true (the caller
// then exits); otherwise it returns false at once. A binary that measures
// rows with MeasureStepsChild calls it first thing in main.
func RunStepChild() (handled bool, err error) {
	v, ok := os.LookupEnv(StepChildEnv)
	if !ok {
		return false, nil
	}
	f := strings.Split(v, ",")
	if len(f) != 5 && len(f) != 6 {
		return true, fmt.Errorf("%s=%q: want spec,batch,workers,minSteps,minTime[,precision]", StepChildEnv, v)
	}
	bf := false
	if len(f) == 6 {
		switch f[5] {
		case "f32":
		case "bf16":
			bf = true
		default:
			return true, fmt.Errorf("%s=%q: precision %q, want f32 or bf16", StepChildEnv, v, f[5])
		}
	}
	var nums [3]int
	for i := range nums {
		if nums[i], err = strconv.Atoi(f[i+1]); err != nil {
			return true, fmt.Errorf("%s=%q: %w", StepChildEnv, v, err)
		}
	}
	minTime, err := time.ParseDuration(f[4])
	if err != nil {
		return true, fmt.Errorf("%s=%q: %w", StepChildEnv, v, err)
	}
	r, err := MeasureStepsPrecision(f[0], bf, nums[0], nums[1], nums[2], minTime)
	if err != nil {
		return true, err
	}
	return true, json.NewEncoder(os.Stdout).Encode(r)
}

// MeasureStepsChild measures a row as MeasureSteps does, in a child process:
// exe (a binary that calls RunStepChild first, such as synth) re-run with
// StepChildEnv set. The result carries the child's peak resident set.
func MeasureStepsChild(ctx context.Context, exe, name string, batch, workers, minSteps int, minTime time.Duration) (StepResult, error) {
	return MeasureStepsChildPrecision(ctx, exe, name, false, batch, workers, minSteps, minTime)
}

// MeasureStepsChildPrecision is MeasureStepsChild with the linear layers'
// products in bf16 when bf is set.
func MeasureStepsChildPrecision(ctx context.Context, exe, name string, bf bool, batch, workers, minSteps int, minTime time.Duration) (StepResult, error) {
	prec := "f32"
	if bf {
		prec = "bf16"
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d,%s,%s", StepChildEnv, name, batch, workers, minSteps, minTime, prec))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return StepResult{}, fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(errb.String()))
	}
	var r StepResult
	if err := parseLastJSON(out.Bytes(), &r); err != nil {
		return StepResult{}, fmt.Errorf("%s: %w", name, err)
	}
	r.PeakRSSKiB = maxRSSKiB(cmd.ProcessState)
	return r, nil
}

// parseLastJSON decodes the last non-empty line of out into v.
func parseLastJSON(out []byte, v any) error {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return errors.New("no output")
	}
	if err := json.Unmarshal([]byte(last), v); err != nil {
		return fmt.Errorf("reading %q: %w", last, err)
	}
	return nil
}

// PyTorch runs bench/pytorch/bench.py: Debian's python3 with python3-torch
// and OpenBLAS's OpenMP build, as docs/performance.md describes.
type PyTorch struct {
	Python string // interpreter (default /usr/bin/python3)
	Script string // bench/pytorch/bench.py
	// CoreType is the OPENBLAS_CORETYPE every run gets ("" leaves the
	// choice to OpenBLAS); ChooseCore sets it. OPENBLAS_CORETYPE and
	// OPENBLAS_L2_SIZE from the environment are never passed on.
	CoreType string
}

// PyTorchResult is one PyTorch row.
type PyTorchResult struct {
	TokensPerSec float64 `json:"tokens_per_s"`
	PeakRSSKiB   int64   `json:"peak_rss_kib"`
	Version      string  `json:"torch"`
}

// FindPyTorch locates the interpreter and the script (bench/pytorch/bench.py
// under the module root above dir) and checks that torch imports; the
// error says what is missing.
func FindPyTorch(dir string) (*PyTorch, error) {
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		p, err := exec.LookPath("python3")
		if err != nil {
			return nil, errors.New("no python3 (apt-get install python3-torch libopenblas0-openmp)")
		}
		py = p
	}
	var script string
	for d := dir; ; d = filepath.Dir(d) {
		if s := filepath.Join(d, "bench", "pytorch", "bench.py"); fileExists(s) {
			script = s
			break
		}
		if filepath.Dir(d) == d {
			return nil, errors.New("bench/pytorch/bench.py not found above the working directory")
		}
	}
	p := &PyTorch{Python: py, Script: script}
	if out, err := p.command(context.Background(), "-c", "import torch").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s cannot import torch (apt-get install python3-torch libopenblas0-openmp): %s", py, strings.TrimSpace(string(out)))
	}
	return p, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// openBLASEnv are the variables a PyTorch run never inherits: the core
// type is p.CoreType's (a machine may set OPENBLAS_CORETYPE and
// OPENBLAS_L2_SIZE together for an older OpenBLAS; they go together).
var openBLASEnv = []string{"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_VERBOSE"}

// command is the interpreter with OpenBLAS's OpenMP build on the library
// path (the reference BLAS is ~20× slower) and OPENBLAS_CORETYPE set to
// p.CoreType.
func (p *PyTorch) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.Python, args...)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(openBLASEnv, k) {
			env = append(env, kv)
		}
	}
	const omp = "/usr/lib/x86_64-linux-gnu/openblas-openmp"
	if fileExists(filepath.Join(omp, "libblas.so.3")) {
		env = append(env, "LD_LIBRARY_PATH="+omp)
	}
	if p.CoreType != "" {
		env = append(env, "OPENBLAS_CORETYPE="+p.CoreType)
	}
	cmd.Env = env
	return cmd
}

// InheritedCoreType is OPENBLAS_CORETYPE as this process's environment
// sets it, which PyTorch's runs do not inherit ("" if unset).
func InheritedCoreType() string { return os.Getenv("OPENBLAS_CORETYPE") }

// ProbeCore is a CoreProbe: bench.py --probe-gemm under OPENBLAS_CORETYPE
// core ("" for OpenBLAS's own choice) and OPENBLAS_VERBOSE=2, one thread,
// in a process of its own, so that a core the CPU cannot run (SIGILL)
// fails only the probe.
func (p *PyTorch) ProbeCore(ctx context.Context, core string) (CoreReport, error) {
	q := *p
	q.CoreType = core
	cmd := q.command(ctx, p.Script, "--probe-gemm")
	cmd.Env = append(cmd.Env, "OPENBLAS_VERBOSE=2", "OMP_NUM_THREADS=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return CoreReport{}, fmt.Errorf("probe crashed: %w: %s", err, lastLine(errb.String()))
	}
	r, err := ParseCoreReport(errb.Bytes())
	if err != nil && !errors.Is(err, ErrNoCoreReport) {
		return CoreReport{}, err
	}
	var g struct {
		GFLOPS float64 `json:"gflops"`
		RelErr float64 `json:"rel_err"`
	}
	if err := parseLastJSON(out.Bytes(), &g); err != nil {
		return CoreReport{}, fmt.Errorf("probe: %w", err)
	}
	r.GFLOPS, r.RelErr = g.GFLOPS, g.RelErr
	return r, nil
}

// ChooseCore chooses the OpenBLAS core type of every later run
// (ChooseOpenBLASCore on this CPU, force as -openblas-core gives it) and
// sets p.CoreType.
func (p *PyTorch) ChooseCore(ctx context.Context, force string) (OpenBLASChoice, error) {
	ch, err := ChooseOpenBLASCore(ctx, HostCPU(), p.ProbeCore, force, 2)
	if err != nil {
		return OpenBLASChoice{}, err
	}
	p.CoreType = ch.Env
	return ch, nil
}

// Step times PyTorch's training step of the same model (PyTorchArgs) at
// the given batch and threads, in a process of its own; with bf16, under
// torch.autocast("cpu", dtype=torch.bfloat16).
func (p *PyTorch) Step(ctx context.Context, s specs.Spec, batch, threads int, bf16 bool) (PyTorchResult, error) {
	args := append([]string{p.Script}, PyTorchArgs(s, batch, threads)...)
	what := s.Name
	if bf16 {
		args = append(args, "--autocast", "bf16")
		what += " (bf16 autocast)"
	}
	cmd := p.command(ctx, args...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("OMP_NUM_THREADS=%d", threads))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return PyTorchResult{}, fmt.Errorf("pytorch %s: %w: %s", what, err, lastLine(errb.String()))
	}
	var r PyTorchResult
	if err := parseLastJSON(out.Bytes(), &r); err != nil {
		return PyTorchResult{}, fmt.Errorf("pytorch %s: %w", what, err)
	}
	return r, nil
}

// SoftmaxValueResult is PyTorch's softmax(causal_mask(B))·V on one
// thread, GFLOP/s counted as for dense products (forward 2·n²·dh,
// forward+backward 6·n²·dh per problem).
type SoftmaxValueResult struct {
	Forward         float64 `json:"forward_gflops"`
	ForwardBackward float64 `json:"forward_backward_gflops"`
	Version         string  `json:"torch"`
}

// SoftmaxValue times PyTorch's softmax-value at sequence length n and
// head width dh over problems (sequence × head) problems, one thread, in
// a process of its own (bench.py --softmax-value).
func (p *PyTorch) SoftmaxValue(ctx context.Context, n, dh, problems int) (SoftmaxValueResult, error) {
	cmd := p.command(ctx, p.Script, "--softmax-value", "--n", strconv.Itoa(n), "--dh", strconv.Itoa(dh), "--problems", strconv.Itoa(problems))
	cmd.Env = append(cmd.Env, "OMP_NUM_THREADS=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return SoftmaxValueResult{}, fmt.Errorf("pytorch softmax-value: %w: %s", err, lastLine(errb.String()))
	}
	var r SoftmaxValueResult
	if err := parseLastJSON(out.Bytes(), &r); err != nil {
		return SoftmaxValueResult{}, fmt.Errorf("pytorch softmax-value: %w", err)
	}
	return r, nil
}

// PyTorchArgs are bench.py's flags for spec s: the same model (variant,
// sizes, rank, window, feed-forward width) at batch and threads.
func PyTorchArgs(s specs.Spec, batch, threads int) []string {
	a := []string{"--one", s.Variant,
		"--n", strconv.Itoa(s.N), "--d", strconv.Itoa(s.D), "--heads", strconv.Itoa(s.Heads),
		"--layers", strconv.Itoa(s.Layers), "--batch", strconv.Itoa(batch), "--threads", strconv.Itoa(threads)}
	if s.FFN > 0 {
		a = append(a, "--ffn", strconv.Itoa(s.FFN))
	}
	for _, kv := range []struct {
		flag string
		v    int
	}{{"--k", s.K}, {"--a", s.A}, {"--b", s.B}, {"--window", s.Window}} {
		if kv.v > 0 {
			a = append(a, kv.flag, strconv.Itoa(kv.v))
		}
	}
	return a
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
