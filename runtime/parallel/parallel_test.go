package parallel

import (
	"sync/atomic"
	"testing"
	"time"
)

type countJob struct {
	hits    []atomic.Int32
	workers []atomic.Int32
	slow    bool
}

func (j *countJob) Run(worker, task int) {
	j.hits[task].Add(1)
	j.workers[worker].Add(1)
	if j.slow && task%7 == 0 {
		time.Sleep(50 * time.Microsecond)
	}
}

func TestRunEveryTaskOnce(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8} {
		p := New(n)
		if p.Size() != n {
			t.Fatalf("Size %d, want %d", p.Size(), n)
		}
		for round, tasks := range []int{0, 1, 2, 5, 100, 1000, 3, 64} {
			j := &countJob{hits: make([]atomic.Int32, tasks), workers: make([]atomic.Int32, n), slow: round%2 == 1}
			p.Run(tasks, j)
			for i := range j.hits {
				if h := j.hits[i].Load(); h != 1 {
					t.Fatalf("n=%d tasks=%d: task %d ran %d times", n, tasks, i, h)
				}
			}
		}
		// Let the helpers park, then run again: they must wake up.
		time.Sleep(5 * time.Millisecond)
		j := &countJob{hits: make([]atomic.Int32, 500), workers: make([]atomic.Int32, n), slow: true}
		p.Run(500, j)
		for i := range j.hits {
			if j.hits[i].Load() != 1 {
				t.Fatalf("n=%d after parking: task %d ran %d times", n, i, j.hits[i].Load())
			}
		}
		if n > 1 {
			used := 0
			for i := range j.workers {
				if j.workers[i].Load() > 0 {
					used++
				}
			}
			if used < 2 {
				t.Logf("n=%d: only %d worker(s) took tasks (allowed, but unusual)", n, used)
			}
		}
		p.Close()
		p.Close()
		j = &countJob{hits: make([]atomic.Int32, 10), workers: make([]atomic.Int32, n)}
		p.Run(10, j) // after Close: on the caller
		for i := range j.hits {
			if j.hits[i].Load() != 1 {
				t.Fatalf("after Close: task %d ran %d times", i, j.hits[i].Load())
			}
		}
	}
}

type nopJob struct{ sum atomic.Int64 }

func (j *nopJob) Run(_, task int) { j.sum.Add(int64(task)) }

func TestNoAllocs(t *testing.T) {
	p := New(2)
	defer p.Close()
	j := &nopJob{}
	allocs := testing.AllocsPerRun(1000, func() { p.Run(16, j) })
	if allocs != 0 {
		t.Fatalf("Run allocates %v times", allocs)
	}
}

func BenchmarkRun(b *testing.B) {
	p := New(2)
	defer p.Close()
	j := &nopJob{}
	for b.Loop() {
		p.Run(16, j)
	}
}

// TestNoLostWakeups runs many short jobs with the spins off, so that every
// wait blocks on its channel and every hand-off goes through a token, with
// more workers than processors (the scheduling under which an earlier
// flag-based hand-off lost a wake-up and hung): each job must finish, with
// every task run once.
func TestNoLostWakeups(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		p := newPool(n, 0)
		j := &countJob{hits: make([]atomic.Int32, 7), workers: make([]atomic.Int32, n)}
		for round := range 20000 {
			tasks := 2 + round%6
			p.Run(tasks, j)
			for i := range tasks {
				if h := j.hits[i].Swap(0); h != 1 {
					t.Fatalf("n=%d round %d: task %d ran %d times", n, round, i, h)
				}
			}
		}
		p.Close()
	}
}
