package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/synthgen/synthgen/runtime/synth"
)

func runServe(e *env, args []string) error {
	ctx, stop := signal.NotifyContext(e.context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e.ctx = ctx
	return serveCmd(e, args)
}

// ckptList is the repeatable -ckpt flag of synth serve.
type ckptList []string

func (c *ckptList) String() string     { return strings.Join(*c, ",") }
func (c *ckptList) Set(s string) error { *c = append(*c, s); return nil }

func serveCmd(e *env, args []string) error {
	h, addr, n, err := serveSetup(e, args)
	if err != nil {
		return err
	}
	return synth.Serve(e.context(), addr, h, func(a string) {
		fmt.Fprintf(e.out, "serving %d model(s) on http://%s (POST /v1/generate, GET /v1/models, GET /healthz)\n", n, a)
	})
}

// serveSetup is synth serve up to listening: it parses and checks the
// flags, loads the models and makes the server (whose workers run until
// its Cancel) of n models, to serve on the address it returns.
func serveSetup(e *env, args []string) (h *synth.Server, addr string, n int, err error) {
	fs := newFlagSet(e, "serve", "Serves checkpoints over HTTP: POST /v1/generate streams generated text as JSON lines,\nGET /v1/models lists the models (named after their files), GET /healthz. SIGTERM or Ctrl-C\nshuts down, letting the streams in flight finish for up to -grace.\n\n  curl -N localhost:8080/v1/generate -d '{\"prompt\": \"The light \", \"max_bytes\": 200, \"temperature\": 0.8}'")
	var (
		ckpts ckptList
		o     synth.ServeOptions
	)
	fs.Var(&ckpts, "ckpt", "checkpoint `file` to serve, named by its base name without .safetensors; repeat for several (default: the default spec's checkpoint, as synth train writes it)")
	fs.StringVar(&addr, "addr", "127.0.0.1:8080", "`host:port` to listen on (127.0.0.1: this machine only)")
	fs.IntVar(&o.Workers, "workers", 0, fmt.Sprintf("batched generation steps running at once per model, one core each (0: one per core; at most %d per CPU)", synth.WorkersPerCPU))
	fs.IntVar(&o.MaxStreams, "max-streams", 0, fmt.Sprintf("streams open at once; more get 429 (0: 16 per worker; at most %d)", synth.MaxServeStreams))
	fs.IntVar(&o.MaxPrompt, "max-prompt", 16<<10, "largest prompt in bytes")
	fs.IntVar(&o.MaxBytes, "max-bytes", 4096, "largest max_bytes a request may ask for")
	fs.Int64Var(&o.MaxBody, "max-body", 64<<10, "largest request body in bytes")
	fs.DurationVar(&o.Grace, "grace", 10*time.Second, "on SIGTERM or Ctrl-C, how long the streams in flight may finish before they are cancelled")
	if err := parseFlags(fs, args); err != nil {
		return nil, "", 0, err
	}
	switch {
	case o.Workers < 0 || o.Workers > synth.MaxWorkers():
		return nil, "", 0, fmt.Errorf("-workers %d must satisfy 0 ≤ workers ≤ %d (%d per CPU)", o.Workers, synth.MaxWorkers(), synth.WorkersPerCPU)
	case o.MaxStreams < 0 || o.MaxStreams > synth.MaxServeStreams:
		return nil, "", 0, fmt.Errorf("-max-streams %d must satisfy 0 ≤ max-streams ≤ %d", o.MaxStreams, synth.MaxServeStreams)
	case o.MaxPrompt < 1:
		return nil, "", 0, fmt.Errorf("-max-prompt %d must be ≥ 1", o.MaxPrompt)
	case o.MaxBytes < 1:
		return nil, "", 0, fmt.Errorf("-max-bytes %d must be ≥ 1", o.MaxBytes)
	case o.MaxBody < 1:
		return nil, "", 0, fmt.Errorf("-max-body %d must be ≥ 1", o.MaxBody)
	case o.Grace <= 0:
		return nil, "", 0, fmt.Errorf("-grace %v must be > 0", o.Grace)
	}
	if len(ckpts) == 0 {
		s := defaultSpec()
		if s == "" {
			return nil, "", 0, needCkpt("")
		}
		ckpts = ckptList{s + ".safetensors"}
	}
	models := map[string]*synth.Model{}
	for _, p := range ckpts {
		name := strings.TrimSuffix(filepath.Base(p), ".safetensors")
		if _, dup := models[name]; dup {
			return nil, "", 0, fmt.Errorf("-ckpt %s: a model named %q is already loaded (models are named after their files)", p, name)
		}
		m, err := synth.Load(e.context(), p)
		if err != nil {
			return nil, "", 0, err
		}
		models[name] = m
	}
	if h, err = synth.NewServer(models, o); err != nil {
		return nil, "", 0, err
	}
	return h, addr, len(models), nil
}
