package train

import (
	"fmt"
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

// ranksRed is one rank's reducer of n in-process ranks run one after the
// other in a step, ranks n−1 … 1 first: those record their contribution
// (and return their loss alone), rank 0 adds the others' to its own in
// rank order, as an allreduce would.
type ranksRed struct {
	rank int
	all  *ranksState
}

type ranksState struct {
	loss  []float64
	grads [][]float32
}

func (r ranksRed) ReduceGrads(step int, loss float64, params []*model.Param) (float64, error) {
	s := r.all
	if r.rank != 0 {
		var g []float32
		for _, q := range params {
			g = append(g, q.Grad...)
		}
		s.loss[r.rank], s.grads[r.rank] = loss, g
		return loss, nil
	}
	sum := loss
	for k := 1; k < len(s.grads); k++ {
		if s.grads[k] == nil {
			return 0, fmt.Errorf("step %d: no contribution of rank %d", step, k)
		}
		o := 0
		for _, q := range params {
			for i := range q.Grad {
				q.Grad[i] += s.grads[k][o]
				o++
			}
		}
		sum += s.loss[k]
		s.grads[k] = nil
	}
	return sum, nil
}

// TestDistributeClassifier: 2 and 3 classifier trainers, each computing
// its share of the batch of examples of unequal lengths (7 = 4+3 and
// 3+2+2) and summing through a reducer, take the steps of one trainer
// computing the whole batch, to float32 rounding (the tolerances of
// TestDistribute); a batch smaller than the ranks is refused.
func TestDistributeClassifier(t *testing.T) {
	set := classFile(t, "train.tsv", 80, 3)
	cfg := DefaultConfig(6, 7)
	if err := newClassTrainer(t, set, cfg, 1).Distribute(ranksRed{0, &ranksState{}}, 0, 8, true); err == nil ||
		!strings.Contains(err.Error(), "batch 7 is smaller than the 8 ranks") || !strings.Contains(err.Error(), "example") {
		t.Errorf("8 ranks for a batch of 7 examples: %v", err)
	}
	for _, n := range []int{2, 3} {
		whole := newClassTrainer(t, set, cfg, 2)
		st := &ranksState{loss: make([]float64, n), grads: make([][]float32, n)}
		ranks := make([]*Trainer, n)
		for r := range ranks {
			ranks[r] = newClassTrainer(t, set, cfg, 1)
			if err := ranks[r].Distribute(ranksRed{r, st}, r, n, r == 0); err != nil {
				t.Fatal(err)
			}
		}
		worstLoss, worstW := 0.0, 0.0
		mixed := 0 // steps whose shares hold examples of unequal lengths
		for step := range cfg.Steps {
			if err := whole.TrainStep(); err != nil {
				t.Fatal(err)
			}
			for r := n - 1; r >= 1; r-- { // the other ranks' contributions, without their updates
				if err := ranks[r].classStep(step); err != nil {
					t.Fatal(err)
				}
			}
			if err := ranks[0].TrainStep(); err != nil {
				t.Fatal(err)
			}
			for _, tr := range ranks {
				s := tr.shard
				b := tr.cls.bSeqs[s.lo:s.hi]
				for _, q := range b[1:] {
					if len(q) != len(b[0]) {
						mixed++
						break
					}
				}
			}
			if d := math.Abs(ranks[0].Loss-whole.Loss) / whole.Loss; d > 1e-6 {
				t.Errorf("%d ranks, step %d: loss %v, want %v", n, step, ranks[0].Loss, whole.Loss)
			}
			worst := 0.0
			for i, p := range whole.Model.Params {
				q := ranks[0].Model.Params[i]
				for j := range p.Data {
					worst = math.Max(worst, math.Abs(float64(p.Data[j]-q.Data[j])))
				}
				for _, o := range ranks[1:] { // the other ranks follow rank 0
					copy(o.Model.Params[i].Data, q.Data)
				}
			}
			worstLoss = math.Max(worstLoss, math.Abs(ranks[0].Loss-whole.Loss)/whole.Loss)
			worstW = math.Max(worstW, worst)
			if worst > 1e-5 { // float32 rounding of the sums, through AdamW
				t.Errorf("%d ranks, step %d: weights differ by %g", n, step, worst)
			}
		}
		t.Logf("%d ranks vs one trainer, %d steps: loss within %.3g (relative), weights within %.3g", n, cfg.Steps, worstLoss, worstW)
		if mixed == 0 {
			t.Errorf("%d ranks: no share held examples of unequal lengths", n)
		}
	}
}
