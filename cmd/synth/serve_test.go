package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
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
		{[]string{"-ckpt", a, "-decoders", "-1"}, "-decoders"},
	} {
		e, out := testEnv()
		if err := serveCmd(e, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error about %q\n%s", c.args, err, c.want, out)
		}
	}
}
