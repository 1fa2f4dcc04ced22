// Package parallel is a fixed pool of goroutine workers that run numbered
// tasks. A pool is fed one job at a time: Run hands out the task numbers
// 0..n−1 to the workers (the calling goroutine is one of them) and returns
// when every task has finished. Nothing is allocated per Run, so a training
// step can use a pool without touching the heap.
//
// Between jobs the workers spin briefly (a training step calls Run hundreds
// of times in quick succession) and then block on a channel, so an idle
// pool costs nothing.
//
// Which worker runs which task is not fixed, so a job whose results must not
// depend on the number of workers has to make each task's arithmetic depend
// on the task number only (per-worker scratch is fine as long as a task
// never reads what an earlier task left in it).
package parallel

import (
	"runtime"
	"sync/atomic"
)

// Job is work split into numbered tasks. Run(worker, task) is called once for
// every task number; worker (0 ≤ worker < Pool.Size()) identifies the
// goroutine running it, for per-worker scratch buffers. Implement Job with a
// pointer receiver on a long-lived struct so that passing it to Pool.Run does
// not allocate.
type Job interface {
	Run(worker, task int)
}

// spins is how many times a waiting goroutine yields (runtime.Gosched, a
// few hundred ns each when nothing else is runnable) before it blocks on
// its channel: long enough to bridge the gaps between the jobs of a
// training step (a worker that runs out of tasks waits for the others'
// last ones), short enough that an idle pool soon stops using the CPU.
const spins = 4000

// Pool is a fixed set of workers. Its methods must not be called
// concurrently; Run is not reentrant (a task must not call Run on its pool).
//
// The hand-offs are channel tokens, one per helper per job and one back
// per job, so none can be lost: Run puts a token in every helper's start
// channel (capacity 1; the helper took the previous job's before that job
// ended); the helper that finishes the job's last outstanding share puts
// one in done (capacity 1), which Run takes before it returns. Waiting
// goroutines spin on the channel's length first, and block only when the
// spin runs out.
type Pool struct {
	n       int
	spins   int             // yields before a wait blocks
	helpers []chan struct{} // per helper: its start tokens
	closed  atomic.Bool

	job     Job
	spans   []span       // per worker: its share of the current job's tasks
	pending atomic.Int64 // helpers not yet done with the current job
	done    chan struct{}
}

// span is a worker's share of a job's task numbers, [next, end), claimed
// one at a time from the front (by its worker, then by any worker that has
// run out of its own); padded to a cache line so that the workers' counters
// do not share one.
type span struct {
	next atomic.Int64
	end  int64
	_    [48]byte
}

// New starts a pool of n workers: n−1 goroutines plus the goroutine calling
// Run. n < 1 means runtime.GOMAXPROCS(0). Close stops the goroutines.
func New(n int) *Pool { return newPool(n, spins) }

// newPool is New with the spin count (the tests make every wait block).
func newPool(n, spin int) *Pool {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: n, spins: spin, done: make(chan struct{}, 1), spans: make([]span, n)}
	for w := 1; w < n; w++ {
		start := make(chan struct{}, 1)
		p.helpers = append(p.helpers, start)
		go p.loop(w, start)
	}
	return p
}

// Size is the number of workers, the caller included.
func (p *Pool) Size() int { return p.n }

// receive takes a token from c, spinning before it blocks; false when c
// is closed.
func (p *Pool) receive(c chan struct{}) bool {
	for i := 0; i < p.spins && len(c) == 0; i++ {
		runtime.Gosched()
	}
	_, ok := <-c
	return ok
}

// loop is a helper goroutine: take a start token, drain the job's tasks,
// report.
func (p *Pool) loop(w int, start chan struct{}) {
	for p.receive(start) {
		p.drain(w)
		if p.pending.Add(-1) == 0 {
			p.done <- struct{}{}
		}
	}
}

// drain runs worker w's share of the tasks, then helps with the others'.
// Worker w's share is the w-th contiguous range of the task numbers, so a
// worker tends to get the same part of the data in consecutive jobs (rows
// of activations it produced in the job before stay in its caches).
func (p *Pool) drain(w int) {
	for k := range p.spans {
		s := &p.spans[(w+k)%len(p.spans)]
		for {
			i := s.next.Add(1) - 1
			if i >= s.end {
				break
			}
			p.job.Run(w, int(i))
		}
	}
}

// Run calls job.Run for every task number in [0, tasks) across the workers
// and returns when all have returned.
func (p *Pool) Run(tasks int, job Job) {
	if tasks <= 0 {
		return
	}
	if len(p.helpers) == 0 || tasks == 1 {
		for i := 0; i < tasks; i++ {
			job.Run(0, i)
		}
		return
	}
	p.job = job
	for w := range p.spans {
		p.spans[w].next.Store(int64(tasks * w / p.n))
		p.spans[w].end = int64(tasks * (w + 1) / p.n)
	}
	p.pending.Store(int64(len(p.helpers)))
	for _, start := range p.helpers {
		start <- struct{}{}
	}
	p.drain(0)
	p.receive(p.done)
	p.job = nil
}

// Close stops the pool's goroutines; later Runs execute on the caller
// alone. Closing twice is harmless.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	for _, start := range p.helpers {
		close(start)
	}
	p.helpers = nil
}
