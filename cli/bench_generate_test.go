package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/bench"
)

func TestBenchGenerate(t *testing.T) {
	out := mustRun(t, benchCmd, "-generate", "small", "-pytorch=false", "-generate-reps", "1")
	if !strings.Contains(out, "generation from a full-window prompt") || !strings.Contains(out, "small") ||
		strings.Contains(out, "FMA peak") {
		t.Errorf("synth bench -generate small printed:\n%s", out)
	}
	e, _ := testEnv()
	if err := benchCmd(e, []string{"-generate", "small", "-generate-reps", "0"}); err == nil || !strings.Contains(err.Error(), "-generate-reps 0") {
		t.Errorf("-generate-reps 0: %v", err)
	}
	if err := benchCmd(e, []string{"-generate", "no_such_spec", "-pytorch=false"}); err == nil || !strings.Contains(err.Error(), "no_such_spec") {
		t.Errorf("unknown spec: %v", err)
	}
}

// TestPrintGenerateFakePyTorch prints the table with a fake generate.py
// (a shell script) for PyTorch: its figures and the decoder's ratio to
// them are in the row.
func TestPrintGenerateFakePyTorch(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir := t.TempDir()
	script := "#!/bin/sh\necho '{\"variant\": \"random\", \"n\": 64, \"bytes\": 64, \"threads\": 1, \"bytes_per_s\": 1234.5, \"bytes_per_cpu_s\": 0.001, \"torch\": \"1.13\"}'\n"
	if err := os.WriteFile(filepath.Join(dir, "generate.py"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	pt := &bench.PyTorch{Python: "/bin/sh", Script: filepath.Join(dir, "bench.py")}
	var out bytes.Buffer
	if err := printGenerate(context.Background(), &out, []string{"small"}, 1, 1, pt); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if !strings.Contains(s, "1234.5 / 0.0") || strings.Contains(s, "left out") || !strings.Contains(s, "×") {
		t.Errorf("table:\n%s", s)
	}
}
