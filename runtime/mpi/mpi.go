// Package mpi is a small binding to MPI (Open MPI) for data-parallel
// training: the world communicator's rank and size, broadcast and in-place
// sum-allreduce of float32 and float64 buffers, barrier, finalize and
// abort, plus a watchdog that aborts the job when a collective call waits
// too long for the other ranks, and a reaper that kills a rank's Open MPI
// daemon when it has not ended an aborted job AbortGrace later (as when a
// machine is unreachable).
//
// The binding is compiled only with the build tag mpi, which needs cgo and
// the Open MPI headers and library (Debian: apt-get install openmpi-bin
// libopenmpi-dev; they are found with pkg-config's "ompi"):
//
//	go build -tags mpi ./cmd/synth
//	mpirun -np 2 ./synth train ...
//
// Without the tag the package is pure Go and acts as a world of one rank:
// Init succeeds when the process was not started as one of several MPI
// ranks, and otherwise returns an error wrapping ErrNoMPI that says how to
// rebuild; the collective calls of a one-rank world leave their buffers as
// they are.
//
// Every call of a Comm may be made from any goroutine; the calls are
// serialised by a mutex (MPI_THREAD_SERIALIZED), except Abort, which never
// waits.
package mpi

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoMPI is the error of Init in a program built without the mpi tag
// when the process is one of several MPI ranks.
var ErrNoMPI = errors.New("built without MPI: rebuild with -tags mpi; needs libopenmpi-dev")

// Enabled reports whether the program was built with the mpi tag (and so
// links MPI).
const Enabled = enabled

// Launched reports the world size an MPI launcher (mpirun or mpiexec of
// Open MPI, MPICH's Hydra, Slurm's srun with PMI) announced to this
// process in its environment, and whether there was one.
func Launched() (size int, ok bool) {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"} {
		if v := os.Getenv(k); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return n, true
			}
		}
	}
	if os.Getenv("PMIX_RANK") != "" || os.Getenv("OMPI_COMM_WORLD_RANK") != "" {
		return 0, true // launched, size unknown
	}
	return 0, false
}

// Comm is the world communicator: every rank of the job. Make it with
// Init; its methods are safe for concurrent use.
type Comm struct {
	rank, size int

	mu        sync.Mutex // serialises the MPI calls
	finalized bool

	// The call in progress, for the watchdog: its name and when it began
	// (UnixNano; 0 when no call is in progress).
	busyOp    atomic.Value // string
	busySince atomic.Int64

	statsMu sync.Mutex
	stats   map[string]*Stat

	wdStop chan struct{}

	reaper *reaper // nil when none was started
}

// Stat is the time spent in one kind of collective call.
type Stat struct {
	Calls int           // calls made
	Bytes int64         // bytes of the buffers passed (per rank)
	Time  time.Duration // wall time inside the calls, waiting for the other ranks included
}

var (
	worldMu sync.Mutex
	world   *Comm
	// worldErr is Init's error, returned again by later calls.
	worldErr error
)

// Init initialises MPI (once per process; later calls return the same
// Comm) and returns the world communicator. Without the mpi build tag it
// returns a one-rank world, or an error wrapping ErrNoMPI when the process
// was launched as one of several ranks.
func Init() (*Comm, error) {
	worldMu.Lock()
	defer worldMu.Unlock()
	if world != nil || worldErr != nil {
		return world, worldErr
	}
	rank, size, err := initMPI()
	if err != nil {
		worldErr = fmt.Errorf("mpi: init: %w", err)
		return nil, worldErr
	}
	world = &Comm{rank: rank, size: size, stats: map[string]*Stat{}}
	if size > 1 {
		world.reaper = startReaper(AbortGrace)
	}
	return world, nil
}

// Rank is this process's rank, 0 … Size()−1.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// errFinalized is the error of a call after Finalize.
var errFinalized = errors.New("MPI is finalized")

