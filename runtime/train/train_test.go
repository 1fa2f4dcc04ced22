package train

import (
	"math"
	"path/filepath"
	"runtime"
	"testing"

	_ "github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
)

// text is the default training text's training part.
func text(t testing.TB) *data.Dataset {
	t.Helper()
	p, err := data.DefaultFile()
	if err != nil {
		t.Skip(err)
	}
	ds, err := data.Load(p, 64, 256)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func newTrainer(t testing.TB, cfg Config, workers int) *Trainer {
	t.Helper()
	k, err := kernels.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(k.Spec, k, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	m.SetWorkers(workers)
	tr, err := New(m, text(t).Train, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func tinyConfig(steps int) Config {
	c := DefaultConfig(steps, 2)
	c.Seed = 7
	c.LR = 3e-3
	return c
}

func runSteps(t testing.TB, tr *Trainer, upTo int) []float64 {
	t.Helper()
	var losses []float64
	for tr.Step < upTo {
		if err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, tr.Loss)
	}
	return losses
}

// TestDeterminism: same seed and flags give the same losses bit for bit,
// whatever the worker count and GOMAXPROCS.
func TestDeterminism(t *testing.T) {
	const steps = 8
	ref := runSteps(t, newTrainer(t, tinyConfig(steps), 2), steps)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, c := range []struct{ procs, workers int }{{2, 2}, {1, 1}, {2, 1}, {1, 3}} {
		runtime.GOMAXPROCS(c.procs)
		got := runSteps(t, newTrainer(t, tinyConfig(steps), c.workers), steps)
		for i := range ref {
			if math.Float64bits(got[i]) != math.Float64bits(ref[i]) {
				t.Fatalf("GOMAXPROCS %d, %d workers: step %d loss %v, want %v", c.procs, c.workers, i, got[i], ref[i])
			}
		}
	}
	other := tinyConfig(steps)
	other.Seed = 8
	if got := runSteps(t, newTrainer(t, other, 2), 1); got[0] == ref[0] {
		t.Error("another seed gave the same first loss")
	}
}

// TestExactResume: 200 steps in one go, or 100 then a resume from the
// files to 200, give the same weights and moments bit for bit.
func TestExactResume(t *testing.T) {
	const total, half = 200, 100
	cfg := tinyConfig(total)
	a := newTrainer(t, cfg, 2)
	runSteps(t, a, total)

	b := newTrainer(t, cfg, 2)
	runSteps(t, b, half)
	p := filepath.Join(t.TempDir(), "half.safetensors")
	if err := b.Save(p, map[string]string{"note": "x"}); err != nil {
		t.Fatal(err)
	}
	m, step, err := checkpoint.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if step != half {
		t.Fatalf("checkpoint step %d", step)
	}
	m.SetWorkers(1) // and the worker count may change on resume
	f, err := checkpoint.Read(checkpoint.OptPath(p))
	if err != nil {
		t.Fatal(err)
	}
	saved, err := ConfigFromMetadata(f.Path, f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if saved != cfg {
		t.Fatalf("saved config %+v, want %+v", saved, cfg)
	}
	c, err := New(m, text(t).Train, saved)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := c.LoadState(p, step)
	if err != nil {
		t.Fatal(err)
	}
	if meta["note"] != "x" {
		t.Errorf("extra metadata %v", meta)
	}
	runSteps(t, c, total)
	for i, pa := range a.Model.Params {
		pc := c.Model.Params[i]
		for j := range pa.Data {
			if math.Float32bits(pa.Data[j]) != math.Float32bits(pc.Data[j]) {
				t.Fatalf("%s[%d]: %v uninterrupted, %v resumed", pa.Name, j, pa.Data[j], pc.Data[j])
			}
		}
		for j := range a.Opt.M[i] {
			if a.Opt.M[i][j] != c.Opt.M[i][j] || a.Opt.V[i][j] != c.Opt.V[i][j] {
				t.Fatalf("moments of %s[%d] differ", pa.Name, j)
			}
		}
	}
	if a.Opt.Steps != c.Opt.Steps || a.Step != c.Step {
		t.Fatalf("steps %d/%d vs %d/%d", a.Opt.Steps, a.Step, c.Opt.Steps, c.Step)
	}
}

// TestStepAllocs: a training step (batch, forward, backward, clipping,
// AdamW) allocates nothing after the first.
func TestStepAllocs(t *testing.T) {
	tr := newTrainer(t, tinyConfig(100), 2)
	runSteps(t, tr, 1)
	allocs := testing.AllocsPerRun(5, func() {
		if err := tr.TrainStep(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("a training step allocates %v times", allocs)
	}
}

// TestLearns: a few dozen steps lower the loss well below the uniform
// guess (ln 256 ≈ 5.55 nats).
func TestLearns(t *testing.T) {
	cfg := tinyConfig(60)
	cfg.Batch = 4
	tr := newTrainer(t, cfg, 2)
	before, err := tr.Evaluate(text(t).Val, 8)
	if err != nil {
		t.Fatal(err)
	}
	runSteps(t, tr, 60)
	after, err := tr.Evaluate(text(t).Val, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("val loss %.4f → %.4f", before.Loss, after.Loss)
	if math.Abs(before.Loss-math.Log(256)) > 0.2 {
		t.Errorf("initial loss %.4f is not near ln 256", before.Loss)
	}
	if !(after.Loss < 3.6) {
		t.Errorf("after 60 steps val loss %.4f, want < 3.6", after.Loss)
	}
}

// TestEvaluateDirect scores a tiny text with the evaluator and directly
// from the logits, in float64.
func TestEvaluateDirect(t *testing.T) {
	k, err := kernels.Lookup("small")
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(k.Spec, k, 3)
	if err != nil {
		t.Fatal(err)
	}
	n := m.Spec.N
	// 3 whole windows and a partial one, which must be dropped.
	txt := make([]byte, 3*(n+1)+n/2)
	for i := range txt {
		txt[i] = byte("the quick brown fox jumps over the lazy dog. "[i%45])
	}
	txt[5] = 200 // a byte unseen elsewhere
	ws := m.NewWorkspace(1)
	var sum float64
	for w := 0; w < 3; w++ {
		in := make([]int32, n)
		for i := range in {
			in[i] = int32(txt[w*(n+1)+i])
		}
		m.Forward(ws, in, nil, 1)
		for i := 0; i < n; i++ {
			lg := ws.Logits(0, i)
			target := txt[w*(n+1)+i+1]
			mx := math.Inf(-1)
			for _, v := range lg {
				mx = math.Max(mx, float64(v))
			}
			var z float64
			for _, v := range lg {
				z += math.Exp(float64(v) - mx)
			}
			sum += mx + math.Log(z) - float64(lg[target])
		}
	}
	want := sum / float64(3*n)
	for _, batch := range []int{1, 2, 3, 5} {
		r, err := NewEvaluator(m, batch).Evaluate(txt, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.Windows != 3 || r.Tokens != 3*n {
			t.Fatalf("batch %d: %d windows, %d tokens", batch, r.Windows, r.Tokens)
		}
		if math.Abs(r.Loss-want) > 1e-5*want {
			t.Errorf("batch %d: loss %.9f, direct %.9f", batch, r.Loss, want)
		}
		if math.Abs(r.BPB()-want/math.Ln2) > 1e-5*want {
			t.Errorf("bpb %v", r.BPB())
		}
	}
	// A window limit scores the first windows only.
	r1, err := NewEvaluator(m, 2).Evaluate(txt, 1)
	if err != nil {
		t.Fatal(err)
	}
	r1b, _ := NewEvaluator(m, 1).Evaluate(txt[:n+1], 0)
	if r1.Windows != 1 || math.Abs(r1.Loss-r1b.Loss) > 1e-9 {
		t.Errorf("limit 1: %+v vs first window %+v", r1, r1b)
	}
	if _, err := NewEvaluator(m, 1).Evaluate(txt[:n], 0); err == nil {
		t.Error("text shorter than a window evaluated")
	}
}

func TestConfigMetadata(t *testing.T) {
	c := tinyConfig(123)
	c.LR = 1.0 / 3
	got, err := ConfigFromMetadata("x", c.Metadata())
	if err != nil {
		t.Fatal(err)
	}
	if got != c {
		t.Fatalf("%+v, want %+v", got, c)
	}
	md := c.Metadata()
	delete(md, KeyBatch)
	if _, err := ConfigFromMetadata("x", md); err == nil {
		t.Error("missing batch accepted")
	}
	md = c.Metadata()
	md[KeyLR] = "fast"
	if _, err := ConfigFromMetadata("x", md); err == nil {
		t.Error("bad lr accepted")
	}
	bad := c
	bad.Batch = 0
	if bad.Validate() == nil {
		t.Error("batch 0 valid")
	}
}
