//go:build mpi && cgo

package cli

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// The tests of this file run `synth train` under mpirun -np 2: mpirun
// starts this test binary, whose TestMPIChild runs the command with the
// arguments in mpiChildEnv. They skip, saying why, when mpirun is not
// installed.

const (
	mpiChildEnv = "SYNTHGEN_MPI_TRAIN" // the child's arguments, one per line
	mpiPIDsEnv  = "SYNTHGEN_MPI_PIDS"  // a folder where each child writes rank-<r>.pid
)

// Tolerances of 2 ranks × 1 worker against 1 process × 2 workers (200
// steps of spec small, batch 8; measured max |Δw| ≈ 1e-6, relative
// ‖Δw‖ ≈ 1e-6, losses ≈ 1e-6 relative: float32 rounding of the sums).
const (
	mpiTolMaxAbs = 1e-4
	mpiTolRelL2  = 1e-5
	mpiTolLoss   = 1e-5
)

// TestMPIChild is one rank of the tests below; it skips outside mpirun.
func TestMPIChild(t *testing.T) {
	args := os.Getenv(mpiChildEnv)
	if args == "" {
		t.Skip("runs under mpirun, started by the TestMPI tests")
	}
	if dir := os.Getenv(mpiPIDsEnv); dir != "" {
		p := filepath.Join(dir, "rank-"+os.Getenv("OMPI_COMM_WORLD_RANK")+".pid")
		if err := os.WriteFile(p, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Exit(run(append([]string{"train"}, strings.Split(args, "\n")...), os.Stderr))
}

// mpiTrain is the command that runs `synth train args` on np ranks, with
// its environment; it skips t when mpirun is not installed.
func mpiTrain(t *testing.T, np int, pids string, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	a := []string{"-np", strconv.Itoa(np), "--oversubscribe"}
	if os.Geteuid() == 0 {
		a = append(a, "--allow-run-as-root")
	}
	a = append(a, os.Args[0], "-test.run=^TestMPIChild$", "-test.count=1")
	cmd := exec.Command(bin, a...)
	cmd.Env = append(os.Environ(), mpiChildEnv+"="+strings.Join(args, "\n"), mpiPIDsEnv+"="+pids)
	return cmd
}

// TestMPITrainMatchesWorkers: mpirun -np 2 synth train -workers 1 writes
// the checkpoint of synth train -workers 2 (to float32 rounding), with the
// same loss curve and evaluations; only rank 0 prints and writes.
func TestMPITrainMatchesWorkers(t *testing.T) {
	if os.Getenv(mpiChildEnv) != "" {
		t.Skip("in an mpirun child")
	}
	dir := t.TempDir()
	txt := textFile(t, dir, 60000)
	common := []string{"-spec", "small", "-data", txt, "-steps", "200", "-batch", "8", "-eval-every", "50", "-eval-windows", "8", "-log-every", "50"}
	mpiMatchesOne(t, dir, 2, 200, common, 201+4, // step 0's evaluation, 200 steps, 4 more evaluations
		"step 100/200", "ranks: 2 data-parallel processes × 1 worker, the batch of 8 split 4+4", "allreduce 481.3 kB per step per rank")
}

// mpiMatchesOne runs synth train with the flags common on one process (2
// workers, dir/one.safetensors) and under mpirun -np ranks (1 worker each,
// dir/mpi.safetensors): the output has every string of wants and the line
// once only once (only rank 0 prints), the last of steps saved, the weights agree
// within the tolerances above, and the CSV logs hold values loss values
// that agree within mpiTolLoss.
func mpiMatchesOne(t *testing.T, dir string, ranks, steps int, common []string, values int, once string, wants ...string) {
	t.Helper()
	one, many := filepath.Join(dir, "one.safetensors"), filepath.Join(dir, "mpi.safetensors")
	mustRun(t, trainCmd, append(common, "-workers", "2", "-out", one)...)
	cmd := mpiTrain(t, ranks, "", append(common, "-workers", "1", "-out", many)...)
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	t.Logf("mpirun -np %d: %s", ranks, time.Since(t0).Round(time.Millisecond))
	for _, want := range append(wants, fmt.Sprintf("step %d/%d", steps, steps), fmt.Sprintf("saved step %d to %s", steps, many)) {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(string(out), once); n != 1 {
		t.Errorf("%q printed %d times (only rank 0 prints):\n%s", once, n, out)
	}
	maxAbs, rel := ckptDiff(t, many, one)
	t.Logf("%d ranks × 1 worker vs 1 process × 2 workers: max |Δw| %.3g, ‖Δw‖/‖w‖ %.3g", ranks, maxAbs, rel)
	if maxAbs > mpiTolMaxAbs || rel > mpiTolRelL2 {
		t.Errorf("weights differ by max %g, relative %g (tolerance %g, %g)", maxAbs, rel, mpiTolMaxAbs, mpiTolRelL2)
	}
	a, b := csvLosses(t, filepath.Join(dir, "mpi.csv")), csvLosses(t, filepath.Join(dir, "one.csv"))
	if len(a) != len(b) || len(a) != values {
		t.Fatalf("CSV logs of %d and %d values, want %d", len(a), len(b), values)
	}
	worst := 0.0
	for k, v := range b {
		worst = math.Max(worst, math.Abs(a[k]-v)/v)
	}
	t.Logf("loss curve and evaluations: within %.3g (relative)", worst)
	if worst > mpiTolLoss {
		t.Errorf("losses differ by %g relative (tolerance %g)", worst, mpiTolLoss)
	}
}

// TestMPITrainClassifier: mpirun -np 3 synth train of a classifier
// (odd_enc_linear, examples of 1 to 60 bytes, a held-out share, a batch of
// 7 split 3+2+2: "1×3+2×2") writes the checkpoint of one process (to float32
// rounding, the tolerances above), with the same loss curve, validation
// losses and accuracies; only rank 0 prints.
func TestMPITrainClassifier(t *testing.T) {
	if os.Getenv(mpiChildEnv) != "" {
		t.Skip("in an mpirun child")
	}
	dir := t.TempDir()
	var b strings.Builder
	for i := range 300 { // the label is the first byte; the texts of every length in 1..60
		c := "xyz"[(i*7)%3]
		text := []byte{c}
		for j := 1; j < 1+(i*13)%60; j++ {
			text = append(text, "ab ."[(i*j+j/3)%4])
		}
		fmt.Fprintf(&b, "%c\t%s\n", c, text)
	}
	data := filepath.Join(dir, "train.tsv")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	common := []string{"-spec", "odd_enc_linear", "-data", data, "-hold-out", "0.2", "-steps", "60", "-batch", "7", "-eval-every", "20", "-log-every", "20"}
	mpiMatchesOne(t, dir, 3, 60, common, 61+3, // step 0's evaluation, 60 steps, 3 more evaluations
		"step 40/60", "ranks: 3 data-parallel processes × 1 worker, the batch of 7 split 1×3+2×2")
	if ra, rw := csvRows(t, filepath.Join(dir, "mpi.csv")), csvRows(t, filepath.Join(dir, "one.csv")); len(ra) != len(rw) {
		t.Errorf("CSV logs of %d and %d rows", len(ra), len(rw))
	} else {
		for i := range rw {
			if ra[i][5] != rw[i][5] {
				t.Errorf("CSV row %d: val_accuracy %q, want %q", i, ra[i][5], rw[i][5])
			}
		}
	}
}

// csvRows reads a CSV log's rows, header included, as fields.
func csvRows(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		rows = append(rows, strings.Split(l, ","))
	}
	return rows
}

// TestMPIKilledRank: killing rank 1 mid-run ends the job within seconds
// with mpirun's message naming it; the last checkpoint loads and resumes,
// on 2 ranks and on 1.
func TestMPIKilledRank(t *testing.T) {
	if os.Getenv(mpiChildEnv) != "" {
		t.Skip("in an mpirun child")
	}
	dir := t.TempDir()
	txt := textFile(t, dir, 60000)
	ck := filepath.Join(dir, "k.safetensors")
	cmd, out, done, pid := startMPIJob(t, dir, ck, 30, "-spec", "small", "-data", txt, "-steps", "1000000", "-batch", "4", "-workers", "1",
		"-eval-every", "0", "-save-every", "10", "-log-every", "10", "-out", ck)
	var err error
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the job still runs 30 s after rank 1 was killed:\n%s", out.String())
	}
	took := time.Since(t0)
	t.Logf("the job ended %s after rank 1 was killed: %v", took.Round(time.Millisecond), err)
	if err == nil {
		t.Errorf("mpirun exited with status 0 after a rank was killed")
	}
	if took > 15*time.Second {
		t.Errorf("the job took %s to end", took)
	}
	if !strings.Contains(out.String(), "process rank 1") || !strings.Contains(out.String(), "signal 9 (Killed)") {
		t.Errorf("the output does not say rank 1 was killed:\n%s", out.String())
	}

	h, err := checkpoint.ReadHeader(ck)
	if err != nil {
		t.Fatalf("the last checkpoint does not load after the kill: %v", err)
	}
	step := h.Step
	res, err := mpiTrain(t, 2, "", "-resume", ck, "-stop-at", strconv.Itoa(step+5), "-workers", "1").CombinedOutput()
	if err != nil || !strings.Contains(string(res), fmt.Sprintf("saved step %d to %s", step+5, ck)) || strings.Contains(string(res), "warning") {
		t.Fatalf("resume on 2 ranks from step %d: %v\n%s", step, err, res)
	}
	r1 := mustRun(t, trainCmd, "-resume", ck, "-stop-at", strconv.Itoa(step+10), "-workers", "1")
	if !strings.Contains(r1, fmt.Sprintf("saved step %d to %s", step+10, ck)) {
		t.Fatalf("resume on 1 process:\n%s", r1)
	}
}

// TestMPIStoppedRank: a rank that is alive but stopped (SIGSTOP) is caught
// by the others' watchdog (-mpi-timeout), which ends the job with a message
// that says what happened.
func TestMPIStoppedRank(t *testing.T) {
	if os.Getenv(mpiChildEnv) != "" {
		t.Skip("in an mpirun child")
	}
	dir := t.TempDir()
	txt := textFile(t, dir, 60000)
	ck := filepath.Join(dir, "w.safetensors")
	cmd, out, done, pid := startMPIJob(t, dir, ck, 10, "-spec", "small", "-data", txt, "-steps", "1000000", "-batch", "4", "-workers", "1",
		"-eval-every", "0", "-save-every", "10", "-mpi-timeout", "2s", "-out", ck)
	var err error
	t0 := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL) // if it outlives the job
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the job still runs 30 s after rank 1 was stopped:\n%s", out.String())
	}
	t.Logf("the job ended %s after rank 1 was stopped: %v", time.Since(t0).Round(time.Millisecond), err)
	if err == nil || !strings.Contains(out.String(), "rank 0 of 2: MPI_Allreduce has waited") || !strings.Contains(out.String(), "a rank is stopped, stuck or unreachable; aborting the job") {
		t.Errorf("no watchdog message (err %v):\n%s", err, out.String())
	}
	if _, err := checkpoint.ReadHeader(ck); err != nil {
		t.Errorf("the last checkpoint does not load: %v", err)
	}
}