// call runs f under the mutex as the call op on n bytes, timing it and
// showing it to the watchdog.
func (c *Comm) call(op string, bytes int64, f func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized {
		return fmt.Errorf("mpi: %s: %w", op, errFinalized)
	}
	t0 := time.Now()
	c.busyOp.Store(op)
	c.busySince.Store(t0.UnixNano())
	err := f()
	c.busySince.Store(0)
	d := time.Since(t0)
	c.statsMu.Lock()
	s := c.stats[op]
	if s == nil {
		s = &Stat{}
		c.stats[op] = s
	}
	s.Calls++
	s.Bytes += bytes
	s.Time += d
	c.statsMu.Unlock()
	if err != nil {
		return fmt.Errorf("mpi: rank %d of %d: %s: %w", c.rank, c.size, op, err)
	}
	return nil
}

// maxCount is the most elements passed to one MPI call (its counts are C
// ints); longer buffers go in pieces.
const maxCount = 1 << 30

// AllreduceFloat32 replaces buf, on every rank, by the element-wise sum of
// every rank's buf (MPI_Allreduce, MPI_SUM, in place). Every rank must
// pass a buffer of the same length.
func (c *Comm) AllreduceFloat32(buf []float32) error {
	return c.call("MPI_Allreduce", int64(4*len(buf)), func() error {
		for lo := 0; lo < len(buf); lo += maxCount {
			if err := allreduceF32(buf[lo:min(lo+maxCount, len(buf))]); err != nil {
				return err
			}
		}
		return nil
	})
}

// AllreduceFloat64 is AllreduceFloat32 for float64 buffers.
func (c *Comm) AllreduceFloat64(buf []float64) error {
	return c.call("MPI_Allreduce", int64(8*len(buf)), func() error {
		for lo := 0; lo < len(buf); lo += maxCount {
			if err := allreduceF64(buf[lo:min(lo+maxCount, len(buf))]); err != nil {
				return err
			}
		}
		return nil
	})
}

// BcastFloat32 copies root's buf into every other rank's buf (MPI_Bcast).
// Every rank must pass a buffer of the same length.
func (c *Comm) BcastFloat32(buf []float32, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: MPI_Bcast: root %d is not a rank of a world of %d", root, c.size)
	}
	return c.call("MPI_Bcast", int64(4*len(buf)), func() error {
		for lo := 0; lo < len(buf); lo += maxCount {
			if err := bcastF32(buf[lo:min(lo+maxCount, len(buf))], root); err != nil {
				return err
			}
		}
		return nil
	})
}

// BcastFloat64 is BcastFloat32 for float64 buffers.
func (c *Comm) BcastFloat64(buf []float64, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: MPI_Bcast: root %d is not a rank of a world of %d", root, c.size)
	}
	return c.call("MPI_Bcast", int64(8*len(buf)), func() error {
		for lo := 0; lo < len(buf); lo += maxCount {
			if err := bcastF64(buf[lo:min(lo+maxCount, len(buf))], root); err != nil {
				return err
			}
		}
		return nil
	})
}

// Barrier returns once every rank has called it (MPI_Barrier).
func (c *Comm) Barrier() error {
	return c.call("MPI_Barrier", 0, barrier)
}

// Finalize shuts MPI down (MPI_Finalize); every rank must call it before
// exiting normally, and no call but Abort may follow. A second call does
// nothing.
func (c *Comm) Finalize() error {
	c.StopWatchdog()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized {
		return nil
	}
	c.finalized = true
	err := finalize()
	if r := c.reaper; r != nil && r.released.CompareAndSwap(false, true) {
		releaseReaper(r) // a normal end: the daemon is not to be killed
	}
	if err != nil {
		return fmt.Errorf("mpi: rank %d of %d: MPI_Finalize: %w", c.rank, c.size, err)
	}
	return nil
}

