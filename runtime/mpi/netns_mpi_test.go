//go:build mpi && cgo && linux

package mpi

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMPINetns runs a 2-rank job across two machines, made of two network
// namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2, addresses
// that exist only inside the namespaces this test creates), with mpirun in
// the first and Open MPI's launcher reaching the second through
// `ip netns exec` as its rsh agent. Once both ranks are summing, the link
// is cut (the first namespace's end of the pair goes down); mpirun and
// everything in the second namespace (its orted and rank) must then be
// gone within a bounded time:
//
// With Open MPI's default settings (an out-of-band keepalive of 300 s + 9
// × 20 s), mpirun and the remote orted waited until the link came back;
// now the ranks' watchdogs (3 s) abort, and their reapers kill the stuck
// daemons AbortGrace later.
//
// It skips, saying why, without root (network namespaces), ip (iproute2)
// or mpirun, or where namespaces cannot be made (a container without
// CAP_SYS_ADMIN); it removes its namespaces, and kills what runs in them,
// when it ends.
func TestMPINetns(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in an mpirun child")
	}
	mpirunBin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("skipped: mpirun is not installed (Debian: apt-get install openmpi-bin libopenmpi-dev)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipped: the ip command is not installed (Debian: apt-get install iproute2); it makes the network namespaces")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: making network namespaces needs root")
	}
	const timeout = 3 * time.Second
	limit := timeout + AbortGrace + 10*time.Second
	out, err := netnsCut(t, mpirunBin, timeout, limit)
	if err == nil {
		t.Errorf("mpirun exited with status 0 after the link was cut:\n%s", out)
	}
	for _, want := range []string{"watchdog timeout 3s", "aborting the job", "mpirun (pid", "is killed if it has not ended the job 5s later"} {
		if !strings.Contains(out, want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}

// netnsCut makes two namespaces, starts the "loop" scenario of TestWorld
// on a rank in each (watchdog timeout timeout, mpirun's extra arguments
// extra), cuts the link once both ranks have summed 100 times, and fails t
// unless mpirun and every process of the second namespace are gone within
// limit of the cut, and then everything of the first namespace too (its
// ranks and reapers). It returns the job's output and mpirun's error.
func netnsCut(t *testing.T, mpirunBin string, timeout, limit time.Duration, extra ...string) (string, error) {
	nsA, nsB, linkA := makeNetns(t)
	dir := t.TempDir()
	agent := filepath.Join(dir, "agent.sh")
	// Open MPI calls its rsh agent as `agent host command…`, the command
	// being one line for a remote shell, as ssh's would be.
	script := "#!/bin/sh\n# Open MPI's rsh agent for TestMPINetns: every remote host is namespace " + nsB + ".\nshift\nexec ip netns exec " + nsB + " sh -c \"$*\"\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"netns", "exec", nsA, mpirunBin, "-np", "2", "--host", "10.77.0.1:1,10.77.0.2:1", "--allow-run-as-root",
		"--mca", "plm_rsh_agent", agent,
		"--mca", "oob_tcp_if_include", "10.77.0.0/24", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "10.77.0.0/24",
		"-x", childEnv, "-x", "SYNTHGEN_MPI_TIMEOUT"}
	args = append(args, extra...)
	args = append(args, os.Args[0], "-test.run=^TestWorld$", "-test.count=1")
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), childEnv+"=loop", "SYNTHGEN_MPI_TIMEOUT="+timeout.String(),
		"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	out := new(syncBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
		}
	})

	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "rank 0: 100 sums") || !strings.Contains(out.String(), "rank 1: 100 sums") {
		select {
		case err := <-done:
			t.Fatalf("the job ended before both ranks had summed 100 times: %v\n%s", err, out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ranks had not both summed 100 times within a minute:\n%s", out)
		}
	}

	ipRun(t, "-n", nsA, "link", "set", linkA, "down")
	t0 := time.Now()
	var err error
	var mpirunGone, remoteGone, localGone time.Duration
	wait := done
	for mpirunGone == 0 || remoteGone == 0 || localGone == 0 {
		select {
		case err = <-wait:
			mpirunGone = time.Since(t0)
			done <- err // for the cleanup
			wait = nil
		case <-time.After(100 * time.Millisecond):
		}
		if remoteGone == 0 && len(netnsPIDs(t, nsB)) == 0 {
			remoteGone = time.Since(t0)
		}
		if mpirunGone != 0 && localGone == 0 && len(netnsPIDs(t, nsA)) == 0 {
			localGone = time.Since(t0)
		}
		if time.Since(t0) > limit {
			t.Fatalf("%s after the link was cut, mpirun is gone: %v (after %s); the second namespace is empty: %v (after %s), processes there: %v; the first: %v, processes there: %v\n%s",
				limit, mpirunGone != 0, mpirunGone.Round(time.Millisecond), remoteGone != 0, remoteGone.Round(time.Millisecond), netnsPIDs(t, nsB),
				localGone != 0, netnsPIDs(t, nsA), out)
		}
	}
	t.Logf("link cut: mpirun gone after %s (%v), the remote orted and rank after %s, everything of the first namespace after %s (limit %s); the output:\n%s",
		mpirunGone.Round(time.Millisecond), err, remoteGone.Round(time.Millisecond), localGone.Round(time.Millisecond), limit, out)
	return out.String(), err
}

