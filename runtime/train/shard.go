package train

import (
	"fmt"

	"github.com/synthgen/synthgen/runtime/model"
)

// GradReducer is the hook of data-parallel training: each of the
// processes (ranks) of a run computes the loss and gradients of its own
// share of every step's global batch, and a GradReducer sums them over the
// processes, so that every process clips and updates with the gradient of
// the mean loss over the whole batch (see Trainer.Distribute).
type GradReducer interface {
	// ReduceGrads is called by TrainStep on every process, after the
	// backward pass of step step. loss is this process's share of the
	// global mean loss (its own mean loss times its fraction of the
	// batch), and every non-frozen parameter's Grad holds its gradient
	// scaled the same way. ReduceGrads must replace each Grad by its sum
	// over the processes, in place, and return the sum of loss over the
	// processes; params is in the same order on every process.
	ReduceGrads(step int, loss float64, params []*model.Param) (float64, error)
}

// Share is the contiguous share of a global batch of batch sequences that
// rank of ranks computes: sequences [lo, hi), the first batch mod ranks
// ranks taking one more than the others.
func Share(batch, rank, ranks int) (lo, hi int) {
	q, r := batch/ranks, batch%ranks
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// shard is what Distribute sets: the share and the reducer.
type shard struct {
	reduce GradReducer
	lo, hi int     // sequences of the global batch this process computes
	weight float32 // (hi−lo)/Batch: this share's weight in the global mean
}

// Distribute makes t one of ranks processes of a data-parallel run, the
// one of rank rank: every step, the global batch of Cfg.Batch sequences
// (a classifier's: examples) is drawn from (seed, step) as before, t
// computes the loss and gradients of its share of it (Share; a
// classifier's share runs through model.ClassifyBatch, grouped by length
// within the share), scales them by its fraction of the batch, and
// r sums them over the processes before the gradient norm, the clipping
// and AdamW, so every process takes the same step, and the loss (t.Loss)
// is the global batch's mean. The result equals a one-process run's up to
// float32 rounding of the sums (the batch is cut differently), whatever
// the number of processes.
//
// A process that will not evaluate (evaluate false) gets a workspace of
// its share's size in place of one of the whole batch (its evaluations, if
// any, then run that many windows at a time). Distribute must be
// called before the first step; ranks = 1 leaves t as it is.
func (t *Trainer) Distribute(r GradReducer, rank, ranks int, evaluate bool) error {
	if ranks == 1 && rank == 0 {
		return nil
	}
	if ranks < 1 || rank < 0 || rank >= ranks {
		return fmt.Errorf("data-parallel training: rank %d of %d ranks", rank, ranks)
	}
	if r == nil {
		return fmt.Errorf("data-parallel training: no gradient reducer")
	}
	if unit := "sequence"; t.Cfg.Batch < ranks {
		if t.cls != nil {
			unit = "example"
		}
		return fmt.Errorf("data-parallel training: batch %d is smaller than the %d ranks: every rank needs at least one %s per step", t.Cfg.Batch, ranks, unit)
	}
	lo, hi := Share(t.Cfg.Batch, rank, ranks)
	t.shard = &shard{reduce: r, lo: lo, hi: hi, weight: float32(float64(hi-lo) / float64(t.Cfg.Batch))}
	if !evaluate {
		t.WS = t.Model.NewWorkspace(hi - lo)
		t.eval = &Evaluator{Model: t.Model, WS: t.WS, Batch: hi - lo}
	}
	return nil
}

// shardStep is the forward and backward of this process's share of the
// step's batch, and the reduction.
func (t *Trainer) shardStep(step int) error {
	s, n := t.shard, t.Model.Spec.N
	loss := t.Model.Forward(t.WS, t.Sampler.Inputs[s.lo*n:s.hi*n], t.Sampler.Targets[s.lo*n:s.hi*n], s.hi-s.lo)
	t.Model.Backward(t.WS)
	return t.reduceShard(step, loss)
}

// reduceShard scales the gradients of this process's share of the step's
// batch (whose mean loss is loss) by its fraction of the batch, and sums
// them and the weighted losses over the processes into the Grads and
// t.Loss.
func (t *Trainer) reduceShard(step int, loss float64) error {
	s := t.shard
	if s.weight != 1 {
		for _, p := range t.Model.Params {
			for i := range p.Grad {
				p.Grad[i] *= s.weight
			}
		}
	}
	sum, err := s.reduce.ReduceGrads(step, loss*float64(s.hi-s.lo)/float64(t.Cfg.Batch), t.Model.Params)
	if err != nil {
		return fmt.Errorf("step %d: gradient reduction: %w", step, err)
	}
	t.Loss = sum
	return nil
}
