package train

import (
	"context"
	"fmt"
	"math"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/model"
)

// Result is an evaluation: the mean next-byte cross-entropy over the
// scored bytes.
type Result struct {
	Loss    float64 // nats per byte
	Windows int     // windows scored
	Tokens  int     // bytes scored: Windows·n
}

// BPB is the loss in bits per byte.
func (r Result) BPB() float64 { return r.Loss / math.Ln2 }

// Evaluator scores texts with a model, Batch windows per forward pass.
type Evaluator struct {
	Model *model.Model
	WS    *model.Workspace // for at least Batch sequences
	Batch int

	in, tg []int32
}

// NewEvaluator makes an evaluator with its own workspace of batch sequences.
func NewEvaluator(m *model.Model, batch int) *Evaluator {
	if batch < 1 {
		batch = 1
	}
	return &Evaluator{Model: m, WS: m.NewWorkspace(batch), Batch: batch}
}

// Evaluate is the model card's loss of text: the consecutive,
// non-overlapping windows text[k·(n+1) : (k+1)·(n+1)] (at most limit of
// them when limit > 0; a trailing partial window dropped), each scored on
// predicting its bytes 1..n from the bytes before; the mean cross-entropy
// over all scored bytes.
func (e *Evaluator) Evaluate(text []byte, limit int) (Result, error) {
	return e.EvaluateContext(context.Background(), text, limit)
}

// EvaluateContext is Evaluate, stopping with ctx's error between forward
// passes once ctx is done (and within one, between layers, when the
// workspace's interrupt says so: model.Workspace.SetInterrupt).
func (e *Evaluator) EvaluateContext(ctx context.Context, text []byte, limit int) (Result, error) {
	if e.Model.Classes() > 0 {
		return Result{}, fmt.Errorf("spec %q is a classifier: evaluate it on a labelled file (EvaluateClassify)", e.Model.Spec.Name)
	}
	n := e.Model.Spec.N
	k := data.NumWindows(text, n, limit)
	if k == 0 {
		return Result{}, fmt.Errorf("evaluation text of %d bytes holds no window of n+1 = %d bytes", len(text), n+1)
	}
	if err := data.CheckVocab("evaluation text", text[:k*(n+1)], e.Model.Spec.Vocab); err != nil {
		return Result{}, err
	}
	if len(e.in) < e.Batch*n {
		e.in = make([]int32, e.Batch*n)
		e.tg = make([]int32, e.Batch*n)
	}
	var sum float64
	for w := 0; w < k; w += e.Batch {
		if err := ctx.Err(); err != nil {
			return Result{}, fmt.Errorf("evaluation stopped: %w", context.Cause(ctx))
		}
		b := min(e.Batch, k-w)
		for i := 0; i < b; i++ {
			data.Window(text, n, w+i, e.in[i*n:(i+1)*n], e.tg[i*n:(i+1)*n])
		}
		loss := e.Model.Forward(e.WS, e.in[:b*n], e.tg[:b*n], b)
		if e.WS.Interrupted() {
			if ctx.Err() != nil {
				return Result{}, fmt.Errorf("evaluation stopped: %w", context.Cause(ctx))
			}
			return Result{}, fmt.Errorf("evaluation stopped: %w", ErrInterrupted)
		}
		sum += loss * float64(b*n)
	}
	r := Result{Windows: k, Tokens: k * n}
	r.Loss = sum / float64(r.Tokens)
	return r, nil
}
