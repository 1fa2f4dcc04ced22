package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/data"
)

// The command-line fuzz target runs each input as `synth <command> <flags>`
// in a child process (this test binary again, with cliFuzzChildEnv holding
// the arguments) under an address-space limit of cliFuzzMem bytes, in a
// fresh folder holding text.txt and a small checkpoint c.safetensors.
const (
	cliFuzzChildEnv = "SYNTHGEN_CLI_FUZZ_CHILD"
	cliFuzzMem      = 3 << 30
	cliFuzzRun      = 5 * time.Second  // then SIGTERM: a run saves and exits
	cliFuzzExit     = 20 * time.Second // after SIGTERM: then it hangs
)

// TestCLIFuzzChild is the child of FuzzCommandLine; it does nothing in an
// ordinary test run.
func TestCLIFuzzChild(t *testing.T) {
	args := os.Getenv(cliFuzzChildEnv)
	if args == "" {
		t.Skip("the child of FuzzCommandLine")
	}
	lim := syscall.Rlimit{Cur: cliFuzzMem, Max: cliFuzzMem}
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &lim); err != nil {
		t.Fatal(err)
	}
	a := strings.Split(args, "\n")
	if a[0] == "serve" {
		// All of serve but listening: the flags, their checks, loading the
		// models and making the server, which is then cancelled.
		e := &env{out: os.Stdout, errOut: os.Stderr}
		h, _, _, err := serveSetup(e, a[1:])
		if h != nil {
			h.Cancel()
		}
		os.Exit(exitStatus("serve", err, os.Stderr))
	}
	os.Exit(run(a, os.Stderr))
}

// FuzzCommandLine feeds flags to train, eval, sample, inspect, compare,
// attn and serve. Whatever the flags, the command must end by itself within
// a few seconds or on SIGTERM, without a panic, and within the memory
// limit: a flag that sizes memory or threads beyond reason must be a clear
// error (the runtime's "out of memory" under the limit is a failure).
// Flags naming paths stay inside the test's folder (an argument holding a
// path separator is skipped). Serve is run up to listening (serveSetup:
// its flags and their checks, the models loaded, the server made), never
// binding a port, so its -addr is not checked here.
//
//	go test ./cli -run '^$' -fuzz '^FuzzCommandLine$' -fuzztime 5m
func FuzzCommandLine(f *testing.F) {
	for _, s := range [][2]string{
		{"train", "-spec small -steps 2 -batch 2 -eval-every 0 -out x.safetensors"},
		{"train", "-spec small -steps 2 -workers 100000"},
		{"train", "-resume c.safetensors -steps 4 -stop-at 3"},
		{"eval", "-ckpt c.safetensors -data text.txt -windows 2"},
		{"sample", "-ckpt c.safetensors -len 4 -temp 0.5"},
		{"compare", "-specs small -seeds 1000000000"},
		{"train", "-spec small -steps 1 -batch 65536"},
		{"eval", "-ckpt c.safetensors -data text.txt -batch 65536"},
		{"compare", "-specs small -seeds 1 -steps 1 -batch 65536"},
		{"serve", "-ckpt c.safetensors -workers 2 -max-streams 4"},
		{"serve", "-ckpt c.safetensors -ckpt c.safetensors"},
		{"serve", "-ckpt text.txt -addr nowhere"},
		{"serve", "-ckpt c.safetensors -max-streams 1000000000000"},
		{"serve", "-ckpt c.safetensors -workers 1000000000"},
		{"serve", "-ckpt c.safetensors -max-prompt 0 -max-body -1 -grace 0s"},
	} {
		f.Add(s[0], s[1])
	}
	root := f.TempDir()
	def, err := data.DefaultFile()
	if err != nil {
		f.Skip(err)
	}
	b, err := os.ReadFile(def)
	if err != nil {
		f.Fatal(err)
	}
	txt := filepath.Join(root, "text.txt")
	if err := os.WriteFile(txt, b[:20000], 0o644); err != nil {
		f.Fatal(err)
	}
	ck := filepath.Join(root, "c.safetensors")
	e, _ := testEnv()
	if err := trainCmd(e, []string{"-spec", "small", "-data", txt, "-steps", "2", "-batch", "2", "-eval-every", "0", "-out", ck}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, command, flags string) {
		switch command {
		case "train", "eval", "sample", "inspect", "compare", "attn", "serve":
		default:
			return
		}
		args := append([]string{command}, strings.Fields(flags)...)
		for _, a := range args {
			if strings.ContainsAny(a, "/\\\x00") || len(a) > 100 {
				return
			}
		}
		if len(args) > 30 {
			return
		}
		dir := t.TempDir()
		for _, n := range []string{"text.txt", "c.safetensors", "c.opt.safetensors"} {
			b, err := os.ReadFile(filepath.Join(root, n))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, n), b, 0o644)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestCLIFuzzChild$", "-test.count=1")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), cliFuzzChildEnv+"="+strings.Join(args, "\n"))
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var err error
		select {
		case err = <-done:
		case <-time.After(cliFuzzRun):
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err = <-done:
			case <-time.After(cliFuzzExit):
				cmd.Process.Kill()
				<-done
				t.Fatalf("synth %q: still running %v after SIGTERM\n%s", args, cliFuzzExit, tail(out.String()))
			}
		}
		s := out.String()
		if strings.Contains(s, "panic:") || strings.Contains(s, "fatal error:") || strings.Contains(s, "out of memory") {
			t.Fatalf("synth %q: %v\n%s", args, err, tail(s))
		}
	})
}

// tail is the end of a command's output.
func tail(s string) string {
	if len(s) > 3000 {
		return "…" + s[len(s)-3000:]
	}
	return s
}
