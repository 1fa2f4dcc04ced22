package synth_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// text writes the first size bytes of the default text to dir.
func text(t *testing.T, dir string, size int) string {
	t.Helper()
	p, err := synth.DefaultText()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(q, b[:size], 0o644); err != nil {
		t.Fatal(err)
	}
	return q
}

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tiny(data, out string, more ...synth.Option) []synth.Option {
	return append([]synth.Option{synth.Data(data), synth.Out(out), synth.Batch(2), synth.EvalEvery(4), synth.EvalWindows(2)}, more...)
}

// TestTrainResumeExact: StopAt then Resume, and a cancelled run then
// Resume, both end with the bytes of an uninterrupted run.
func TestTrainResumeExact(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	a := filepath.Join(dir, "a.safetensors")
	var events []synth.Event
	sum, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(10), synth.OnEvent(func(e synth.Event) { events = append(events, e) }))...)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Step != 10 || sum.Stopped || math.IsNaN(sum.ValLoss) || sum.Out != a {
		t.Errorf("summary %+v", sum)
	}
	if len(events) != 11 || !events[0].Evaluated || events[0].Step != 0 || !events[4].Evaluated || events[10].Step != 10 {
		t.Errorf("%d events: %+v", len(events), events)
	}

	b := filepath.Join(dir, "b.safetensors")
	sum, err = synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(10), synth.StopAt(3))...)
	if err != nil || sum.Step != 3 || !sum.Stopped {
		t.Fatalf("StopAt: %v %+v", err, sum)
	}
	if _, err := synth.Resume(ctx, b, synth.Workers(1)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, a), read(t, b)) || !bytes.Equal(read(t, filepath.Join(dir, "a.opt.safetensors")), read(t, filepath.Join(dir, "b.opt.safetensors"))) {
		t.Fatal("StopAt(3) then Resume differs from an uninterrupted run")
	}

	// Cancel after step 5: the run saves step 5 and says it was cancelled.
	c := filepath.Join(dir, "c.safetensors")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sum, err = synth.Train(cctx, small.Spec, tiny(data, c, synth.Steps(10), synth.OnEvent(func(e synth.Event) {
		if e.Step == 5 {
			cancel()
		}
	}))...)
	if !errors.Is(err, context.Canceled) || sum == nil || sum.Step != 5 {
		t.Fatalf("cancelled run: %v %+v", err, sum)
	}
	if s, step, err := synth.CheckpointSpec(c); err != nil || step != 5 || s.JSON() != small.Spec.JSON() {
		t.Fatalf("checkpoint after cancel: %v step %d", err, step)
	}
	r, err := synth.ResumeRun(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Plan(); p.Start != 5 || p.Stop != 10 || !p.WithOptimizer || !p.SavedData || len(p.Notes) != 0 {
		t.Errorf("plan %+v", p)
	}
	if _, err := r.Train(ctx); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, a), read(t, c)) {
		t.Fatal("a cancelled run, resumed, differs from an uninterrupted run")
	}
	if rows := strings.Count(string(read(t, filepath.Join(dir, "c.csv"))), "\n"); rows != 12 {
		t.Errorf("CSV log of the cancelled and resumed run has %d lines, want 12", rows)
	}

	// Overriding a saved setting is noted.
	r, err = synth.ResumeRun(context.Background(), a, synth.Steps(12), synth.Batch(3), synth.Out(filepath.Join(dir, "d.safetensors")))
	if err != nil {
		t.Fatal(err)
	}
	if notes := strings.Join(r.Plan().Notes, "\n"); !strings.Contains(notes, "batch overrides") || !strings.Contains(notes, "stretched") {
		t.Errorf("notes: %q", notes)
	}
}

