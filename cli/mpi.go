package cli

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/runtime/mpi"
	"github.com/synthgen/synthgen/runtime/synth"
)

// defaultMPITimeout is -mpi-timeout's default: how long a rank may wait in
// one collective call (for rank 0's evaluations and saves, say) before the
// watchdog decides another rank is stuck and ends the job.
const defaultMPITimeout = 10 * time.Minute

// abortDelay is how long a rank other than 0 waits before reporting an
// error and aborting the job (see world.finish).
const abortDelay = 3 * time.Second

// world is this process's place in an MPI job started by mpirun.
type world struct {
	c      *mpi.Comm
	errOut io.Writer
}

// joinMPI joins the MPI job this process was started in by mpirun (or
// another MPI launcher), found from the environment, and returns nil
// outside one. A program built without the mpi tag that mpirun started as
// one of several ranks gets an error saying how to rebuild.
func joinMPI(e *env, timeout time.Duration) (*world, error) {
	if _, ok := mpi.Launched(); !ok {
		return nil, nil
	}
	c, err := mpi.Init()
	if err != nil {
		return nil, err
	}
	w := &world{c: c, errOut: e.errOut}
	if c.Size() > 1 {
		c.Watchdog(timeout, e.errOut)
	}
	return w, nil
}

// env is the environment of this rank's command: rank 0 prints plain
// progress lines (mpirun gives the ranks a pseudo-terminal, whatever its
// own output is), the others are silent but for errors.
func (w *world) env(e *env) *env {
	q := *e
	q.terminal = false
	if w.c.Rank() != 0 {
		q.out = io.Discard
	}
	return &q
}

// workers is the default goroutine count of a rank: the CPUs shared by the
// ranks on this machine.
func (w *world) workers() int {
	local, err := strconv.Atoi(os.Getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
	if err != nil || local < 1 {
		return 0
	}
	return max(1, runtime.GOMAXPROCS(0)/local)
}

// finish ends this rank's part of the job: MPI_Finalize after success; on
// an error, the error (naming the rank) and MPI_Abort, so that the other
// ranks, which may be waiting for this one, stop at once rather than at
// the watchdog's timeout. Many errors happen on every rank at once (ranks
// that do not match, a loss that is not finite): the ranks other than 0
// wait 3 seconds first, so that rank 0 alone reports them.
func (w *world) finish(err error) error {
	if err != nil && w.c.Size() > 1 {
		if w.c.Rank() != 0 {
			time.Sleep(abortDelay)
		}
		fmt.Fprintf(w.errOut, "synth train: rank %d of %d: %v\n", w.c.Rank(), w.c.Size(), err)
		w.c.Abort(1)
	}
	if ferr := w.c.Finalize(); err == nil && ferr != nil {
		err = ferr
	}
	return err
}

// report prints the cost of the run's gradient reductions.
func (w *world) report(e *env, run *synth.Run, sum *synth.Summary) {
	st := run.ReduceStats()
	if st.Ranks < 2 || st.Steps == 0 || sum == nil || sum.TokensPerSec <= 0 {
		return
	}
	plan := run.Plan()
	stepTime := time.Duration(float64(time.Second) * float64(plan.TokensPerStep()) / sum.TokensPerSec)
	per := st.Allreduce / time.Duration(st.Steps)
	unit := "sequences"
	if plan.Spec.IsClassifier() {
		unit = "examples"
	}
	fmt.Fprintf(e.out, "ranks: %d × %d worker(s); rank 0 computes %s [%d, %d) of each batch; allreduce %s per step per rank, %.2f ms per step in allreduce (%.0f%% of the %.2f ms step, waiting for the other ranks included), %.2f ms packing\n",
		st.Ranks, plan.Workers, unit, st.Lo, st.Hi, humanBytes(st.BytesPerStep), ms(per), 100*float64(per)/float64(stepTime), ms(stepTime), ms(st.Copy/time.Duration(st.Steps)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// humanBytes writes n bytes as 3.89 MB (10^6) or 1.2 kB.
func humanBytes(n int) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
