//go:build mpi && cgo && linux

package mpi

/*
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

// close_range_ closes the descriptors first … last (none when last <
// first); it fails where the kernel has no close_range.
static int close_range_(unsigned first, unsigned last) {
	if (last < first) return 0;
#ifdef SYS_close_range
	return (int)syscall(SYS_close_range, first, last, 0);
#else
	return -1;
#endif
}

// sg_reaper starts the reaper of this rank: a process that kills this
// process's parent (its Open MPI daemon, which the caller checked is the
// parent) with SIGKILL if the rank ends without saying first that it ends
// normally, and the parent still runs grace_ms later. The rank says so by
// writing 'F' to *wfd, the write end of a pipe whose read end the reaper
// holds; the pipe's closing without it (the rank aborted, or was killed,
// or exited without MPI_Finalize) is an abnormal end. The reaper also
// exits when the parent does. sg_reaper returns the reaper's pid, or -1
// when it could not start one (no pidfd_open: Linux before 5.3; the parent
// already gone; no pipe or fork).
//
// The parent is held by a pidfd opened while it is certainly still the
// parent (getppid() is checked after the open), so a recycled pid is never
// signalled. The reaper is forked with the raw clone system call (no
// pthread_atfork handlers: this process is multi-threaded, the Go runtime
// and Open MPI's threads) and calls only async-signal-safe system calls
// before _exit: it resets the signal handlers it inherited from the Go
// runtime, leaves the rank's session and process group (so that a daemon
// signalling the rank's group does not count it as the rank), names itself
// mpi-reaper (in ps and top), and closes every descriptor but the pidfd
// and the pipe's read end, its standard streams going to /dev/null, so
// that it holds none of the rank's sockets or output pipes, which the
// daemon watches to see the rank end.
static int sg_reaper(int ppid, int grace_ms, int *wfd) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
	int pfd = (int)syscall(SYS_pidfd_open, ppid, 0);
	if (pfd < 0) return -1;
	if (getppid() != ppid) { close(pfd); return -1; }
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) != 0) { close(pfd); return -1; }
	long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
	if (pid != 0) {
		close(pfd);
		close(fds[0]);
		if (pid < 0) {
			close(fds[1]);
			return -1;
		}
		*wfd = fds[1];
		return (int)pid;
	}
	// The reaper.
	int rfd = fds[0];
	struct sigaction sa;
	for (size_t i = 0; i < sizeof sa; i++) ((char *)&sa)[i] = 0;
	sa.sa_handler = SIG_DFL;
	for (int s = 1; s < 65; s++) sigaction(s, &sa, NULL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	prctl(PR_SET_NAME, "mpi-reaper", 0, 0, 0); // its name in ps and top
	int null = open("/dev/null", O_RDWR);
	if (null >= 0) {
		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
	}
	int lo = pfd < rfd ? pfd : rfd, hi = pfd < rfd ? rfd : pfd;
	if (close_range_(3, lo - 1) != 0 || close_range_(lo + 1, hi - 1) != 0 || close_range_(hi + 1, ~0U) != 0) {
		for (int fd = 3; fd < 65536; fd++) { // no close_range: Linux before 5.9
			if (fd != pfd && fd != rfd) close(fd);
		}
	}
	struct pollfd p[2];
	p[0].fd = pfd;
	p[0].events = POLLIN;
	p[1].fd = rfd;
	p[1].events = POLLIN;
	for (;;) {
		p[0].revents = p[1].revents = 0;
		int n = poll(p, 2, -1);
		if (n < 0) _exit(0);
		if (p[0].revents) _exit(0); // the daemon ended
		if (p[1].revents) break;
	}
	char c = 0;
	if (read(rfd, &c, 1) == 1 && c == 'F') _exit(0); // a normal end
	// The rank ended abnormally: the daemon should end the job at once.
	p[0].revents = 0;
	if (poll(p, 1, grace_ms) != 0) _exit(0); // it did (or poll failed)
	syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
	_exit(0);
#else
	return -1;
#endif
}

static void sg_reaper_release(int wfd) {
	char c = 'F';
	if (write(wfd, &c, 1) != 1) {}
	close(wfd);
}
*/
import "C"

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonNames are the names (/proc/<pid>/comm) of the Open MPI processes
// that start ranks: mpirun (orterun in 4.x, prterun in 5.x, with mpiexec
// as a synonym) on the launching machine, orted (prted) on the others.
var daemonNames = map[string]bool{"mpirun": true, "mpiexec": true, "orterun": true, "orted": true, "prterun": true, "prted": true, "prte": true}

// startReaper starts, when this process's parent is an Open MPI daemon,
// the reaper that kills that daemon (SIGKILL) if this process ends without
// calling releaseReaper and the daemon still runs grace later.
func startReaper(grace time.Duration) *reaper {
	ppid := os.Getppid()
	if ppid <= 1 {
		return nil
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/comm")
	if err != nil {
		return nil
	}
	name := strings.TrimSpace(string(b))
	if !daemonNames[name] {
		return nil
	}
	var wfd C.int
	pid := C.sg_reaper(C.int(ppid), C.int(grace.Milliseconds()), &wfd)
	if pid < 0 {
		return nil
	}
	return &reaper{daemon: name, daemonPID: ppid, pid: int(pid), wfd: int(wfd)}
}

// releaseReaper tells the reaper that this rank ends normally, and waits
// for it to exit.
func releaseReaper(r *reaper) {
	C.sg_reaper_release(C.int(r.wfd))
	var ws syscall.WaitStatus
	for {
		if _, err := syscall.Wait4(r.pid, &ws, 0, nil); err != syscall.EINTR {
			return
		}
	}
}
