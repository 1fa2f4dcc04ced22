package synth

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
)

// TestSampleNaN: a model whose logits are NaN (broken weights) makes
// Sample an error, never a byte.
func TestSampleNaN(t *testing.T) {
	m, err := New(small.Spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.net.Params {
		if p.Name == "lnf.bias" {
			p.Data[0] = float32(math.NaN())
		}
	}
	for _, temp := range []float64{0, 1} {
		out, err := m.Sample(context.Background(), []byte("The "), SampleOptions{Len: 4, Temp: temp})
		if err == nil || !strings.Contains(err.Error(), "NaN") || len(out) != 0 {
			t.Errorf("temp %g: sampled %q, %v; want an error and no byte", temp, out, err)
		}
	}
}
