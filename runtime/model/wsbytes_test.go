package model_test

import (
	"runtime"
	"strings"
	"testing"
)

// TestWorkspaceBytes checks that WorkspaceBytes is what NewWorkspace (and
// the buffers a pass allocates on first use) really allocates, within 3%,
// for specs of every kind of attention and a few batches. A step on a
// workspace of one sequence runs first: the matrix engine's per-worker
// packing buffers, which do not depend on the batch, are then in place.
//
// "random/bf16" and "factorized_random/bf16" run their attention on the
// bf16 path (this CPU's best bf16 level), whose backward allocates
// ∂loss/∂P per head on first use.
func TestWorkspaceBytes(t *testing.T) {
	for _, name := range []string{"small", "dense", "factorized_dense", "factorized_random", "linear", "aft_full", "aft_local", "aft_conv", "odd_aft_full", "random/bf16", "factorized_random/bf16"} {
		for _, batch := range []int{2, 5, 16} {
			spec, bf := strings.CutSuffix(name, "/bf16")
			m := newModel(t, spec, 1)
			if bf {
				m.SetBF16(fastestBF16(t))
			}
			in := make([]int32, batch*m.Spec.N)
			ws1 := m.NewWorkspace(1)
			m.Forward(ws1, in[:m.Spec.N], in[:m.Spec.N], 1)
			m.Backward(ws1)
			est := m.WorkspaceBytes(batch)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ws := m.NewWorkspace(batch)
			m.Forward(ws, in, in, batch)
			m.Backward(ws)
			runtime.ReadMemStats(&after)
			got := int64(after.TotalAlloc - before.TotalAlloc)
			if r := float64(got) / float64(est); r < 0.97 || r > 1.03 {
				t.Errorf("%s batch %d: WorkspaceBytes %d, NewWorkspace and a step allocated %d (ratio %.3f)", name, batch, est, got, r)
			}
			runtime.KeepAlive(ws)
		}
	}
}
