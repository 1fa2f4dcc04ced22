package synth_test

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generated/small"
	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/synth"
)

// The crash test's child is this test binary run again with crashChildEnv
// naming its directory: it trains (or resumes) a run there with a save
// after every step until the parent kills it.
const (
	crashChildEnv = "SYNTHGEN_CRASH_CHILD"
	crashKillsEnv = "SYNTHGEN_CRASH_KILLS" // kills of TestCrashConsistency (default 20, 5 with -short)
	crashSteps    = 200                    // the run's length: longer than most children live
)

// crashOptions are the settings of the killed run and of its reference.
func crashOptions(text, out string) []synth.Option {
	return []synth.Option{synth.Data(text), synth.Out(out), synth.Steps(crashSteps), synth.Batch(2),
		synth.EvalEvery(0), synth.SaveEvery(1), synth.Workers(1), synth.Seed(3)}
}

// weightsHash identifies a model's weights bit for bit.
func weightsHash(m *synth.Model) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, p := range synth.NetworkOf(m).Params {
		for _, x := range p.Data {
			u := math.Float32bits(x)
			b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// TestCrashChild is the child of TestCrashConsistency; it does nothing in
// an ordinary test run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashChildEnv)
	if dir == "" {
		t.Skip("the child of TestCrashConsistency")
	}
	ck := filepath.Join(dir, "c.safetensors")
	ctx := context.Background()
	var err error
	if _, serr := os.Stat(ck); serr == nil {
		_, err = synth.Resume(ctx, ck, synth.SaveEvery(1), synth.EvalEvery(0), synth.Workers(1))
	} else {
		_, err = synth.Train(ctx, small.Spec, crashOptions(filepath.Join(dir, "text.txt"), ck)...)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestCrashConsistency kills a training run that saves after every step
// (SIGKILL, at random instants: in a step, in either file's write, between
// the two) again and again, each child resuming what the last one left.
// After every kill, what is on disk must load, hold the weights of the
// uninterrupted run at its step, resume with its optimizer state, and
// continue with the next two steps of the uninterrupted run bit for bit;
// no file may keep more than one temporary file (the next save removes
// stale ones). SYNTHGEN_CRASH_KILLS sets the number of kills.
func TestCrashConsistency(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	kills := 20
	if testing.Short() {
		kills = 5
	}
	if v := os.Getenv(crashKillsEnv); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("%s=%q is not a positive integer", crashKillsEnv, v)
		}
		kills = k
	}
	root := t.TempDir()
	text := filepath.Join(root, "text.txt")
	os.WriteFile(text, read(t, mustDefault(t)), 0o644)

	// The uninterrupted run: the weights after every step.
	ref := make([]uint64, crashSteps+1)
	var r *synth.Run
	r, err := synth.NewRun(context.Background(), small.Spec, append(crashOptions(text, filepath.Join(root, "ref.safetensors")), synth.SaveEvery(0),
		synth.OnEvent(func(e synth.Event) { ref[e.Step] = weightsHash(r.Model()) }))...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Train(context.Background()); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(root, "run")
	os.Mkdir(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "text.txt"), read(t, text), 0o644)
	ck := filepath.Join(dir, "c.safetensors")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	// Kill instants: from the child's start to some tens of steps in (a
	// step with its save takes about 20 ms on the reference machine).
	const maxDelay = 700 * time.Millisecond
	var resumed, empty, fromBackup, completed int
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		delay := time.Duration(rng.Int64N(int64(maxDelay)))
		timer := time.AfterFunc(delay, func() { cmd.Process.Kill() })
		werr := cmd.Wait()
		timer.Stop()
		var exit *exec.ExitError
		if werr != nil && !(errors.As(werr, &exit) && !exit.Exited()) {
			t.Fatalf("kill %d: child failed: %v\n%s", i, werr, out)
		}
		if werr == nil {
			completed++
		}

		// At most one temporary file per file, from the killed save.
		temps := map[string]int{}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if name := e.Name(); strings.HasPrefix(name, ".") {
				temps[name[:strings.LastIndex(name, ".tmp")]]++
			}
		}
		for base, n := range temps {
			if n > 1 {
				t.Errorf("kill %d: %d temporary files of %s", i, n, base)
			}
		}

		h, err := checkpoint.ReadHeader(ck)
		if errors.Is(err, os.ErrNotExist) || (err != nil && strings.Contains(err.Error(), "no such file")) {
			empty++ // killed before its first save
			continue
		}
		if err != nil {
			t.Fatalf("kill %d after %v: %v", i, delay, err)
		}
		s := h.Step
		// The log holds every step up to the checkpoint's once, in order
		// (rows past it, the last one possibly torn, are dropped by the
		// next resume); a finished run's log holds exactly its steps.
		logged, torn := crashLog(t, filepath.Join(dir, "c.csv"))
		if len(logged) < s || (s >= crashSteps && (len(logged) != s || torn)) {
			t.Fatalf("kill %d at step %d: the log holds %d steps (torn last line: %v)", i, s, len(logged), torn)
		}
		if s >= crashSteps {
			for _, e := range entries { // a finished run: start again
				if strings.HasPrefix(e.Name(), "c.") || strings.HasPrefix(e.Name(), ".c.") {
					os.Remove(filepath.Join(dir, e.Name()))
				}
			}
			continue
		}
		stop := min(s+2, crashSteps)
		got := map[int]uint64{}
		var rr *synth.Run
		rr, err = synth.ResumeRun(context.Background(), ck, synth.Out(filepath.Join(root, "v.safetensors")), synth.Overwrite(), synth.StopAt(stop), synth.SaveEvery(0),
			synth.OnEvent(func(e synth.Event) { got[e.Step] = weightsHash(rr.Model()) }))
		if err != nil {
			t.Fatalf("kill %d after %v at step %d: resume: %v", i, delay, s, err)
		}
		p := rr.Plan()
		if !p.WithOptimizer {
			t.Fatalf("kill %d at step %d: resumed without the optimizer state: %v", i, s, p.Notes)
		}
		if strings.Contains(strings.Join(p.Notes, " "), "interrupted") {
			fromBackup++
		}
		if weightsHash(rr.Model()) != ref[s] {
			t.Fatalf("kill %d: the checkpoint of step %d holds other weights than the uninterrupted run's", i, s)
		}
		if _, err := rr.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		for st := s + 1; st <= stop; st++ {
			if got[st] != ref[st] {
				t.Fatalf("kill %d: resumed from step %d, step %d differs from the uninterrupted run", i, s, st)
			}
		}
		resumed++
	}
	t.Logf("%d kills (instants up to %v): %d resumed and matched (%d from the backup state), %d before the first save, %d runs completed",
		kills, maxDelay, resumed, fromBackup, empty, completed)
	if resumed == 0 {
		t.Error("no kill left a checkpoint to resume")
	}
}

