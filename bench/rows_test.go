package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// fakePyTorch is a PyTorch whose "step" is a shell script: it reports
// tokens/s from rates in turn (one per call, counted in a file) or, with
// fail, exits with an error.
func fakePyTorch(t *testing.T, fail bool, rates ...string) *PyTorch {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	script := "#!/bin/sh\necho boom >&2\nexit 3\n"
	if !fail {
		script = "#!/bin/sh\nn=$(cat " + filepath.Join(dir, "n") + " 2>/dev/null || echo 0)\n" +
			"echo $((n+1)) > " + filepath.Join(dir, "n") + "\n" +
			"set -- " + joinSpace(rates) + "\nshift $n\n" +
			"echo 'torch noise'\necho \"{\\\"tokens_per_s\\\": $1, \\\"peak_rss_kib\\\": $((1000*(n+1))), \\\"torch\\\": \\\"fake\\\"}\"\n"
	}
	path := filepath.Join(dir, "bench.py")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return &PyTorch{Python: "/bin/sh", Script: path}
}

func joinSpace(v []string) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}

// TestMeasureRow measures a small row in three rounds beside a fake
// PyTorch: the row holds the medians, each round's ratio from that
// round's figures, the largest resident sets; a failing PyTorch leaves its
// columns out with the reason, and bad options are errors.
func TestMeasureRow(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	o := RowOptions{Exe: exe, MinSteps: 1, Rounds: 3, PyTorch: fakePyTorch(t, false, "1000", "10", "100")}
	r, err := MeasureRow(ctx, "small", o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec != "small" || r.Batch != StepBatch(r.N) || r.Go[0].Workers != 1 || r.Go[1].Workers != 2 {
		t.Fatalf("row %+v", r)
	}
	if r.PyTorch == nil || r.PyTorch.TokensPerSec != 100 || r.PyTorch.PeakRSSKiB != 3000 || r.PyTorchErr != nil {
		t.Fatalf("PyTorch columns %+v, %v; want the median 100 tokens/s and the largest RSS 3000 KiB", r.PyTorch, r.PyTorchErr)
	}
	if len(r.Ratios) != 3 {
		t.Fatalf("%d ratios, want one per round", len(r.Ratios))
	}
	// Round i's ratio is that round's 2-worker rate over PyTorch's: the
	// rates are far apart, so the rounds' order shows through any noise
	// in synthgen's.
	if !(r.Ratios[1] > r.Ratios[2] && r.Ratios[2] > r.Ratios[0] && r.Ratios[0] > 0) {
		t.Errorf("ratios %v against PyTorch's 1000, 10 and 100 tokens/s: want them in the opposite order", r.Ratios)
	}
	if lo, hi := r.RatioRange(); lo > r.Ratio() || r.Ratio() > hi || lo == hi {
		t.Errorf("ratio %v outside its range %v–%v", r.Ratio(), lo, hi)
	}
	if r.Go[1].Steps < 3 || !(r.Go[1].TokensPerSec > 0) {
		t.Errorf("2 workers %+v: want the steps of three rounds and a median rate", r.Go[1])
	}

	// With BF16, each round runs PyTorch's float32 step, then its bf16
	// one: two columns, each with its own ratios.
	o.PyTorch, o.Rounds, o.BF16 = fakePyTorch(t, false, "100", "400", "100", "400"), 2, true
	r, err = MeasureRow(ctx, "small", o)
	if err != nil {
		t.Fatal(err)
	}
	if r.PyTorch == nil || r.PyTorch.TokensPerSec != 100 || r.PyTorchBF16 == nil || r.PyTorchBF16.TokensPerSec != 400 ||
		len(r.Ratios) != 2 || len(r.BF16Ratios) != 2 || !(r.BF16Ratio() > 0) || math.Abs(r.Ratios[0]/r.BF16Ratios[0]-4) > 1e-9 {
		t.Errorf("bf16 column: %+v, %+v, ratios %v and %v; want 100 and 400 tokens/s, ratios 4× apart", r.PyTorch, r.PyTorchBF16, r.Ratios, r.BF16Ratios)
	}
	o.BF16 = false

	o.PyTorch, o.Rounds = fakePyTorch(t, true), 2
	r, err = MeasureRow(ctx, "small", o)
	if err != nil {
		t.Fatal(err)
	}
	if r.PyTorch != nil || r.PyTorchErr == nil || len(r.Ratios) != 0 {
		t.Errorf("failing PyTorch: %+v, %v, ratios %v; want no columns and the reason", r.PyTorch, r.PyTorchErr, r.Ratios)
	}

	o.Rounds = 0
	if _, err := MeasureRow(ctx, "small", o); err == nil {
		t.Error("no error for 0 rounds")
	}
	o.Rounds = 1
	if _, err := MeasureRow(ctx, "no_such_spec", o); err == nil {
		t.Error("no error for an unknown spec")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.v); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}
