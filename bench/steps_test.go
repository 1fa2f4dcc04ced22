package bench

import (
	"context"
	"os"
	goruntime "runtime"
	"slices"
	"testing"
	"time"

	"github.com/synthgen/synthgen/specs"
)

func TestStepBatch(t *testing.T) {
	for n, want := range map[int]int{1: 16, 128: 16, 256: 16, 512: 8, 1024: 4, 2048: 2, 8192: 1} {
		if got := StepBatch(n); got != want {
			t.Errorf("StepBatch(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestTableSpecs(t *testing.T) {
	names := TableSpecs()
	for _, want := range []string{"random", "aft_full", "mid", "big", "long512_random", "long2048_aft_full"} {
		if !slices.Contains(names, want) {
			t.Errorf("TableSpecs() = %v, lacks %s", names, want)
		}
	}
	if i, j := slices.Index(names, "long512_vanilla"), slices.Index(names, "long1024_random"); i > j {
		t.Errorf("long512_vanilla after long1024_random in %v", names)
	}
}

func TestPyTorchArgs(t *testing.T) {
	s := specs.Spec{Name: "x", N: 64, D: 32, Heads: 2, Layers: 3, Variant: "aft_conv", Window: 5, FFN: 96}
	got := PyTorchArgs(s, 4, 2)
	want := []string{"--one", "aft_conv", "--n", "64", "--d", "32", "--heads", "2", "--layers", "3",
		"--batch", "4", "--threads", "2", "--ffn", "96", "--window", "5"}
	if !slices.Equal(got, want) {
		t.Errorf("PyTorchArgs = %q, want %q", got, want)
	}
}

func TestParseLastJSON(t *testing.T) {
	var r StepResult
	if err := parseLastJSON([]byte("noise\n{\"spec\":\"a\",\"tokens_per_s\":12.5}\n\n"), &r); err != nil || r.Spec != "a" || r.TokensPerSec != 12.5 {
		t.Errorf("parseLastJSON: %+v, %v", r, err)
	}
	if err := parseLastJSON([]byte("not json"), &r); err == nil {
		t.Error("parseLastJSON accepted a line that is not JSON")
	}
	if err := parseLastJSON(nil, &r); err == nil {
		t.Error("parseLastJSON accepted no output")
	}
}

// TestMain lets this test binary serve as the child of
// TestMeasureStepsChild, as synth does for synth steps.
func TestMain(m *testing.M) {
	if handled, err := RunStepChild(); handled {
		if err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestMeasureStepsChild(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	r, err := MeasureStepsChild(context.Background(), exe, "small", 2, 1, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec != "small" || r.Workers != 1 || r.Batch != 2 || r.Steps < 2 || !(r.TokensPerSec > 0) {
		t.Errorf("child result %+v", r)
	}
	if r.PeakRSSKiB <= 0 && goruntime.GOOS == "linux" {
		t.Errorf("no peak RSS in %+v", r)
	}
	// A bad row is an error naming it, not a hang or a panic.
	if _, err := MeasureStepsChild(context.Background(), exe, "no_such_spec", 2, 1, 1, 0); err == nil {
		t.Error("no error for an unknown spec")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	if _, err := MeasureStepsChild(ctx, exe, "small", 2, 1, 1000000, time.Hour); err == nil {
		t.Error("no error from a cancelled measurement")
	}
}
