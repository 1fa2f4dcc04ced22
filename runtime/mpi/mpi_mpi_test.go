//go:build mpi && cgo

package mpi

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv names the scenario a test binary started by mpirun runs.
const childEnv = "SYNTHGEN_MPI_CHILD"

// pidsEnv names a folder where the ranks of scenario "loop" write
// rank-<r>.pid.
const pidsEnv = "SYNTHGEN_MPI_PIDS"

// mpirun runs this test binary's test named test under mpirun -np np with
// scenario in childEnv, and returns its combined output, how long it took
// and its error. It skips t, saying why, when mpirun is not installed.
func mpirun(t *testing.T, np int, test, scenario string) (string, time.Duration, error) {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	args := []string{"-np", fmt.Sprint(np), "--oversubscribe"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), childEnv+"="+scenario)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	return string(out), time.Since(t0), err
}

// TestMPIRun runs TestWorld's scenarios on 2 ranks (and the collectives on 3).
func TestMPIRun(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in an mpirun child")
	}
	for _, np := range []int{2, 3} {
		out, d, err := mpirun(t, np, "TestWorld", "collectives")
		if err != nil || strings.Count(out, "--- PASS: TestWorld") != np {
			t.Fatalf("mpirun -np %d: %v after %s\n%s", np, err, d, out)
		}
	}
}

// TestMPIDeadRank: a rank killed while the other waits in an allreduce
// ends the job within seconds, with mpirun saying which rank died.
func TestMPIDeadRank(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in an mpirun child")
	}
	out, d, err := mpirun(t, 2, "TestWorld", "kill")
	if err == nil {
		t.Fatalf("the job succeeded although a rank was killed:\n%s", out)
	}
	if d > 20*time.Second {
		t.Errorf("the job took %s to end after a rank was killed", d)
	}
	if !strings.Contains(out, "signal 9") {
		t.Errorf("mpirun's output does not name the killed rank's signal:\n%s", out)
	}
	if killed(err) {
		t.Errorf("mpirun was killed (by a rank's reaper?) rather than ending the job itself: %v", err)
	}
	t.Logf("ended after %s: %v\n%s", d, err, out)
}

// TestMPIWatchdog: a rank that is alive but never joins the collective
// (stuck) is ended by the others' watchdog with a message that says so.
func TestMPIWatchdog(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in an mpirun child")
	}
	out, d, err := mpirun(t, 2, "TestWorld", "stuck")
	if err == nil {
		t.Fatalf("the job succeeded although a rank was stuck:\n%s", out)
	}
	if d > 20*time.Second {
		t.Errorf("the job took %s to end", d)
	}
	if !strings.Contains(out, "watchdog timeout 1s") || !strings.Contains(out, "aborting the job") {
		t.Errorf("no watchdog message:\n%s", out)
	}
	if !strings.Contains(out, "this machine's mpirun (pid") {
		t.Errorf("the abort does not say that its reaper watches mpirun:\n%s", out)
	}
	if killed(err) {
		t.Errorf("mpirun was killed (by a rank's reaper?) rather than ending the job itself: %v", err)
	}
	t.Logf("ended after %s: %v\n%s", d, err, out)
}

