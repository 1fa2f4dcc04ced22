package synth_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/optim"
	"github.com/synthgen/synthgen/runtime/synth"
)

// csvLR reads the CSV log of checkpoint out: the lr column by step.
func csvLR(t *testing.T, out string) map[int]float64 {
	t.Helper()
	f, err := os.Open(strings.TrimSuffix(out, ".safetensors") + ".csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	if _, ok := col["lr"]; !ok {
		t.Fatalf("CSV header %q has no lr column", rows[0])
	}
	lr := map[int]float64{}
	for _, r := range rows[1:] {
		step, err := strconv.Atoi(r[col["step"]])
		if err != nil {
			t.Fatal(err)
		}
		if r[col["lr"]] == "" { // the initial evaluation's row
			continue
		}
		if _, dup := lr[step]; dup {
			t.Errorf("CSV log has step %d twice", step)
		}
		if lr[step], err = strconv.ParseFloat(r[col["lr"]], 64); err != nil {
			t.Fatal(err)
		}
	}
	return lr
}

// TestLRUsed: the learning rate every step of a run used (Event.LR, the
// trainer's) and the CSV log's lr column equal the schedule's LR(step − 1)
// exactly, over whole short runs: one stopped and resumed, one with
// LRSteps longer than Steps then resumed to it, and one with LRSteps
// shorter than Steps (the steps past it at the floor). The schedules are
// written out from the documented rule (warm-up min(100, 5%) of the
// schedule's length, cosine to 10% of the peak), not taken from the run.
func TestLRUsed(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		first []synth.Option // the first run's options
		stop  int            // the first run stops at this step; 0: it runs to its end
		more  []synth.Option // the resume's options
		steps int            // the run's total in the end
		sched optim.Schedule // what it must follow
	}{
		{"stopped and resumed", []synth.Option{synth.Steps(30), synth.Warmup(5), synth.LR(2e-3)}, 12, nil, 30,
			optim.Schedule{Peak: 2e-3, MinFrac: 0.1, Warmup: 5, Total: 30}},
		{"lr-steps 60, steps 20 then 60", []synth.Option{synth.Steps(20), synth.LRSteps(60)}, 0, []synth.Option{synth.Steps(60)}, 60,
			optim.Schedule{Peak: 1e-3, MinFrac: 0.1, Warmup: 3, Total: 60}},
		{"lr-steps 15, steps 25", []synth.Option{synth.Steps(25), synth.LRSteps(15)}, 0, nil, 25,
			optim.Schedule{Peak: 1e-3, MinFrac: 0.1, Warmup: 0, Total: 15}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".safetensors")
			events := map[int]float64{}
			onEvent := synth.OnEvent(func(e synth.Event) {
				if e.Step > e.Start {
					events[e.Step] = e.LR
				}
			})
			opts := append([]synth.Option{synth.Data(data), synth.Out(out), synth.Batch(1), synth.EvalEvery(0), onEvent}, c.first...)
			if c.stop > 0 {
				opts = append(opts, synth.StopAt(c.stop))
			}
			if _, err := synth.Train(ctx, small.Spec, opts...); err != nil {
				t.Fatal(err)
			}
			if c.stop > 0 || c.more != nil {
				if _, err := synth.Resume(ctx, out, append([]synth.Option{onEvent}, c.more...)...); err != nil {
					t.Fatal(err)
				}
			}
			logged := csvLR(t, out)
			if len(events) != c.steps || len(logged) != c.steps {
				t.Fatalf("%d events and %d CSV rows, want %d of each", len(events), len(logged), c.steps)
			}
			for s := 1; s <= c.steps; s++ {
				want := c.sched.LR(s - 1)
				if events[s] != want || logged[s] != want {
					t.Errorf("step %d: learning rate %.17g (event), %.17g (CSV), the schedule's is %.17g", s, events[s], logged[s], want)
				}
			}
		})
	}
}

// TestDefaultsDocumented: a run given no settings uses the ones docs/training.md
// documents: 2000 steps of batch 16, AdamW β 0.9/0.95, eps 1e-8, weight
// decay 0.1, warm-up min(100, 5% of the run), cosine to 10% of the peak
// 1e-3, clipping at 1.0, seed 1.
func TestDefaultsDocumented(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	for _, c := range []struct {
		opts   []synth.Option
		steps  int
		warmup int
	}{{nil, 2000, 100}, {[]synth.Option{synth.Steps(400)}, 400, 20}, {[]synth.Option{synth.Steps(10)}, 10, 0}} {
		r, err := synth.NewRun(context.Background(), small.Spec, append([]synth.Option{synth.Data(data), synth.Out(filepath.Join(dir, "d.safetensors"))}, c.opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		want := synth.Config{Steps: c.steps, Batch: 16, LR: 1e-3, Warmup: c.warmup, MinLRFrac: 0.1, Clip: 1, Seed: 1,
			Optim: optim.Config{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}}
		if got := r.Plan().Config; got != want {
			t.Errorf("defaults of a run of %d steps: %+v, want %+v", c.steps, got, want)
		}
	}
}
