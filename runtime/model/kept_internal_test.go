package model

import (
	"math/rand/v2"
	"testing"

	"github.com/synthgen/synthgen/runtime/bf16"
	"github.com/synthgen/synthgen/runtime/kernels"
)

// TestKeptBlocks: a workspace has the attention's [N, N] blocks A exactly
// when its path keeps them (keepsProbs: not on the shared path, not on a
// single component's strip path from recomputeN), and WorkspaceBytes
// counts them alike; a workspace built without them runs a bf16 step and
// gives attention maps; and when the model is switched to a path that keeps
// them (float32 after bf16), its next forward gives the workspace its
// blocks, with the loss of a workspace built for that path, bit for bit.
func TestKeptBlocks(t *testing.T) {
	l, err := bf16.Best(bf16.AMX)
	if err != nil {
		l = bf16.Go
	}
	kn, err := bf16.New(l)
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { recomputeN = n }(recomputeN)
	recomputeN = 0 // the strip path makes the probabilities again at every N
	for _, c := range []struct {
		spec string
		keep bool
	}{
		{"vanilla", false}, {"dense", false}, {"random", false}, {"factorized_random", false},
		{"random_vanilla", true}, {"factorized_dense", true}, {"enc_vanilla", false},
	} {
		k, err := kernels.Lookup(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(k.Spec, k, 3)
		if err != nil {
			t.Fatal(err)
		}
		const batch = 2
		f32Bytes := m.WorkspaceBytes(batch)
		m.SetBF16(kn)
		if m.keepsProbs() != c.keep {
			t.Fatalf("%s: keepsProbs %v, want %v", c.spec, m.keepsProbs(), c.keep)
		}
		ws := m.NewWorkspace(batch)
		for i := range ws.lay {
			if (ws.lay[i].a != nil) != c.keep {
				t.Fatalf("%s: layer %d has A: %v, want %v", c.spec, i, ws.lay[i].a != nil, c.keep)
			}
		}
		// In bf16, WorkspaceBytes adds the engine's packed operands and,
		// without A, leaves out a block a layer (each rounded to pages as
		// wsAlloc.add rounds it).
		pages := func(b int) int64 { return int64((b + 8<<10 - 1) / (8 << 10) * (8 << 10)) }
		want := f32Bytes + pages((batch*m.n*bf16.Pad(max(m.d, m.ffn, m.vocab))+16)*4)
		if !c.keep {
			want -= int64(len(m.layers)) * pages((batch*m.heads*m.n*m.n+16)*4)
		}
		if got := m.WorkspaceBytes(batch); got != want {
			t.Errorf("%s: WorkspaceBytes %d in bf16, want %d (%d in float32)", c.spec, got, want, f32Bytes)
		}

		r := rand.New(rand.NewPCG(7, 8))
		in, labels := make([]int32, batch*m.n), []int32{1, 0}
		for i := range in {
			in[i] = int32(r.IntN(256))
		}
		step := func(ws *Workspace) float64 {
			var loss float64
			if m.classes > 0 {
				loss = m.ForwardClassify(ws, in, labels, batch)
			} else {
				loss = m.Forward(ws, in, in, batch)
			}
			dst := make([]float32, m.n*m.n)
			m.AttentionMap(ws, batch-1, len(m.layers)-1, m.heads-1, dst)
			m.Backward(ws)
			return loss
		}
		if loss := step(ws); loss != loss {
			t.Fatalf("%s: bf16 loss %v", c.spec, loss)
		}
		m.SetBF16(nil)
		switched := step(ws)
		if ws.lay[0].a == nil {
			t.Fatalf("%s: the float32 forward left the workspace without A", c.spec)
		}
		if fresh := step(m.NewWorkspace(batch)); switched != fresh {
			t.Errorf("%s: float32 loss %v on the switched workspace, %v on a new one", c.spec, switched, fresh)
		}
	}
}
