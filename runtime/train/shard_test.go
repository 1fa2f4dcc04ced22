package train

import (
	"math"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/runtime/model"
)

// TestShare: the shares of the ranks are contiguous, cover the batch in
// rank order and differ in size by at most one.
func TestShare(t *testing.T) {
	for batch := 1; batch <= 40; batch++ {
		for ranks := 1; ranks <= batch; ranks++ {
			next := 0
			for r := range ranks {
				lo, hi := Share(batch, r, ranks)
				if lo != next || hi-lo < batch/ranks || hi-lo > batch/ranks+1 {
					t.Fatalf("Share(%d, %d, %d) = [%d, %d) after %d", batch, r, ranks, lo, hi, next)
				}
				next = hi
			}
			if next != batch {
				t.Fatalf("the shares of %d ranks end at %d of a batch of %d", ranks, next, batch)
			}
		}
	}
}

// pair is the reducer of two in-process ranks run one after the other:
// rank 1's step records its contribution (and returns it alone), rank 0's
// step adds it to its own.
type pair struct {
	loss  float64
	grads []float32
}

func (p *pair) ReduceGrads(step int, loss float64, params []*model.Param) (float64, error) {
	if p.grads == nil { // rank 1: record
		for _, q := range params {
			p.grads = append(p.grads, q.Grad...)
		}
		p.loss = loss
		return loss, nil
	}
	k := 0 // rank 0: rank 0's share plus rank 1's, as an allreduce in rank order
	for _, q := range params {
		for i := range q.Grad {
			q.Grad[i] += p.grads[k]
			k++
		}
	}
	sum := loss + p.loss
	p.grads = nil
	return sum, nil
}

// TestDistribute: two trainers, each computing half of the batch and
// summing through a reducer, take the step of one trainer computing the
// whole batch, to float32 rounding.
func TestDistribute(t *testing.T) {
	cfg := DefaultConfig(3, 4)
	whole := newTrainer(t, cfg, 2)
	r0, r1 := newTrainer(t, cfg, 1), newTrainer(t, cfg, 1)
	if err := r0.Distribute(nil, 0, 2, true); err == nil {
		t.Error("Distribute without a reducer: no error")
	}
	if err := r0.Distribute(&pair{}, 0, 5, true); err == nil || !strings.Contains(err.Error(), "batch 4 is smaller than the 5 ranks") {
		t.Errorf("5 ranks for a batch of 4: %v", err)
	}
	red := &pair{}
	if err := r0.Distribute(red, 0, 2, true); err != nil {
		t.Fatal(err)
	}
	if err := r1.Distribute(red, 1, 2, false); err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		if err := whole.TrainStep(); err != nil {
			t.Fatal(err)
		}
		// Rank 1's contribution: its share alone, without the update.
		r1.Sampler.Batch(step)
		if err := r1.shardStep(step); err != nil {
			t.Fatal(err)
		}
		if err := r0.TrainStep(); err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(r0.Loss-whole.Loss) / whole.Loss; d > 1e-6 {
			t.Errorf("step %d: loss %v, want %v", step, r0.Loss, whole.Loss)
		}
		worst := 0.0
		for i, p := range whole.Model.Params {
			q := r0.Model.Params[i]
			for j := range p.Data {
				worst = math.Max(worst, math.Abs(float64(p.Data[j]-q.Data[j])))
			}
			copy(r1.Model.Params[i].Data, q.Data) // rank 1 follows rank 0
		}
		if worst > 1e-5 { // float32 rounding of the sums, through AdamW
			t.Errorf("step %d: weights differ by %g", step, worst)
		}
	}
}
