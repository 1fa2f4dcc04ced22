package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/specs"
)

func TestGenerateArgs(t *testing.T) {
	s := specs.Spec{Name: "x", Variant: "aft_local", N: 64, D: 32, Heads: 2, Layers: 3, FFN: 48, Window: 8}
	got := GenerateArgs(s, 1, 3)
	want := []string{"--variant", "aft_local", "--n", "64", "--d", "32", "--heads", "2", "--layers", "3",
		"--threads", "1", "--reps", "3", "--ffn", "48", "--window", "8"}
	if !slices.Equal(got, want) {
		t.Errorf("GenerateArgs = %q\nwant %q", got, want)
	}
	s = specs.Spec{Name: "y", Variant: "factorized_dense", N: 128, D: 128, Heads: 4, Layers: 4, A: 16, B: 8}
	if got := strings.Join(GenerateArgs(s, 2, 1), " "); !strings.HasSuffix(got, "--threads 2 --reps 1 --a 16 --b 8") {
		t.Errorf("GenerateArgs = %q: want the threads, reps, a and b", got)
	}
}

// TestPyTorchGenerateProcess runs the real PyTorch.Generate on a fake
// generate.py (a shell script beside a fake bench.py) that checks its
// flags and thread count and prints generate.py's JSON line, or fails.
func TestPyTorchGenerateProcess(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	script := `#!/bin/sh
[ "$1" = --variant ] && [ "$2" = random ] || { echo "bad args $*" >&2; exit 2; }
[ "$OMP_NUM_THREADS" = "${12}" ] || { echo "OMP_NUM_THREADS=$OMP_NUM_THREADS, --threads ${12}" >&2; exit 3; }
case "$4" in
99) echo "Traceback …" >&2; echo "ValueError: variant nope" >&2; exit 1 ;;
98) echo '{"variant": "random", "bytes": 0}' ;;
*) echo "some warning"; echo "{\"variant\": \"random\", \"n\": $4, \"prompt\": $4, \"bytes\": $4, \"threads\": ${12}, \"bytes_per_s\": 2000.5, \"bytes_per_cpu_s\": 1900, \"wall_s\": 0.064, \"cpu_s\": 0.067, \"torch\": \"1.13\"}" ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "generate.py"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &PyTorch{Python: "/bin/sh", Script: filepath.Join(dir, "bench.py")}
	s := specs.Spec{Name: "random", Variant: "random", N: 128, D: 128, Heads: 4, Layers: 4}
	for _, threads := range []int{1, 2} {
		r, err := p.Generate(context.Background(), s, threads, 3)
		if err != nil {
			t.Fatalf("%d threads: %v", threads, err)
		}
		if r.N != 128 || r.Bytes != 128 || r.Threads != threads || r.BytesPerSec != 2000.5 || r.BytesPerCPUSec != 1900 || r.Version != "1.13" {
			t.Errorf("%d threads: %+v", threads, r)
		}
	}
	s.N = 99
	if _, err := p.Generate(context.Background(), s, 1, 1); err == nil || !strings.Contains(err.Error(), "ValueError: variant nope") {
		t.Errorf("failing script: %v; want its last line of stderr", err)
	}
	s.N = 98
	if _, err := p.Generate(context.Background(), s, 1, 1); err == nil || !strings.Contains(err.Error(), "no rate") {
		t.Errorf("JSON without a rate: %v", err)
	}
}

func TestMeasureGenerate(t *testing.T) {
	r, err := MeasureGenerate("small", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Workers != 1 || r.Old.Bytes != OldPathBytes || r.Decoder.Bytes != 64 || !(r.Old.PerSec() > 0) || !(r.Decoder.PerSec() > 0) {
		t.Errorf("small: %+v", r)
	}
	if _, err := MeasureGenerate("no_such_spec", 1, 1); err == nil {
		t.Error("unknown spec: no error")
	}
	// A bidirectional classifier generates nothing: an error, no panic.
	if _, err := MeasureGenerate("enc_odd", 1, 1); err == nil || !strings.Contains(err.Error(), "classifier") {
		t.Errorf("enc_odd: %v, want a classifier's error", err)
	}
}

func TestArgmax(t *testing.T) {
	if got := argmax([]float32{1, 3, -2, 3, 0}); got != 1 {
		t.Errorf("argmax = %d, want 1 (the first largest)", got)
	}
}
