//go:build linux

package bf16proof

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

// TestAMXSurvivesSignals runs the AMX kernel (tile state loaded, used and
// released inside each call) on a locked thread while another thread
// sends that thread SIGURG — the signal of Go's asynchronous preemption —
// as fast as it can, and a third goroutine forces garbage collections
// (whose stop-the-world preempts running goroutines with SIGURG). Every
// result must equal, bit for bit, the one computed without signals: the
// kernel saves the tile data (XTILEDATA) in the signal frame and restores
// it on sigreturn, and Go never preempts inside assembly (not an async
// safe point), so tile state cannot leak between goroutines.
func TestAMXSurvivesSignals(t *testing.T) {
	skipWithoutAMX(t)
	const k = 2048
	r := rand.New(rand.NewPCG(9, 10))
	c0, a, _, bp := gemmCase(r, k)
	want := slices.Clone(c0)
	if err := Gemm32(want, a, bp, k); err != nil {
		t.Fatal(err)
	}

	var stop atomic.Bool
	var sent, calls atomic.Int64
	tids := make(chan int, 2)
	var wg sync.WaitGroup
	errs := make(chan string, 2)
	for w := 0; w < 2; w++ { // two AMX threads: the OS also switches tile state between them
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids <- syscall.Gettid()
			c := make([]float32, len(c0))
			for !stop.Load() {
				copy(c, c0)
				if err := Gemm32(c, a, bp, k); err != nil {
					errs <- err.Error()
					return
				}
				calls.Add(1)
				if !slices.Equal(c, want) {
					for i := range c {
						if c[i] != want[i] {
							errs <- "result under signals differs at element " + strconv.Itoa(i)
							return
						}
					}
				}
			}
		}()
	}
	tid1, tid2 := <-tids, <-tids
	pid := syscall.Getpid()
	wg.Add(2)
	go func() { // signal storm on the AMX threads
		defer wg.Done()
		for !stop.Load() {
			for _, tid := range []int{tid1, tid2} {
				if err := syscall.Tgkill(pid, tid, syscall.SIGURG); err == nil {
					sent.Add(1)
				}
			}
		}
	}()
	go func() { // stop-the-world preemptions
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
		t.Fatalf("no overlap: %d calls, %d signals", calls.Load(), sent.Load())
	}
	t.Logf("%d AMX calls (k=%d, each loads, computes, stores and releases tiles) on 2 threads, %d SIGURG sent to them: all results identical", calls.Load(), k, sent.Load())
}
