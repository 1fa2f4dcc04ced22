package synth_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/internal/clstest"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// group is an in-process stand-in for MPI: n ranks (goroutines) whose
// allreduce sums in rank order, so every rank gets the same bits.
type group struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	arrived int
	gen     int
	f32     [][]float32
	f64     [][]float64
	calls   int
}

func newGroup(n int) *group {
	g := &group{n: n, f32: make([][]float32, n), f64: make([][]float64, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

func (g *group) allreduce(rank int, f32 []float32, f64 []float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.f32[rank], g.f64[rank] = f32, f64
	g.arrived++
	if g.arrived < g.n {
		for gen := g.gen; gen == g.gen; {
			g.cond.Wait()
		}
		return
	}
	if f32 != nil {
		for i := range f32 {
			s := g.f32[0][i]
			for r := 1; r < g.n; r++ {
				s += g.f32[r][i]
			}
			for r := 0; r < g.n; r++ {
				g.f32[r][i] = s
			}
		}
	} else {
		for i := range f64 {
			s := g.f64[0][i]
			for r := 1; r < g.n; r++ {
				s += g.f64[r][i]
			}
			for r := 0; r < g.n; r++ {
				g.f64[r][i] = s
			}
		}
	}
	g.calls++
	g.arrived = 0
	g.gen++
	g.cond.Broadcast()
}

// rankComm is one rank of a group (synth.Comm).
type rankComm struct {
	g    *group
	rank int
}

func (c rankComm) Rank() int                          { return c.rank }
func (c rankComm) Size() int                          { return c.g.n }
func (c rankComm) AllreduceFloat32(b []float32) error { c.g.allreduce(c.rank, b, nil); return nil }
func (c rankComm) AllreduceFloat64(b []float64) error { c.g.allreduce(c.rank, nil, b); return nil }

// runRanks trains spec small on n in-process ranks, each with the options
// opts(rank) and Ranks, and returns each rank's error and rank 0's events.
func runRanks(ctx func(rank int) context.Context, n int, resume string, opts func(rank int) []synth.Option) ([]error, []synth.Event) {
	return runRanksOf(small.Spec, ctx, n, resume, opts)
}

// runRanksOf is runRanks of spec s (for a new run; a resume reads the
// spec from the checkpoint).
func runRanksOf(s specs.Spec, ctx func(rank int) context.Context, n int, resume string, opts func(rank int) []synth.Option) ([]error, []synth.Event) {
	g := newGroup(n)
	errs := make([]error, n)
	var events []synth.Event
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o []synth.Option
			if r == 0 { // opts may replace it
				o = append(o, synth.OnEvent(func(e synth.Event) { events = append(events, e) }))
			}
			o = append(append(o, opts(r)...), synth.Ranks(rankComm{g, r}))
			var run *synth.Run
			var err error
			if resume != "" {
				run, err = synth.ResumeRun(context.Background(), resume, o...)
			} else {
				run, err = synth.NewRun(context.Background(), s, o...)
			}
			if err != nil {
				errs[r] = err
				return
			}
			if p := run.Plan(); p.Ranks != n {
				errs[r] = fmt.Errorf("Plan.Ranks = %d", p.Ranks)
				return
			}
			_, errs[r] = run.Train(ctx(r))
		}()
	}
	wg.Wait()
	return errs, events
}

func background(int) context.Context { return context.Background() }

// diff compares two checkpoints tensor by tensor: the largest absolute
// difference, and the difference's L2 norm relative to b's.
func diff(t *testing.T, a, b string) (maxAbs, relL2 float64) {
	t.Helper()
	fa, err := checkpoint.Read(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := checkpoint.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Metadata["step"] != fb.Metadata["step"] || len(fa.Tensors) != len(fb.Tensors) {
		t.Fatalf("%s and %s: steps %s, %s; %d and %d tensors", a, b, fa.Metadata["step"], fb.Metadata["step"], len(fa.Tensors), len(fb.Tensors))
	}
	var d2, n2 float64
	for name, ta := range fa.Tensors {
		tb := fb.Tensors[name]
		if tb == nil {
			t.Fatalf("%s has no %s", b, name)
		}
		x, y := make([]float32, ta.Elems()), make([]float32, tb.Elems())
		if err := ta.Float32s(x); err != nil {
			t.Fatal(err)
		}
		if err := tb.Float32s(y); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			d := float64(x[i]) - float64(y[i])
			maxAbs = math.Max(maxAbs, math.Abs(d))
			d2 += d * d
			n2 += float64(y[i]) * float64(y[i])
		}
	}
	return maxAbs, math.Sqrt(d2 / n2)
}

// Tolerances of a short run of spec small on several ranks against one
// process (measured: see TestRanksMatchOneProcess's log).
const (
	tolMaxAbs = 1e-4
	tolRelL2  = 1e-5
	tolLoss   = 1e-5 // relative, per step
)

// TestRanksMatchOneProcess: 2 ranks × 1 worker, and 4 ranks with an
// uneven split of the batch (2+2+1+1), train the weights of 1 process × 2
// workers to float32 rounding, with the same loss curve and evaluations;
// only rank 0 writes files; a checkpoint resumes on any number of ranks.
func TestRanksMatchOneProcess(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 30000)
	const steps = 30
	common := []synth.Option{synth.Data(data), synth.Batch(6), synth.Steps(steps), synth.EvalEvery(10), synth.EvalWindows(4)}

	one := filepath.Join(dir, "one.safetensors")
	var want []synth.Event
	if _, err := synth.Train(context.Background(), small.Spec, append(common, synth.Out(one), synth.Workers(2),
		synth.OnEvent(func(e synth.Event) { want = append(want, e) }))...); err != nil {
		t.Fatal(err)
	}

	for _, n := range []int{2, 4} { // 6 = 3+3; 6 = 2+2+1+1
		out := filepath.Join(dir, fmt.Sprintf("ranks%d.safetensors", n))
		errs, got := runRanks(background, n, "", func(r int) []synth.Option {
			o := append(common, synth.Workers(1))
			if r == 0 {
				return append(o, synth.Out(out))
			}
			// The other ranks must not write: point them elsewhere and check.
			return append(o, synth.Out(filepath.Join(dir, fmt.Sprintf("not-%d-%d.safetensors", n, r))))
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks: rank %d: %v", n, r, err)
			}
		}
		maxAbs, rel := diff(t, out, one)
		t.Logf("%d ranks × 1 worker vs 1 × 2 workers, %d steps: max |Δw| %.3g, ‖Δw‖/‖w‖ %.3g", n, steps, maxAbs, rel)
		if maxAbs > tolMaxAbs || rel > tolRelL2 {
			t.Errorf("%d ranks: weights differ from one process's by max %g, relative %g (tolerance %g, %g)", n, maxAbs, rel, tolMaxAbs, tolRelL2)
		}
		if len(got) != len(want) {
			t.Fatalf("%d ranks: %d events on rank 0, want %d", n, len(got), len(want))
		}
		worst := 0.0
		for i := range want {
			if got[i].Step != want[i].Step || got[i].Evaluated != want[i].Evaluated {
				t.Fatalf("%d ranks: event %d is %+v, want %+v", n, i, got[i], want[i])
			}
			if i > 0 {
				worst = math.Max(worst, math.Abs(got[i].Loss-want[i].Loss)/want[i].Loss)
			}
			if got[i].Evaluated {
				worst = math.Max(worst, math.Abs(got[i].Val-want[i].Val)/want[i].Val)
			}
		}
		t.Logf("%d ranks: loss curve and evaluations within %.3g (relative) of one process's", n, worst)
		if worst > tolLoss {
			t.Errorf("%d ranks: losses differ by %g relative (tolerance %g)", n, worst, tolLoss)
		}
		for r := 1; r < n; r++ {
			for _, suffix := range []string{".safetensors", ".opt.safetensors", ".csv"} {
				p := filepath.Join(dir, fmt.Sprintf("not-%d-%d%s", n, r, suffix))
				if _, err := os.Stat(p); err == nil {
					t.Errorf("rank %d wrote %s", r, p)
				}
			}
		}
		if fi, err := os.Stat(strings.TrimSuffix(out, ".safetensors") + ".csv"); err != nil || fi.Size() == 0 {
			t.Errorf("rank 0's CSV log: %v", err)
		}
	}

	// A run stopped at step 20 on 2 ranks resumes on 1 process, and one
	// stopped on 1 process resumes on 2 ranks: both end within the
	// tolerance of the uninterrupted run.
	half := filepath.Join(dir, "half.safetensors")
	errs, _ := runRanks(background, 2, "", func(r int) []synth.Option {
		return append(common, synth.Out(half), synth.StopAt(20))
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if _, err := synth.Resume(context.Background(), half, synth.Workers(2)); err != nil {
		t.Fatal(err)
	}
	if maxAbs, rel := diff(t, half, one); maxAbs > tolMaxAbs || rel > tolRelL2 {
		t.Errorf("2 ranks to step 20, then 1 process: max %g, relative %g", maxAbs, rel)
	}
	half1 := filepath.Join(dir, "half1.safetensors")
	if _, err := synth.Train(context.Background(), small.Spec, append(common, synth.Out(half1), synth.StopAt(20))...); err != nil {
		t.Fatal(err)
	}
	errs, _ = runRanks(background, 2, half1, func(r int) []synth.Option { return []synth.Option{synth.Workers(1)} })
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if maxAbs, rel := diff(t, half1, one); maxAbs > tolMaxAbs || rel > tolRelL2 {
		t.Errorf("1 process to step 20, then 2 ranks: max %g, relative %g", maxAbs, rel)
	}
}

// TestRanksClassifierMatchOneProcess: a classifier (examples of unequal
// lengths, a held-out validation share) trained on 2 ranks (a batch of 7
// = 4+3) and 3 ranks (3+2+2) × 1 worker trains the weights of 1 process ×
// 2 workers to float32 rounding (the tolerances of
// TestRanksMatchOneProcess), with the same loss curve and validation
// losses and accuracies; only rank 0 writes files; a checkpoint of 2 ranks
// resumes on 1 process; a batch smaller than the ranks is an error.
func TestRanksClassifierMatchOneProcess(t *testing.T) {
	s, err := clstest.Spec("odd", 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	trainFile := labelledFile(t, dir, "train.tsv", 150, 4)
	const steps = 30
	common := []synth.Option{synth.Data(trainFile), synth.HoldOut(0.2), synth.Batch(7), synth.Steps(steps), synth.EvalEvery(10)}

	one := filepath.Join(dir, "one.safetensors")
	var want []synth.Event
	if _, err := synth.Train(context.Background(), s, append(common, synth.Out(one), synth.Workers(2),
		synth.OnEvent(func(e synth.Event) { want = append(want, e) }))...); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 3} {
		out := filepath.Join(dir, fmt.Sprintf("ranks%d.safetensors", n))
		errs, got := runRanksOf(s, background, n, "", func(r int) []synth.Option {
			o := append(common, synth.Workers(1))
			if r == 0 {
				return append(o, synth.Out(out))
			}
			return append(o, synth.Out(filepath.Join(dir, fmt.Sprintf("not-%d-%d.safetensors", n, r))))
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%d ranks: rank %d: %v", n, r, err)
			}
		}
		maxAbs, rel := diff(t, out, one)
		t.Logf("classifier, %d ranks × 1 worker vs 1 × 2 workers, %d steps: max |Δw| %.3g, ‖Δw‖/‖w‖ %.3g", n, steps, maxAbs, rel)
		if maxAbs > tolMaxAbs || rel > tolRelL2 {
			t.Errorf("%d ranks: weights differ from one process's by max %g, relative %g (tolerance %g, %g)", n, maxAbs, rel, tolMaxAbs, tolRelL2)
		}
		if len(got) != len(want) {
			t.Fatalf("%d ranks: %d events on rank 0, want %d", n, len(got), len(want))
		}
		worst, evals := 0.0, 0
		for i := range want {
			if got[i].Step != want[i].Step || got[i].Evaluated != want[i].Evaluated {
				t.Fatalf("%d ranks: event %d is %+v, want %+v", n, i, got[i], want[i])
			}
			if i > 0 {
				worst = math.Max(worst, math.Abs(got[i].Loss-want[i].Loss)/want[i].Loss)
			}
			if got[i].Evaluated {
				evals++
				worst = math.Max(worst, math.Abs(got[i].Val-want[i].Val)/want[i].Val)
				if g, w := got[i].Eval, want[i].Eval; g.Examples != w.Examples || g.Examples == 0 || g.Accuracy != w.Accuracy {
					t.Errorf("%d ranks, step %d: validation of %d examples, accuracy %v; want %d, %v", n, got[i].Step, g.Examples, g.Accuracy, w.Examples, w.Accuracy)
				}
			}
		}
		t.Logf("classifier, %d ranks: loss curve and %d evaluations within %.3g (relative) of one process's", n, evals, worst)
		if evals < 3 || worst > tolLoss {
			t.Errorf("%d ranks: %d evaluations, losses differ by %g relative (tolerance %g)", n, evals, worst, tolLoss)
		}
		for r := 1; r < n; r++ {
			for _, suffix := range []string{".safetensors", ".opt.safetensors", ".csv"} {
				p := filepath.Join(dir, fmt.Sprintf("not-%d-%d%s", n, r, suffix))
				if _, err := os.Stat(p); err == nil {
					t.Errorf("rank %d wrote %s", r, p)
				}
			}
		}
		if fi, err := os.Stat(strings.TrimSuffix(out, ".safetensors") + ".csv"); err != nil || fi.Size() == 0 {
			t.Errorf("rank 0's CSV log: %v", err)
		}
	}

	// Stopped at step 20 on 2 ranks, resumed on 1 process.
	half := filepath.Join(dir, "half.safetensors")
	errs, _ := runRanksOf(s, background, 2, "", func(r int) []synth.Option {
		return append(common, synth.Out(half), synth.StopAt(20))
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if _, err := synth.Resume(context.Background(), half, synth.Workers(2)); err != nil {
		t.Fatal(err)
	}
	if maxAbs, rel := diff(t, half, one); maxAbs > tolMaxAbs || rel > tolRelL2 {
		t.Errorf("classifier: 2 ranks to step 20, then 1 process: max %g, relative %g", maxAbs, rel)
	}

	// A rank with another training file.
	other := labelledFile(t, dir, "other.tsv", 150, 5)
	errs, _ = runRanksOf(s, background, 2, "", func(r int) []synth.Option {
		o := append(common, synth.Out(filepath.Join(dir, "other.safetensors")))
		if r == 1 {
			o = append(o, synth.Data(other))
		}
		return o
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "before the first step: training examples on rank 1") {
			t.Errorf("another training file on rank 1: rank %d: %v", r, err)
		}
	}

	// A batch of 7 examples over 8 ranks.
	errs, _ = runRanksOf(s, background, 8, "", func(r int) []synth.Option {
		return append(common, synth.Out(filepath.Join(dir, fmt.Sprintf("eight-%d.safetensors", r))))
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "batch 7 is smaller than the 8 ranks") {
			t.Errorf("a batch of 7 over 8 ranks: rank %d: %v", r, err)
		}
	}
}

// TestRanksOneRank: Ranks with a one-rank communicator is an ordinary run,
// byte for byte.
func TestRanksOneRank(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if _, err := synth.Train(context.Background(), small.Spec, tiny(data, a, synth.Steps(5))...); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Train(context.Background(), small.Spec, tiny(data, b, synth.Steps(5), synth.Ranks(rankComm{newGroup(1), 0}))...); err != nil {
		t.Fatal(err)
	}
	if string(read(t, a)) != string(read(t, b)) {
		t.Error("a run with Ranks of one rank differs from one without")
	}
}

// TestRanksCancel: cancelling one rank's context stops every rank after
// the same step; rank 0 saves it.
func TestRanksCancel(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "c.safetensors")
	ctx1, cancel := context.WithCancel(context.Background())
	defer cancel()
	var steps []int
	errs, _ := runRanks(func(r int) context.Context {
		if r == 1 {
			return ctx1
		}
		return context.Background()
	}, 2, "", func(r int) []synth.Option {
		o := tiny(data, out, synth.Steps(1000), synth.EvalEvery(0))
		if r == 0 {
			o = append(o, synth.OnEvent(func(e synth.Event) {
				steps = append(steps, e.Step)
				if e.Step == 3 {
					cancel() // rank 1 is cancelled while rank 0 is at step 3
				}
			}))
		}
		return o
	})
	for r, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("rank %d: err = %v, want context.Canceled", r, err)
		}
	}
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "rank 1 was cancelled") {
		t.Errorf("rank 0's error does not say which rank was cancelled: %v", errs[0])
	}
	h, err := checkpoint.ReadHeader(out)
	if err != nil {
		t.Fatal(err)
	}
	last := steps[len(steps)-1]
	if h.Step != last || last < 4 || last > 5 {
		t.Errorf("saved step %d, last step %d: want the same, 4 or 5", h.Step, last)
	}
}

// TestRanksMismatch: ranks that would not take the same steps (another
// seed, another text) fail before the first step, on every rank, with an
// error naming what differs and where.
func TestRanksMismatch(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	other := filepath.Join(dir, "other.txt")
	b := read(t, data)
	b[100] ^= 1
	if err := os.WriteFile(other, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "m.safetensors")
	for _, c := range []struct {
		name string
		opt  synth.Option
		want string
	}{
		{"seed", synth.Seed(2), "settings (spec, training configuration, start and stop steps) on rank 1; weights on rank 1;"},
		{"data", synth.Data(other), "before the first step: training text on rank 1;"},
	} {
		errs, _ := runRanks(background, 3, "", func(r int) []synth.Option {
			o := tiny(data, out, synth.Steps(5), synth.Batch(3))
			if r == 1 {
				o = append(o, c.opt)
			}
			return o
		})
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ranks differ from rank 0") {
				t.Errorf("%s: rank %d: err = %v", c.name, r, err)
			}
		}
		t.Logf("%s: %v", c.name, errs[0])
	}
}
