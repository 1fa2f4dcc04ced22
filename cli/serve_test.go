package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/synth"
)

// lockedBuffer is an io.Writer safe to read while a command writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestServeCommand: synth serve loads two checkpoints, listens, streams a
// generation, and returns when its context ends (as on SIGTERM); bad flags
// are errors naming the flag.
func TestServeCommand(t *testing.T) {
	dir := t.TempDir()
	m, err := synth.New(small.Spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	for _, p := range []string{a, b} {
		if err := m.Save(p); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	e := &env{out: &out, errOut: &out, ctx: ctx}
	errc := make(chan error, 1)
	go func() { errc <- serveCmd(e, []string{"-ckpt", a, "-ckpt", b, "-addr", "127.0.0.1:0"}) }()
	re := regexp.MustCompile(`on (http://\S+) `)
	var url string
	for deadline := time.Now().Add(30 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if sm := re.FindStringSubmatch(out.String()); sm != nil {
			url = sm[1]
		}
		select {
		case err := <-errc:
			t.Fatalf("serve returned early: %v\n%s", err, out.String())
		default:
		}
	}
	if url == "" {
		t.Fatalf("serve did not start:\n%s", out.String())
	}
	resp, err := http.Post(url+"/v1/generate", "application/json", strings.NewReader(`{"prompt":"The ","max_bytes":20,"model":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"done":true,"bytes":20,"model":"b"`) {
		t.Errorf("generate: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-ckpt", a, "-ckpt", a}, "already loaded"},
		{[]string{"-ckpt", filepath.Join(dir, "none.safetensors")}, "none.safetensors"},
		{[]string{"-ckpt", a, "-max-bytes", "0"}, "-max-bytes"},
		{[]string{"-ckpt", a, "-workers", "-1"}, "-workers"},
		{[]string{"-ckpt", a, "-workers", "1000000000"}, "-workers 1000000000 must satisfy"},
		{[]string{"-ckpt", a, "-max-streams", "1000000000000"}, "-max-streams 1000000000000 must satisfy"},
	} {
		e, out := testEnv()
		if err := serveCmd(e, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error about %q\n%s", c.args, err, c.want, out)
		}
	}
}

// serveChildEnv, when set, makes TestServeChild run `synth serve` with the
// arguments it holds (separated by newlines) and exit with its status.
const serveChildEnv = "SYNTHGEN_SERVE_CHILD"

// TestServeChild is the child process of TestServeProcess. It does nothing
// in an ordinary test run.
func TestServeChild(t *testing.T) {
	args := os.Getenv(serveChildEnv)
	if args == "" {
		t.Skip("the child of TestServeProcess")
	}
	os.Exit(run(append([]string{"serve"}, strings.Split(args, "\n")...), os.Stderr))
}

// TestServeProcess runs a real `synth serve` process: it streams to a
// client, and SIGTERM during a stream shuts it down gracefully (the
// stream ends with a final line once the grace period is over, the process
// exits with status 0 and stops listening).
func TestServeProcess(t *testing.T) {
	if os.Getenv(serveChildEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	m, err := synth.New(small.Spec, 1)
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(dir, "s.safetensors")
	if err := m.Save(ck); err != nil {
		t.Fatal(err)
	}
	args := []string{"-ckpt", ck, "-addr", "127.0.0.1:0", "-grace", "500ms", "-max-bytes", "10000000", "-workers", "1"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), serveChildEnv+"="+strings.Join(args, "\n"))
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	re := regexp.MustCompile(`on (http://\S+) `)
	var url string
	for deadline := time.Now().Add(60 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if sm := re.FindStringSubmatch(out.String()); sm != nil {
			url = sm[1]
		}
	}
	if url == "" {
		t.Fatalf("synth serve did not start:\n%s", out.String())
	}
	// A stream far longer than the test: SIGTERM comes in its middle.
	resp, err := http.Post(url+"/v1/generate", "application/json", strings.NewReader(`{"prompt":"The ","max_bytes":10000000}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"text"`) {
		t.Fatalf("first line %q (%v)", sc.Text(), sc.Err())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	last := ""
	for sc.Scan() {
		last = sc.Text()
	}
	if !strings.Contains(last, `"error":"server shutting down`) {
		t.Errorf("the stream's last line after SIGTERM: %q", last)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("after SIGTERM: %v (want exit status 0)\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("synth serve did not exit within 30 s of SIGTERM:\n%s", out.String())
	}
	if _, err := http.Get(url + "/healthz"); err == nil {
		t.Error("still listening after exit")
	}
}