// TestModel: Load, Save, Evaluate and Sample.
func TestModel(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	ctx := context.Background()
	ck := filepath.Join(dir, "m.safetensors")
	if _, err := synth.Train(ctx, small.Spec, tiny(data, ck, synth.Steps(4))...); err != nil {
		t.Fatal(err)
	}
	m, err := synth.Load(context.Background(), ck)
	if err != nil {
		t.Fatal(err)
	}
	if m.Step() != 4 || m.Spec().Name != "small" || m.NumParams() != synth.NetworkOf(m).NumParams() {
		t.Errorf("loaded model: step %d, spec %s", m.Step(), m.Spec().Name)
	}
	cp := filepath.Join(dir, "copy.safetensors")
	if err := m.Save(cp); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(t, ck), read(t, cp)) {
		t.Error("Save of a loaded checkpoint differs from the file")
	}

	val, err := synth.HeldOut(data, m.Spec())
	if err != nil {
		t.Fatal(err)
	}
	r1, err := m.Evaluate(ctx, val, synth.EvalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := m.Evaluate(ctx, val, synth.EvalOptions{Batch: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r1.Windows != len(val)/65 || math.Abs(r1.Loss-r2.Loss) > 1e-6 || !(r1.Loss > 0 && r1.Loss < 6) {
		t.Errorf("evaluations %+v and %+v", r1, r2)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := m.Evaluate(cctx, val, synth.EvalOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled evaluation: %v", err)
	}

	o := synth.SampleOptions{Len: 30, Temp: 0.8, TopK: 10, Seed: 3}
	s1, err := m.Sample(ctx, []byte("The light "), o)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := m.Sample(ctx, []byte("The light "), o)
	if len(s1) != 30 || !bytes.Equal(s1, s2) {
		t.Errorf("samples %q and %q", s1, s2)
	}
	for _, c := range []struct {
		prompt string
		o      synth.SampleOptions
		want   string
	}{
		{"", synth.SampleOptions{Len: 1}, "prompt"},
		{"x", synth.SampleOptions{Len: -1}, "length"},
		{"x", synth.SampleOptions{}, "SampleOptions.Len"},
		{"x", synth.SampleOptions{Len: 1, Temp: math.NaN()}, "temperature"},
		{"x", synth.SampleOptions{Len: 1, TopK: -2}, "top-k"},
	} {
		if _, err := m.Sample(ctx, []byte(c.prompt), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Sample(%q, %+v): %v, want an error about %s", c.prompt, c.o, err, c.want)
		}
	}
}

// TestErrors: bad settings and unlinked specs are errors naming the
// setting, before anything is written.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	out := filepath.Join(dir, "e.safetensors")
	unlinked := small.Spec
	unlinked.Name = "not_generated"
	if _, err := synth.NewRun(context.Background(), unlinked, synth.Data(data), synth.Out(out)); !errors.Is(err, synth.ErrNotLinked) ||
		!strings.Contains(err.Error(), `"not_generated"`) || !strings.Contains(err.Error(), "cmd/synthgen") {
		t.Errorf("unlinked spec: %v", err)
	}
	changed := small.Spec
	changed.Layers++
	if _, err := synth.New(changed, 1); err == nil || !strings.Contains(err.Error(), "regenerate") {
		t.Errorf("spec differing from the linked one: %v", err)
	}
	if _, err := synth.New(specs.Spec{Name: "small"}, 1); err == nil {
		t.Error("an invalid spec was accepted")
	}
	for _, c := range []struct {
		opt  synth.Option
		want string
	}{
		{synth.Steps(0), "Steps(0)"},
		{synth.Batch(0), "Batch(0)"},
		{synth.LR(-1), "learning rate"},
		{synth.EvalEvery(-1), "EvalEvery(-1): must be ≥ 0"},
		{synth.Workers(-1), "Workers(-1)"},
		{synth.StopAt(99), "StopAt(99)"},
		{synth.Data(filepath.Join(dir, "none.txt")), "none.txt"},
		{synth.Out(filepath.Join(dir, "no", "x.safetensors")), "directory"},
	} {
		if _, err := synth.NewRun(context.Background(), small.Spec, synth.Data(data), synth.Out(out), synth.Steps(10), c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want one containing %q", err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed NewRun wrote %s", out)
	}
	if _, err := synth.Load(context.Background(), data); err == nil || !strings.Contains(err.Error(), "text.txt") {
		t.Errorf("Load of a text file: %v", err)
	}
	if _, err := synth.LookupSpec("nosuch"); !errors.Is(err, synth.ErrNotLinked) {
		t.Errorf("LookupSpec: %v", err)
	}
	if s, err := synth.LookupSpec("small"); err != nil || s.JSON() != small.Spec.JSON() {
		t.Errorf("LookupSpec(small): %v", err)
	}
}