// netnsSeq numbers the namespaces of this process.
var netnsSeq int

// makeNetns makes two network namespaces joined by a veth pair, with
// addresses 10.77.0.1/24 and 10.77.0.2/24, and returns their names and
// the first one's end of the pair; it skips t when namespaces cannot be
// made. The namespaces, and what still runs in them, go when t ends.
func makeNetns(t *testing.T) (nsA, nsB, linkA string) {
	netnsSeq++
	tag := fmt.Sprintf("sg%d-%d", os.Getpid(), netnsSeq)
	nsA, nsB = tag+"a", tag+"b"
	linkA, linkB := "v"+tag+"a", "v"+tag+"b"
	if out, err := exec.Command("ip", "netns", "add", nsA).CombinedOutput(); err != nil {
		t.Skipf("skipped: cannot make a network namespace (ip netns add: %v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { removeNetns(t, nsA) })
	ipRun(t, "netns", "add", nsB)
	t.Cleanup(func() { removeNetns(t, nsB) })
	ipRun(t, "link", "add", linkA, "netns", nsA, "type", "veth", "peer", "name", linkB, "netns", nsB)
	for _, s := range [][]string{
		{"-n", nsA, "addr", "add", "10.77.0.1/24", "dev", linkA},
		{"-n", nsB, "addr", "add", "10.77.0.2/24", "dev", linkB},
		{"-n", nsA, "link", "set", "lo", "up"},
		{"-n", nsB, "link", "set", "lo", "up"},
		{"-n", nsA, "link", "set", linkA, "up"},
		{"-n", nsB, "link", "set", linkB, "up"},
	} {
		ipRun(t, s...)
	}
	// The pair carries traffic once both ends report a carrier.
	for _, l := range [][2]string{{nsA, linkA}, {nsB, linkB}} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, err := exec.Command("ip", "netns", "exec", l[0], "cat", "/sys/class/net/"+l[1]+"/carrier").Output()
			if err == nil && strings.TrimSpace(string(b)) == "1" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s in %s has no carrier 10 s after it went up", l[1], l[0])
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nsA, nsB, linkA
}

// removeNetns kills what runs in namespace ns (processes this test
// started) and removes it, which removes its end of the veth pair.
func removeNetns(t *testing.T, ns string) {
	for _, pid := range netnsPIDs(t, ns) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for i := 0; i < 50 && len(netnsPIDs(t, ns)) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Errorf("ip netns del %s: %v: %s", ns, err, out)
	}
}

// netnsPIDs is the processes in namespace ns.
func netnsPIDs(t *testing.T, ns string) []int {
	b, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		t.Errorf("ip netns pids %s: %v", ns, err)
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ipRun runs ip with args, failing t on an error.
func ipRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use: the job writes to
// it while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
