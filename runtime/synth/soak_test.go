package synth_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// memSample is the memory of the process at one step.
type memSample struct {
	step int
	heap uint64 // live heap objects, bytes (after a GC)
	rss  uint64 // resident set, bytes (VmRSS), 0 where /proc is missing
}

// sampleMem collects garbage, then reads the live heap (runtime/metrics)
// and the resident set size (/proc/self/status).
func sampleMem(step int) memSample {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return memSample{step: step, heap: s[0].Value.Uint64(), rss: vmRSS()}
}

// vmRSS is the VmRSS line of /proc/self/status in bytes (0 if unknown).
func vmRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if f := bytes.Fields(line); len(f) == 3 && string(f[0]) == "VmRSS:" && string(f[2]) == "kB" {
			kb, _ := strconv.ParseUint(string(f[1]), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkSoak is a long training run (b.N steps of spec small, batch 8,
// evaluating every 100 steps and saving every 50) whose live heap and
// resident memory are sampled every 25 steps. It reports the growth of
// both from the end of the warm-up (the first fifth of the run, at least
// 100 steps) to the end, in bytes, and the largest values; flat memory
// shows as growths near zero. Run it long:
//
//	go test ./runtime/synth -run '^$' -bench Soak -benchtime 5000x
func BenchmarkSoak(b *testing.B) {
	p, err := synth.DefaultText()
	if err != nil {
		b.Skip(err)
	}
	dir := b.TempDir()
	steps := max(b.N, 200)
	warm := max(steps/5, 100)
	var samples []memSample
	r, err := synth.NewRun(context.Background(), small.Spec, synth.Data(p), synth.Out(filepath.Join(dir, "soak.safetensors")),
		synth.Steps(steps), synth.Batch(8), synth.EvalEvery(100), synth.EvalWindows(16), synth.SaveEvery(50),
		synth.OnEvent(func(e synth.Event) {
			if e.Step%25 == 0 || e.Step == warm || e.Step == steps {
				samples = append(samples, sampleMem(e.Step))
			}
		}))
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if _, err := r.Train(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	runtime.KeepAlive(r)
	var base, last memSample
	var maxHeap, maxRSS uint64
	for _, s := range samples {
		if s.step == warm {
			base = s
		}
		if s.step >= warm {
			maxHeap, maxRSS = max(maxHeap, s.heap), max(maxRSS, s.rss)
		}
		last = s
	}
	b.ReportMetric(float64(int64(last.heap)-int64(base.heap)), "heap-growth-B")
	b.ReportMetric(float64(int64(last.rss)-int64(base.rss)), "rss-growth-B")
	b.ReportMetric(float64(maxHeap), "max-heap-B")
	b.ReportMetric(float64(maxRSS), "max-rss-B")
	b.ReportMetric(float64(steps-warm), "steps-after-warmup")
	if testing.Verbose() {
		for _, s := range samples {
			b.Logf("step %6d  heap %8.2f MiB  rss %8.2f MiB", s.step, float64(s.heap)/(1<<20), float64(s.rss)/(1<<20))
		}
	}
}