// startMPIJob starts synth train with args on 2 ranks (pids written to
// dir), waits until checkpoint ck holds step minStep or later, and returns
// the job, its output, the channel its end is sent on and rank 1's pid.
func startMPIJob(t *testing.T, dir, ck string, minStep int, args ...string) (*exec.Cmd, *strings.Builder, chan error, int) {
	t.Helper()
	cmd := mpiTrain(t, 2, dir, args...)
	out := new(strings.Builder)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if h, err := checkpoint.ReadHeader(ck); err == nil && h.Step >= minStep {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the job ended before step %d: %v\n%s", minStep, err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no checkpoint of step %d within 2 minutes:\n%s", minStep, out.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "rank-1.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return cmd, out, done, pid
}

// ckptDiff compares two checkpoints: the largest absolute difference of a
// weight, and the difference's L2 norm relative to b's.
func ckptDiff(t *testing.T, a, b string) (maxAbs, relL2 float64) {
	t.Helper()
	fa, err := checkpoint.Read(a)
	if err != nil {
		t.Fatal(err)
	}
	fb, err := checkpoint.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if fa.Metadata["step"] != fb.Metadata["step"] || len(fa.Tensors) != len(fb.Tensors) {
		t.Fatalf("%s and %s: steps %s and %s, %d and %d tensors", a, b, fa.Metadata["step"], fb.Metadata["step"], len(fa.Tensors), len(fb.Tensors))
	}
	var d2, n2 float64
	for name, ta := range fa.Tensors {
		tb := fb.Tensors[name]
		if tb == nil {
			t.Fatalf("%s has no %s", b, name)
		}
		x, y := make([]float32, ta.Elems()), make([]float32, tb.Elems())
		if err := ta.Float32s(x); err != nil {
			t.Fatal(err)
		}
		if err := tb.Float32s(y); err != nil {
			t.Fatal(err)
		}
		for i := range x {
			d := float64(x[i]) - float64(y[i])
			maxAbs = math.Max(maxAbs, math.Abs(d))
			d2 += d * d
			n2 += float64(y[i]) * float64(y[i])
		}
	}
	return maxAbs, math.Sqrt(d2 / n2)
}

// csvLosses reads a CSV log's losses and evaluations, keyed "step/loss" and
// "step/val".
func csvLosses(t *testing.T, path string) map[string]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := map[string]float64{}
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		c := strings.Split(sc.Text(), ",")
		for i, kind := range []string{"loss", "val"} {
			if c[1+i] == "" {
				continue
			}
			v, err := strconv.ParseFloat(c[1+i], 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", path, sc.Text(), err)
			}
			m[c[0]+"/"+kind] = v
		}
	}
	return m
}
