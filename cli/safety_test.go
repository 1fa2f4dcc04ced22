package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// TestTrainNoOverwrite: synth train twice with the same -out is an error
// the second time that says how to resume or replace the checkpoint, and
// leaves it as it was; -force replaces it.
func TestTrainNoOverwrite(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "x.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "3", "-out", ck)...)
	before := fileBytes(t, ck)
	e, _ := testEnv()
	err := trainCmd(e, tinyTrain(dir, txt, "-steps", "2", "-out", ck))
	if err == nil || !strings.Contains(err.Error(), "-resume "+ck) || !strings.Contains(err.Error(), "-force") {
		t.Fatalf("second train: %v", err)
	}
	if !bytes.Equal(fileBytes(t, ck), before) {
		t.Fatal("the refused run changed the checkpoint")
	}
	out := mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "2", "-out", ck, "-force")...)
	if !strings.Contains(out, "saved step 2") {
		t.Errorf("-force:\n%s", out)
	}
}

// TestTrainOutNotRegular: the reproducers fail cleanly and change
// nothing: -out the training text itself (with -force too), -out a link
// to /dev/null.
func TestTrainOutNotRegular(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	before := fileBytes(t, txt)
	null := filepath.Join(dir, "mynull")
	if err := os.Symlink("/dev/null", null); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{tinyTrain(dir, txt, "-steps", "2", "-out", txt), "same file as the input"},
		{tinyTrain(dir, txt, "-steps", "2", "-out", txt, "-force"), "same file as the input"},
		{tinyTrain(dir, txt, "-steps", "2", "-out", null, "-force"), "character device"},
	} {
		e, _ := testEnv()
		if err := trainCmd(e, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if !bytes.Equal(fileBytes(t, txt), before) {
		t.Fatal("the training text changed")
	}
}

// TestNonFiniteCheckpoint: eval, sample, inspect, attn and train -resume
// refuse a checkpoint with a NaN weight, naming the tensor.
func TestNonFiniteCheckpoint(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	ck := filepath.Join(dir, "nan.safetensors")
	mustRun(t, trainCmd, tinyTrain(dir, txt, "-steps", "2", "-stop-at", "1", "-out", ck)...)
	m, step, err := checkpoint.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	m.Params[1].Data[0] = float32(math.NaN())
	if err := checkpoint.Save(ck, m, step); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%q", m.Params[1].Name)
	for _, c := range []struct {
		f    func(*env, []string) error
		args []string
	}{
		{evalCmd, []string{"-ckpt", ck, "-data", txt}},
		{sampleCmd, []string{"-ckpt", ck}},
		{inspectCmd, []string{"-ckpt", ck}},
		{attnCmd, []string{"-ckpt", ck, "-data", txt, "-out", filepath.Join(dir, "attn")}},
		{trainCmd, []string{"-resume", ck}},
	} {
		e, _ := testEnv()
		if err := c.f(e, c.args); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "not finite") {
			t.Errorf("%v: %v, want an error naming %s", c.args, err, name)
		}
	}
}

// TestFlagLimits: a flag that sizes memory or threads past its limit, and
// -clip -1, are errors naming the flag's rule, before anything runs.
func TestFlagLimits(t *testing.T) {
	dir := t.TempDir()
	txt := textFile(t, dir, 20000)
	for _, c := range []struct {
		f    func(*env, []string) error
		args []string
		want string
	}{
		{compareCmd, []string{"-specs", "small", "-data", txt, "-seeds", "1000000000", "-out", filepath.Join(dir, "s")}, "seeds ≤ 1000"},
		{compareCmd, []string{"-specs", "small", "-data", txt, "-workers", "100000", "-out", filepath.Join(dir, "s")}, "workers"},
		{trainCmd, tinyTrain(dir, txt, "-workers", "100000", "-out", filepath.Join(dir, "w.safetensors")), "-force"},
		{trainCmd, tinyTrain(dir, txt, "-clip", "-1", "-out", filepath.Join(dir, "c.safetensors")), "clip -1"},
		{evalCmd, []string{"-ckpt", filepath.Join(dir, "none.safetensors"), "-workers", "100000"}, "-workers 100000"},
	} {
		e, _ := testEnv()
		if err := c.f(e, c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "s")); err == nil {
		t.Error("a refused study created its folder")
	}
}

// TestInterruptTwice: the first Ctrl-C cancels the command's context and
// says at once that the run stops after its step; the second exits at once
// (status 130) saying that the last saved checkpoint is intact.
func TestInterruptTwice(t *testing.T) {
	codes := make(chan int, 1)
	exit = func(code int) { codes <- code }
	defer func() { exit = os.Exit }()
	var out bytes.Buffer
	ctx, stop := interruptContext(&out)
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first interrupt did not cancel the context")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) || !strings.Contains(cause.Error(), "interrupt") {
		t.Errorf("cause %v", cause)
	}
	if !strings.Contains(out.String(), "the step in progress is abandoned") {
		t.Errorf("first interrupt says %q", out.String())
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT)
	select {
	case code := <-codes:
		if code != 130 || !strings.Contains(out.String(), "the last saved checkpoint is intact") {
			t.Errorf("second interrupt: exit %d, says %q", code, out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second interrupt did not exit")
	}
}
