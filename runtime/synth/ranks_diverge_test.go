package synth_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// perturbComm is one rank's communicator that, in its at-th gradient
// reduction, first moves one of its rank's weights: the rank's updates
// then diverge from the others' as a rank with a fault would.
type perturbComm struct {
	rankComm
	at, calls int
	run       *synth.Run // the rank's run, set once NewRun returns
}

func (c *perturbComm) AllreduceFloat32(b []float32) error {
	c.calls++
	if c.calls == c.at {
		// On the rank's goroutine, between its backward and its update:
		// no other goroutine reads the weights now.
		p := synth.NetworkOf(c.run.Model()).Params[0]
		p.Data[0] += 1e-3
	}
	return c.rankComm.AllreduceFloat32(b)
}

// TestRanksDivergence: on 3 in-process ranks, rank 2's weights moved
// after step 1 are caught by the periodic check at step 101 (the check
// runs before the update of every 100th step index): every rank stops
// with an error naming rank 2 and the step, after step 100, and no
// checkpoint of the diverged weights is written. The same run without the fault
// completes (the check has no false alarms).
func TestRanksDivergence(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	const n, steps = 3, 101
	for _, fault := range []bool{false, true} {
		g := newGroup(n)
		out := filepath.Join(dir, fmt.Sprintf("fault-%v.safetensors", fault))
		comms := make([]*perturbComm, n)
		errs := make([]error, n)
		last := 0 // rank 0's last completed step
		var wg sync.WaitGroup
		for r := range n {
			comms[r] = &perturbComm{rankComm: rankComm{g, r}}
			if fault && r == 2 {
				comms[r].at = 2 // the reduction of the second step, after step 1's update
			}
			wg.Add(1)
			go func() { // NewRun's start check is collective: every rank at once
				defer wg.Done()
				run, err := synth.NewRun(context.Background(), small.Spec, synth.Data(data), synth.Out(out), synth.Batch(3), synth.Steps(steps),
					synth.EvalEvery(0), synth.Workers(1), synth.OnEvent(func(e synth.Event) { last = e.Step }), synth.Ranks(comms[r]))
				if err != nil {
					errs[r] = err
					return
				}
				comms[r].run = run
				_, errs[r] = run.Train(context.Background())
			}()
		}
		wg.Wait()
		if !fault {
			for r, err := range errs {
				if err != nil {
					t.Fatalf("without a fault: rank %d: %v", r, err)
				}
			}
			if last != steps {
				t.Fatalf("without a fault: rank 0 ended at step %d, want %d", last, steps)
			}
			continue
		}
		if comms[2].calls < 2 {
			t.Fatalf("rank 2 made %d gradient reductions: the weight was never moved", comms[2].calls)
		}
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "the weights of rank 2 differ from rank 0's before step 101") {
				t.Errorf("rank %d: err = %v, want the weights of rank 2 named as differing before step 101", r, err)
			}
		}
		t.Logf("rank 0: %v", errs[0])
		if last != 100 {
			t.Errorf("rank 0's last completed step is %d, want 100", last)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the diverged run wrote a checkpoint (%v)", err)
		}
	}
}