// mustDefault is the default text, or skips the test.
func mustDefault(t *testing.T) string {
	t.Helper()
	p, err := synth.DefaultText()
	if err != nil {
		t.Skip(err)
	}
	return p
}

// TestResumeMismatchedState: an optimizer state of another step beside a
// checkpoint (with no backup of the right one) is an error naming both and
// saying how to resume from the weights alone; doing so (moving the state
// aside) resumes with a warning that the moments restart from zero.
func TestResumeMismatchedState(t *testing.T) {
	dir := t.TempDir()
	data := text(t, dir, 20000)
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	ctx := context.Background()
	if _, err := synth.Train(ctx, small.Spec, tiny(data, a, synth.Steps(6), synth.StopAt(3))...); err != nil {
		t.Fatal(err)
	}
	if _, err := synth.Train(ctx, small.Spec, tiny(data, b, synth.Steps(6), synth.StopAt(4))...); err != nil {
		t.Fatal(err)
	}
	// a's checkpoint (step 3) beside b's optimizer state (step 4).
	if err := os.Rename(checkpoint.OptPath(b), checkpoint.OptPath(a)); err != nil {
		t.Fatal(err)
	}
	_, err := synth.ResumeRun(context.Background(), a)
	if err == nil {
		t.Fatal("resumed a checkpoint of step 3 with an optimizer state of step 4")
	}
	for _, want := range []string{checkpoint.OptPath(a), "step 4", "step 3", "weights alone", "aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := os.Rename(checkpoint.OptPath(a), filepath.Join(dir, "aside.safetensors")); err != nil {
		t.Fatal(err)
	}
	r, err := synth.ResumeRun(context.Background(), a, synth.Data(data), synth.Steps(6))
	if err != nil {
		t.Fatal(err)
	}
	if p := r.Plan(); p.WithOptimizer || !strings.Contains(strings.Join(p.Notes, " "), "not an exact continuation") {
		t.Errorf("plan %+v", p)
	}
}

// crashLog reads a killed run's CSV log: its complete rows must be steps
// 1, 2, … each once, with five fields; torn says the file ends in a partial
// line (a kill while it was written).
func crashLog(t *testing.T, path string) (steps []int, torn bool) {
	t.Helper()
	b := read(t, path)
	end := strings.LastIndexByte(string(b), '\n')
	torn = end != len(b)-1
	lines := strings.Split(string(b[:end+1]), "\n")
	if lines[0] != "step,loss,val_loss,lr,tokens_per_s" {
		t.Fatalf("%s: header %q", path, lines[0])
	}
	for k, l := range lines[1 : len(lines)-1] {
		f := strings.Split(l, ",")
		st, err := strconv.Atoi(f[0])
		if len(f) != 5 || err != nil || st != k+1 {
			t.Fatalf("%s: row %d is %q, want step %d", path, k+1, l, k+1)
		}
		steps = append(steps, st)
	}
	return steps, torn
}