// TestMPIReaper: when a rank ends abnormally (here killed) and its daemon
// does not end the job (here mpirun is stopped, as one waiting forever for
// an unreachable machine would be), the rank's reaper kills the daemon
// AbortGrace later.
func TestMPIReaper(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in an mpirun child")
	}
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	dir := t.TempDir()
	args := []string{"-np", "2", "--oversubscribe"}
	if os.Geteuid() == 0 {
		args = append(args, "--allow-run-as-root")
	}
	args = append(args, os.Args[0], "-test.run=^TestWorld$", "-test.count=1")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), childEnv+"=loop", "SYNTHGEN_MPI_TIMEOUT=1m", pidsEnv+"="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var pids [2]int
	defer func() {
		cmd.Process.Kill()
		for _, pid := range pids {
			if pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for r := range pids {
		for {
			b, err := os.ReadFile(fmt.Sprintf("%s/rank-%d.pid", dir, r))
			if err == nil {
				if pids[r], err = strconv.Atoi(string(b)); err != nil {
					t.Fatal(err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d has not started within a minute", r)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	select {
	case err = <-done:
	case <-time.After(AbortGrace + 10*time.Second):
		t.Fatalf("the stopped mpirun still runs %s after rank 1 was killed", AbortGrace+10*time.Second)
	}
	took := time.Since(t0)
	t.Logf("the stopped mpirun ended %s after rank 1 was killed: %v", took.Round(time.Millisecond), err)
	if !killed(err) {
		t.Errorf("mpirun ended with %v, not killed by the reaper", err)
	}
	if took < AbortGrace-time.Second {
		t.Errorf("mpirun was killed %s after the rank, before the grace of %s", took, AbortGrace)
	}
}

// killed reports whether err is that of a process killed by SIGKILL.
func killed(err error) bool {
	ee, ok := err.(*exec.ExitError)
	return ok && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
}

// TestWorld is one rank of the scenarios above; it skips outside mpirun.
func TestWorld(t *testing.T) {
	scenario := os.Getenv(childEnv)
	if scenario == "" {
		t.Skip("runs under mpirun, started by TestMPIRun, TestMPIDeadRank, TestMPIWatchdog and TestMPINetns")
	}
	c, err := Init()
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := Launched(); !ok || n != c.Size() {
		t.Errorf("Launched() = %d, %v; MPI says %d ranks", n, ok, c.Size())
	}
	r, p := c.Rank(), c.Size()
	switch scenario {
	case "kill":
		if r == 1 {
			time.Sleep(500 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		buf := make([]float32, 1000)
		for {
			if err := c.AllreduceFloat32(buf); err != nil {
				t.Fatal(err)
			}
		}
	case "loop":
		// Sums until the job is ended, the watchdog's timeout in
		// SYNTHGEN_MPI_TIMEOUT (TestMPINetns).
		d, err := time.ParseDuration(os.Getenv("SYNTHGEN_MPI_TIMEOUT"))
		if err != nil {
			t.Fatal(err)
		}
		c.Watchdog(d, os.Stderr)
		if dir := os.Getenv(pidsEnv); dir != "" {
			if err := os.WriteFile(fmt.Sprintf("%s/rank-%d.pid", dir, r), []byte(fmt.Sprint(os.Getpid())), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]float32, 1000)
		for i := 1; ; i++ {
			if err := c.AllreduceFloat32(buf); err != nil {
				t.Fatal(err)
			}
			if i == 100 {
				fmt.Printf("rank %d: 100 sums\n", r)
			}
			time.Sleep(time.Millisecond)
		}
	case "stuck":
		c.Watchdog(time.Second, os.Stderr)
		if r == 1 {
			time.Sleep(time.Minute)
		}
		c.Barrier()
		t.Fatal("the barrier returned")
	}

	// Go's own signal handling survives MPI_Init: a nil dereference is
	// still a panic that recover catches.
	if !nilDeref() {
		t.Error("a nil dereference after MPI_Init was not a recoverable panic")
	}

	// Broadcast from every root.
	for root := 0; root < p; root++ {
		f := []float32{float32(r), -1, float32(r * r)}
		d := []float64{float64(r) + 0.5, math.Pi * float64(r)}
		if err := c.BcastFloat32(f, root); err != nil {
			t.Fatal(err)
		}
		if err := c.BcastFloat64(d, root); err != nil {
			t.Fatal(err)
		}
		if f[0] != float32(root) || f[1] != -1 || f[2] != float32(root*root) || d[0] != float64(root)+0.5 || d[1] != math.Pi*float64(root) {
			t.Errorf("rank %d: broadcast from %d gave %v %v", r, root, f, d)
		}
	}
	if err := c.BcastFloat32(nil, 0); err != nil {
		t.Error(err)
	}
	// Sums, including a buffer larger than a small message.
	const n = 1 << 20
	f := make([]float32, n)
	d := make([]float64, n)
	for i := range f {
		f[i] = float32(r + i%7)
		d[i] = float64(r)*1e-3 + float64(i)
	}
	if err := c.AllreduceFloat32(f); err != nil {
		t.Fatal(err)
	}
	if err := c.AllreduceFloat64(d); err != nil {
		t.Fatal(err)
	}
	rs := p * (p - 1) / 2 // Σ ranks
	for i := range f {
		if want := float32(rs + p*(i%7)); f[i] != want {
			t.Fatalf("rank %d: float32 sum [%d] = %g, want %g", r, i, f[i], want)
		}
		if want := float64(rs)*1e-3 + float64(p*i); math.Abs(d[i]-want) > 1e-9*math.Abs(want)+1e-12 {
			t.Fatalf("rank %d: float64 sum [%d] = %g, want %g", r, i, d[i], want)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	st := c.Stats()
	if a := st["MPI_Allreduce"]; a.Calls != 2 || a.Bytes != 12*n {
		t.Errorf("allreduce stats %+v, want 2 calls of %d bytes", a, 12*n)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err == nil {
		t.Error("a barrier after Finalize: no error")
	}
}

// BenchmarkAllreduce is the cost of summing a model's gradients over the
// ranks (float32, in place), barrier first so that no rank waits for
// another's compute. Run it under mpirun with a fixed count, the same on
// every rank:
//
//	go test -tags mpi -c -o mpi.test ./runtime/mpi
//	mpirun -np 2 ./mpi.test -test.run '^$' -test.bench Allreduce -test.benchtime 100x
func BenchmarkAllreduce(b *testing.B) {
	c, err := Init()
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{120_300, 972_500} { // spec small's and spec random's parameters
		b.Run(fmt.Sprintf("floats=%d/ranks=%d", n, c.Size()), func(b *testing.B) {
			buf := make([]float32, n)
			b.SetBytes(int64(4 * n))
			if err := c.Barrier(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := c.Barrier(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := c.AllreduceFloat32(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nilDeref dereferences a nil pointer and reports whether that panicked
// and was recovered.
func nilDeref() (recovered bool) {
	defer func() { recovered = recover() != nil }()
	var p *int
	_ = *p
	return false
}
