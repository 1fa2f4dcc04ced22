//go:build linux

package bf16

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestAMXSurvivesPreemption runs the AMX kernel (tile state configured,
// used and released inside each call) on two locked threads while another
// thread sends them SIGURG — Go's asynchronous preemption signal — as fast
// as it can and a fourth goroutine forces garbage collections (whose
// stop-the-world preempts running goroutines), plus unlocked goroutines
// that the scheduler moves between threads. Every result must equal, bit
// for bit, the one computed without signals.
func TestAMXSurvivesPreemption(t *testing.T) {
	kn, err := New(AMX)
	if err != nil {
		t.Skipf("AMX not available: %v", err)
	}
	const m, n, k = 70, 64, 1024 // full and edge tiles
	r := rand.New(rand.NewPCG(9, 10))
	a, b, c0 := randn(r, m*k), randn(r, n*k), randn(r, m*n)
	want := slices.Clone(c0)
	gemm(kn, want, a, b, m, n, k, 512, true, true)

	var stop atomic.Bool
	var sent, calls atomic.Int64
	tids := make(chan int, 2)
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	worker := func(lock bool) {
		defer wg.Done()
		if lock {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- syscall.Gettid()
		}
		c := make([]float32, len(c0))
		for !stop.Load() {
			copy(c, c0)
			gemm(kn, c, a, b, m, n, k, 512, true, true)
			calls.Add(1)
			for i := range c {
				if c[i] != want[i] {
					errs <- "result under preemption differs at element " + strconv.Itoa(i)
					return
				}
			}
		}
	}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go worker(w < 2)
	}
	tid1, tid2 := <-tids, <-tids
	pid := syscall.Getpid()
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			for _, tid := range []int{tid1, tid2} {
				if err := syscall.Tgkill(pid, tid, syscall.SIGURG); err == nil {
					sent.Add(1)
				}
			}
		}
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			runtime.GC()
			time.Sleep(time.Millisecond)
		}
	}()
	time.Sleep(400 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if calls.Load() == 0 || sent.Load() == 0 {
		t.Fatalf("no overlap: %d products, %d signals", calls.Load(), sent.Load())
	}
	t.Logf("%d AMX products (%d×%d×%d) on 4 goroutines, %d SIGURG sent: all results identical", calls.Load(), m, n, k, sent.Load())
}
