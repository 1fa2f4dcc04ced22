package cli

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// sigtermChildEnv, when set, makes TestSIGTERMChild run `synth train` with
// the arguments it holds (separated by newlines) and exit with its status.
const sigtermChildEnv = "SYNTHGEN_SIGTERM_CHILD"

// stepLine is the progress line of step 3.
var stepLine = regexp.MustCompile(`^step +3/`)

// TestSIGTERMChild is the child process of TestSIGTERM: the real command,
// signal handling included. It does nothing in an ordinary test run.
func TestSIGTERMChild(t *testing.T) {
	args := os.Getenv(sigtermChildEnv)
	if args == "" {
		t.Skip("the child of TestSIGTERM")
	}
	os.Exit(run(append([]string{"train"}, strings.Split(args, "\n")...), os.Stderr))
}

// TestSIGTERM sends SIGTERM to a `synth train` process mid-run: as with
// Ctrl-C, it finishes the step, saves a checkpoint and its optimizer state
// of that step, says how to continue and exits with status 0; the run then
// resumes from what it saved.
func TestSIGTERM(t *testing.T) {
	if os.Getenv(sigtermChildEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "t.safetensors")
	args := tinyTrain(dir, txt, "-steps", "5000", "-log-every", "1", "-eval-every", "0", "-workers", "1", "-out", ck)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSIGTERMChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), sigtermChildEnv+"="+strings.Join(args, "\n"))
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var out strings.Builder
	deadline := time.After(2 * time.Minute)
	// Signal once a few steps are done.
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the child ended before training:\n%s", out.String())
			}
			out.WriteString(l + "\n")
			if stepLine.MatchString(l) {
				break wait
			}
		case <-deadline:
			t.Fatalf("no step 3 within 2 minutes:\n%s", out.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	pw.Close()
	for l := range lines {
		out.WriteString(l + "\n")
	}
	if werr != nil {
		t.Fatalf("after SIGTERM: %v (want exit status 0)\n%s", werr, out.String())
	}
	m := regexp.MustCompile(`saved step (\d+) to (\S+) \(optimizer state (\S+)\); continue with: synth train -resume`).FindStringSubmatch(out.String())
	if m == nil || m[2] != ck || m[3] != checkpoint.OptPath(ck) || !strings.Contains(out.String(), "terminated") {
		t.Fatalf("output does not say the run was terminated and saved:\n%s", out.String())
	}
	step, _ := strconv.Atoi(m[1])
	h, err := checkpoint.ReadHeader(ck)
	if err != nil || h.Step != step || step < 3 {
		t.Fatalf("checkpoint: %v (step %d, output says %d)", err, h.Step, step)
	}
	if _, _, err := checkpoint.ResolveOpt(ck, step); err != nil {
		t.Fatal(err)
	}
	res := mustRun(t, trainCmd, "-resume", ck, "-stop-at", strconv.Itoa(step+2), "-workers", "1")
	if strings.Contains(res, "warning") || !strings.Contains(res, "saved step "+strconv.Itoa(step+2)) {
		t.Fatalf("resume after SIGTERM:\n%s", res)
	}
}
