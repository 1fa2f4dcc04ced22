package bench

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/specs"
)

// Generation's speed (synth bench -generate): synthgen's incremental
// decoder (runtime/model/decode.go), the old path (a Forward over the last
// n bytes for every byte) and PyTorch generating with a key/value cache
// (bench/pytorch/generate.py), on the protocol of
// `go test ./runtime/synth -bench BenchmarkGenerate`, full-window prompt:
// a prompt of n pseudo-random bytes, then n bytes (the decoder, its
// prefill and re-encodes of n/2 bytes included) or OldPathBytes bytes (the
// old path: from a full window each costs the same Forward), drawn
// greedily; bytes per second of wall time and per CPU-second of the
// process.

// OldPathBytes is the number of bytes the old path draws per measurement.
const OldPathBytes = 8

// GenRate is one measured generation: bytes drawn, wall and CPU seconds.
type GenRate struct {
	Bytes int     `json:"bytes"`
	Wall  float64 `json:"wall_s"`
	CPU   float64 `json:"cpu_s"` // of the whole process; 0 if unknown
}

// PerSec is bytes per second of wall time.
func (r GenRate) PerSec() float64 { return perSec(r.Bytes, r.Wall) }

// PerCPUSec is bytes per CPU-second, 0 if the CPU time is unknown.
func (r GenRate) PerCPUSec() float64 { return perSec(r.Bytes, r.CPU) }

func perSec(b int, s float64) float64 {
	if s <= 0 {
		return 0
	}
	return float64(b) / s
}

// GenResult is synthgen's side of one spec: the old path and the decoder,
// measured in one run.
type GenResult struct {
	Spec    string
	Workers int
	Old     GenRate
	Decoder GenRate
}

// MeasureGenerate measures spec name's generation in this process with
// the model's workers set to workers (the decoder's steps run on one core
// whatever workers is; its prefill and the old path's Forward on the
// workers): the old path first, then the decoder, each the best (least
// wall time) of reps runs, on a model with seed 1's initial weights.
func MeasureGenerate(name string, workers, reps int) (GenResult, error) {
	k, err := kernels.Lookup(name)
	if err != nil {
		return GenResult{}, err
	}
	if k.Spec.IsClassifier() {
		return GenResult{}, fmt.Errorf("%s: spec is a classifier (task %q, causal %t): it generates no text", name, k.Spec.Task, k.Spec.Causal())
	}
	m, err := model.New(k.Spec, k, 1)
	if err != nil {
		return GenResult{}, fmt.Errorf("%s: %w", name, err)
	}
	m.SetWorkers(workers)
	n := k.Spec.N
	prompt := GenPrompt(n, k.Spec.Vocab)
	r := GenResult{Spec: name, Workers: m.Workers()}

	// The old path: Forward over the last n tokens for every byte.
	ws := m.NewWorkspace(1)
	text := append([]int32(nil), prompt...)
	r.Old = bestGen(reps, OldPathBytes, func() {
		text = text[:n]
		for range OldPathBytes {
			in := text[len(text)-n:]
			m.Forward(ws, in, nil, 1)
			text = append(text, argmax(ws.Logits(0, n-1)))
		}
	})

	// The decoder: prefill of the prompt, then a step (or a re-encode)
	// per byte; making the decoder (it packs the weights) is timed too.
	r.Decoder = bestGen(reps, n, func() {
		dc := m.NewDecoder()
		lg := dc.Prefill(prompt)
		for i := range n {
			tok := argmax(lg)
			if i+1 < n {
				lg = dc.Next(tok)
			}
		}
	})
	return r, nil
}

// GenPrompt is the benchmark's prompt: n pseudo-random tokens of the
// vocabulary (a fixed seed).
func GenPrompt(n, vocab int) []int32 {
	rng := rand.New(rand.NewPCG(4, 1))
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(rng.IntN(vocab))
	}
	return p
}

// bestGen runs f, which draws bytes bytes, max(1, reps) times and
// returns the run of least wall time.
func bestGen(reps, bytes int, f func()) GenRate {
	var best GenRate
	for i := range max(1, reps) {
		c0, t0 := cpuSeconds(), time.Now()
		f()
		r := GenRate{Bytes: bytes, Wall: time.Since(t0).Seconds(), CPU: cpuSeconds() - c0}
		if i == 0 || r.Wall < best.Wall {
			best = r
		}
	}
	return best
}

// argmax is greedy decoding's choice: the first largest logit.
func argmax(lg []float32) int32 {
	best := 0
	for i, v := range lg {
		if v > lg[best] {
			best = i
		}
	}
	return int32(best)
}

// PyTorchGenResult is generate.py's JSON line.
type PyTorchGenResult struct {
	Variant        string  `json:"variant"`
	N              int     `json:"n"`
	Prompt         int     `json:"prompt"`
	Bytes          int     `json:"bytes"`
	Threads        int     `json:"threads"`
	BytesPerSec    float64 `json:"bytes_per_s"`
	BytesPerCPUSec float64 `json:"bytes_per_cpu_s"`
	Wall           float64 `json:"wall_s"`
	CPU            float64 `json:"cpu_s"`
	Version        string  `json:"torch"`
}

// GenerateScript is generate.py beside bench.py.
func (p *PyTorch) GenerateScript() string {
	return filepath.Join(filepath.Dir(p.Script), "generate.py")
}

// GenerateArgs are generate.py's flags for spec s: the same model
// (variant, sizes, rank, window, feed-forward width) on threads threads,
// the best of reps generations.
func GenerateArgs(s specs.Spec, threads, reps int) []string {
	a := []string{"--variant", s.Variant,
		"--n", strconv.Itoa(s.N), "--d", strconv.Itoa(s.D), "--heads", strconv.Itoa(s.Heads),
		"--layers", strconv.Itoa(s.Layers), "--threads", strconv.Itoa(threads), "--reps", strconv.Itoa(reps)}
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

// Generate times PyTorch's cached generation of spec s's model on threads
// threads (OMP_NUM_THREADS and torch.set_num_threads), the best of reps,
// in a process of its own.
func (p *PyTorch) Generate(ctx context.Context, s specs.Spec, threads, reps int) (PyTorchGenResult, error) {
	cmd := p.command(ctx, append([]string{p.GenerateScript()}, GenerateArgs(s, threads, reps)...)...)
	cmd.Env = append(cmd.Env, fmt.Sprintf("OMP_NUM_THREADS=%d", threads))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return PyTorchGenResult{}, fmt.Errorf("pytorch generate %s: %w: %s", s.Name, err, lastLine(errb.String()))
	}
	var r PyTorchGenResult
	if err := parseLastJSON(out.Bytes(), &r); err != nil {
		return PyTorchGenResult{}, fmt.Errorf("pytorch generate %s: %w", s.Name, err)
	}
	if r.Bytes <= 0 || !(r.BytesPerSec > 0) {
		return PyTorchGenResult{}, fmt.Errorf("pytorch generate %s: no rate in %+v", s.Name, r)
	}
	return r, nil
}