// AbortGrace is how long the Open MPI daemon of a rank that ended
// abnormally (MPI_Abort, killed, or exited without MPI_Finalize) may take
// to end before the rank's reaper kills it (SIGKILL).
//
// An abnormal end of a rank makes its daemon (mpirun on the launching
// machine, orted on the others) end the job, and mpirun then waits until
// every remote daemon confirms that its ranks are gone. When a machine is
// unreachable, that confirmation never comes: mpirun and the remote orted
// wait on TCP connections whose loss the kernel reports only when Open
// MPI's out-of-band keepalive gives up (oob_tcp_keepalive_time 300 s + 9
// probes × 20 s with Open MPI 4.1) or, while a message is unacknowledged,
// as the abort's are, when the kernel's retransmissions do
// (net.ipv4.tcp_retries2: about 15 minutes) — in practice until the link
// comes back. So Init, in a job of several ranks on Linux ≥ 5.3, starts a small
// process per rank, its reaper, which holds the rank's daemon by a pidfd
// (a recycled pid is never signalled) and, if the rank ends without
// Finalize and the daemon still runs AbortGrace later, kills it (SIGKILL:
// a daemon stuck this way is deaf to SIGTERM, which Open MPI 4.1's mpirun
// answers with "abort is already in progress" or a crash in
// PMIx_Finalize). Every rank of a job cut in two reaches its watchdog, or
// is killed by its daemon, so the daemons on both sides go. A working
// daemon ends an aborted job in well under a second, and the reaper then
// exits without doing anything; so does it after Finalize, or when the
// daemon ends first. It is started only when the rank's parent is an Open
// MPI daemon (mpirun, mpiexec, orterun, orted, prterun, prted).
const AbortGrace = 5 * time.Second

// reaper is a rank's reaper process (see AbortGrace).
type reaper struct {
	daemon    string // the daemon's name: mpirun, orted…
	daemonPID int
	pid       int // the reaper's
	wfd       int // the pipe that tells it the rank ends normally

	released atomic.Bool // told so (by Finalize)
}

// Abort ends every rank of the job with exit status code (MPI_Abort); it
// does not return. It does not wait for a call in progress, so it may be
// called while another goroutine is blocked in one. This rank's Open MPI
// daemon is killed if it still runs AbortGrace later (see AbortGrace). In
// a one-rank world without MPI it exits the process.
func (c *Comm) Abort(code int) {
	c.abort(code, nil)
}

// abort is Abort, saying on w (when not nil) which daemon the reaper ends.
func (c *Comm) abort(code int, w io.Writer) {
	if r := c.reaper; r != nil && !r.released.Load() && w != nil {
		fmt.Fprintf(w, "mpi: rank %d of %d: calling MPI_Abort; this machine's %s (pid %d) is killed if it has not ended the job %s later (as when a machine is unreachable)\n",
			c.rank, c.size, r.daemon, r.daemonPID, AbortGrace)
	}
	abort(code)
	os.Exit(code) // not reached with MPI
}

// Stats is the time spent so far in each kind of call, by MPI function
// name ("MPI_Allreduce", "MPI_Bcast", "MPI_Barrier").
func (c *Comm) Stats() map[string]Stat {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	m := make(map[string]Stat, len(c.stats))
	for k, v := range c.stats {
		m[k] = *v
	}
	return m
}

// Watchdog aborts the job (Abort(1)) when one call has waited longer than
// timeout for the other ranks, after writing why to w: a rank that is
// stopped, deadlocked or on an unreachable machine would otherwise leave
// the others blocked forever; the daemons that would wait for an
// unreachable machine are killed AbortGrace after the abort (see
// AbortGrace). (A rank that exits or is killed needs no watchdog: mpirun
// ends the job at once.) The timeout must exceed the longest time a rank
// may legitimately wait, such as rank 0's evaluations and saves. A second
// call replaces the first; timeout ≤ 0 stops it.
func (c *Comm) Watchdog(timeout time.Duration, w io.Writer) {
	c.StopWatchdog()
	if timeout <= 0 || c.size < 2 {
		return
	}
	stop := make(chan struct{})
	c.statsMu.Lock()
	c.wdStop = stop
	c.statsMu.Unlock()
	tick := min(time.Second, timeout/4)
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				since := c.busySince.Load()
				if since == 0 {
					continue
				}
				if waited := now.Sub(time.Unix(0, since)); waited > timeout {
					op, _ := c.busyOp.Load().(string)
					fmt.Fprintf(w, "mpi: rank %d of %d: %s has waited %s for the other ranks (watchdog timeout %s): a rank is stopped, stuck or unreachable; aborting the job\n",
						c.rank, c.size, op, waited.Round(time.Second), timeout)
					c.abort(1, w)
				}
			}
		}
	}()
}

// StopWatchdog stops the watchdog, if one runs.
func (c *Comm) StopWatchdog() {
	c.statsMu.Lock()
	defer c.statsMu.Unlock()
	if c.wdStop != nil {
		close(c.wdStop)
		c.wdStop = nil
	}
}
