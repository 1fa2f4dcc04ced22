package synth_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/runtime/train"
)

// hugeBatch is a batch of spec small whose workspace does not fit in
// synth.MemoryLimit(); the test is skipped when the limit is unknown or
// holds even train.MaxBatch.
func hugeBatch(t *testing.T) int {
	t.Helper()
	limit, _ := synth.MemoryLimit()
	if limit == 0 {
		t.Skip("the machine's memory is unknown here: the check is skipped")
	}
	k, err := kernels.Lookup(small.Spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	net, err := model.New(small.Spec, k, 1)
	if err != nil {
		t.Fatal(err)
	}
	if net.WorkspaceBytes(train.MaxBatch) <= limit {
		t.Skipf("even batch %d of spec small fits in this machine's %d bytes", train.MaxBatch, limit)
	}
	return train.MaxBatch
}

// TestBatchOverMemory: a run whose batch needs more memory than the
// machine has is refused at once, with an error naming the batch, the
// estimate and the limit, and writes nothing (rather than dying with the
// runtime's "out of memory").
func TestBatchOverMemory(t *testing.T) {
	batch := hugeBatch(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "m.safetensors")
	t0 := time.Now()
	_, err := synth.NewRun(context.Background(), small.Spec, synth.Batch(batch), synth.Steps(1), synth.Out(out))
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("the refusal took %v", d)
	}
	wantErr(t, "NewRun", err, strconv.Itoa(batch), "GiB of memory", "the limit is", "AllowLargeMemory", "-force")
	var oe *synth.OptionError
	if !errors.As(err, &oe) || oe.Option != "Batch" {
		t.Errorf("error %v is not the Batch option's", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the refused run wrote %d files", len(ents))
	}

	// Evaluation: a batch of as many windows, on a text that holds them.
	m, err := synth.New(small.Spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	text := make([]byte, batch*(small.Spec.N+1))
	for i := range text {
		text[i] = byte('a' + i%26)
	}
	_, err = m.Evaluate(context.Background(), text, synth.EvalOptions{Batch: batch})
	wantErr(t, "Evaluate", err, "batch "+strconv.Itoa(batch), "GiB of memory", "the limit is", "AllowLargeMemory")
}
