package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/bench"
)

// TestStepsMarkdown checks the table's markdown: the median ratio in its
// column and, with several rounds, their range in one more.
func TestStepsMarkdown(t *testing.T) {
	row := bench.Row{Spec: "aft_full", N: 128, D: 128, Layers: 4, Batch: 16,
		Go:      [2]bench.StepResult{{TokensPerSec: 20000}, {TokensPerSec: 36000}},
		PyTorch: &bench.PyTorchResult{TokensPerSec: 12000, PeakRSSKiB: 400 << 10},
		Ratios:  []float64{2.9, 3.1, 2.6}}
	var one, many bytes.Buffer
	printStepsMarkdown(&one, []bench.Row{row}, false, false, false)
	printStepsMarkdown(&many, []bench.Row{row}, true, false, false)
	if got := strings.Split(strings.TrimSpace(one.String()), "\n")[2]; got != "| aft_full | 128 | 128 | 4 | 16 | 20,000 | 36,000 | 1.80× | 0 | - | 12,000 | 400 | 2.90× |" {
		t.Errorf("row %q", got)
	}
	lines := strings.Split(strings.TrimSpace(many.String()), "\n")
	if !strings.HasSuffix(lines[0], "| rounds' ratios |") || !strings.HasSuffix(lines[2], "| 2.90× | 2.60–3.10 (3) |") {
		t.Errorf("with ranges:\n%s", many.String())
	}
	if got := ratio(row); got != "2.90× (2.60–3.10)" {
		t.Errorf("ratio = %q", got)
	}
	row.PyTorchBF16, row.BF16Ratios = &bench.PyTorchResult{TokensPerSec: 24000}, []float64{1.5}
	var bf bytes.Buffer
	printStepsMarkdown(&bf, []bench.Row{row}, true, true, false)
	lines = strings.Split(strings.TrimSpace(bf.String()), "\n")
	if !strings.HasSuffix(lines[0], "| synthgen / PyTorch | PyTorch bf16 autocast, 2 threads | synthgen / PyTorch bf16 | rounds' ratios |") ||
		!strings.HasSuffix(lines[2], "| 2.90× | 24,000 | 1.50× | 2.60–3.10 (3) |") || strings.Count(lines[1], "---") != 16 {
		t.Errorf("with bf16:\n%s", bf.String())
	}
	var fixed bytes.Buffer
	printStepRow(&fixed, row, true, false)
	if got := fixed.String(); !strings.Contains(got, "24000 1.50×") {
		t.Errorf("fixed-width row with bf16: %q", got)
	}
	// Beside synthgen's bf16 step, its own float32 step and the ratio.
	row.F32, row.F32Ratios = &bench.StepResult{TokensPerSec: 18000}, []float64{2.0, 2.2}
	var own bytes.Buffer
	printStepsMarkdown(&own, []bench.Row{row}, true, true, true)
	lines = strings.Split(strings.TrimSpace(own.String()), "\n")
	if !strings.HasSuffix(lines[0], "| synthgen / PyTorch bf16 | synthgen f32, 2 workers | bf16 / f32 | rounds' ratios |") ||
		!strings.HasSuffix(lines[2], "| 24,000 | 1.50× | 18,000 | 2.10× (2.00–2.20) | 2.60–3.10 (3) |") || strings.Count(lines[1], "---") != 18 {
		t.Errorf("with synthgen's f32:\n%s", own.String())
	}
	fixed.Reset()
	printStepRow(&fixed, row, true, true)
	if got := fixed.String(); !strings.Contains(got, "18000 2.10× (2.00–2.20)") {
		t.Errorf("fixed-width row with synthgen's f32: %q", got)
	}
	if got := ratio(bench.Row{}); got != "-" {
		t.Errorf("ratio without PyTorch = %q", got)
	}
}
