// Package study runs a variant study: it trains a list of specs (by
// default the n128 family of Synthesizer, AFT and linear variants) on the
// same data, with the same seeds, steps, batch and held-out windows, one
// run after another with all the workers, and writes into one folder a
// table of the results (Markdown, CSV, JSON), the loss curves of every
// run (loss.png) and every run's checkpoint, optimizer state and log. It
// is built on runtime/synth's public API.
//
//	s, err := study.New("study", study.Specs(family...), study.Steps(600))
//	res, err := s.Run(ctx) // Ctrl-C: finished runs kept, the current one saved
//	s, err = study.Open("study") // later: continue where it stopped
//	res, err = s.Run(ctx)
//
// A study is deterministic: an interrupted study continued with Open
// gives the table of an uninterrupted one, apart from the measured
// columns (tokens per second and wall time).
//
// The folder holds study.json (the settings and each run's state and
// result), results.md, results.csv, results.json, loss.png (for a
// classification study also accuracy.png: validation accuracy against
// steps), and per run <spec>-seed<k>.safetensors, .opt.safetensors and
// .csv.
package study

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/internal/atomicfile"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/synth"
	"github.com/synthgen/synthgen/specs"
)

// Defaults of a study: 600 steps of 16 × 128 tokens per spec, under a
// third of synth train's default run, so that the 14 specs of the n128
// family fit a 15-minute budget on a quiet 2-core machine.
const (
	DefaultSteps       = 600
	DefaultBatch       = 16
	DefaultSeeds       = 1
	DefaultSeed        = 1
	DefaultEvalEvery   = 50
	DefaultEvalWindows = 64
)

// MaxSeeds bounds Seeds: a study plans its runs (specs × seeds) up front.
const MaxSeeds = 1000

// ManifestFile is the study's state file in its folder.
const ManifestFile = "study.json"

// Files of a study's results in its folder.
const (
	MarkdownFile = "results.md"
	CSVFile      = "results.csv"
	JSONFile     = "results.json"
	LossPlotFile = "loss.png"
	// AccuracyPlotFile is a classification study's validation accuracy
	// curves.
	AccuracyPlotFile = "accuracy.png"
)

// Settings decide a study's results: the same settings give the same
// table.
type Settings struct {
	Specs       []specs.Spec `json:"specs"`
	Data        string       `json:"data"`        // absolute path of the text
	DataSize    int64        `json:"data_size"`   // its size in bytes
	DataSHA256  string       `json:"data_sha256"` // and its hash, checked on resume
	Steps       int          `json:"steps"`
	Batch       int          `json:"batch"`
	Seeds       int          `json:"seeds"`
	Seed        uint64       `json:"seed"` // the first run's seed; run k uses Seed+k
	EvalEvery   int          `json:"eval_every"`
	EvalWindows int          `json:"eval_windows"`
	// A classification study (Classify): the task, and the labelled
	// validation and test files (absolute) with their hashes; Data is
	// then the labelled training file.
	Task        string `json:"task,omitempty"`
	Valid       string `json:"valid,omitempty"`
	ValidSHA256 string `json:"valid_sha256,omitempty"`
	Test        string `json:"test,omitempty"`
	TestSHA256  string `json:"test_sha256,omitempty"`
}

// An Option sets one setting of a study.
type Option func(*options)

type options struct {
	set        map[string]bool
	s          Settings
	data       string
	valid      string // Classify's files
	test       string
	workers    int
	onProgress func(Progress)
}

func setter(name string, f func(*options)) Option {
	return func(o *options) { o.set[name] = true; f(o) }
}

// Specs are the specs to train, in the table's order (default:
// DefaultFamily). Their generated packages must be linked.
func Specs(ss ...specs.Spec) Option {
	return setter("specs", func(o *options) { o.s.Specs = append([]specs.Spec(nil), ss...) })
}

// Data trains every spec on the text file at path (its last 10% held
// out). Default: synth.DefaultText.
func Data(path string) Option { return setter("data", func(o *options) { o.data = path }) }

// Steps is every run's number of training steps (and schedule length).
func Steps(n int) Option { return setter("steps", func(o *options) { o.s.Steps = n }) }

// Batch is the number of sequences per step.
func Batch(n int) Option { return setter("batch", func(o *options) { o.s.Batch = n }) }

// Seeds trains every spec n times, with seeds Seed, Seed+1, …; the table
// gives the mean ± standard deviation of the losses.
func Seeds(n int) Option { return setter("seeds", func(o *options) { o.s.Seeds = n }) }

// Seed is the first run's seed (initialisation and batches).
func Seed(s uint64) Option { return setter("seed", func(o *options) { o.s.Seed = s }) }

// EvalEvery evaluates every n steps for the validation curve (0: only the
// final evaluation, so loss.png has no validation curve).
func EvalEvery(n int) Option { return setter("eval-every", func(o *options) { o.s.EvalEvery = n }) }

// EvalWindows caps the held-out windows of the curve's evaluations (0:
// all). The table's validation loss is always on every held-out window.
func EvalWindows(n int) Option {
	return setter("eval-windows", func(o *options) { o.s.EvalWindows = n })
}

// Workers is the number of goroutines each run uses (0: GOMAXPROCS).
// Results do not depend on it.
func Workers(n int) Option { return func(o *options) { o.workers = n } }

// OnProgress calls f with the study's progress after every step and when
// a run starts, is skipped or ends, on the training goroutine; f must
// return quickly.
func OnProgress(f func(Progress)) Option { return func(o *options) { o.onProgress = f } }

// Study is a prepared variant study. Make one with New or Open, read its
// Plan, then call Run.
type Study struct {
	dir     string
	o       options
	resumed bool
	state   *manifest
}

// RunPlan is one (spec, seed) run of a study and its state.
type RunPlan struct {
	Spec       specs.Spec
	Seed       uint64
	Checkpoint string // its checkpoint in the folder
	Done       bool   // trained and evaluated: Run skips it
	Step       int    // the step its checkpoint has reached (0: not started)
}

// Plan is what a study will do.
type Plan struct {
	Dir      string
	Settings Settings
	Resumed  bool // continues a study found in Dir
	Runs     []RunPlan
	Workers  int
	// TotalSteps and DoneSteps count training steps over all runs.
	TotalSteps, DoneSteps int
}

// manifest is study.json.
type manifest struct {
	Version  int        `json:"version"`
	Settings Settings   `json:"settings"`
	Runs     []runState `json:"runs"`
}

// runState is one run's entry of study.json.
type runState struct {
	Spec         string     `json:"spec"`
	Seed         uint64     `json:"seed"`
	Checkpoint   string     `json:"checkpoint"` // file name in the folder
	WallSeconds  float64    `json:"wall_seconds"`
	TrainSeconds float64    `json:"train_seconds"` // in training steps only
	TrainedSteps int        `json:"trained_steps"` // steps the measured times cover
	Result       *RunResult `json:"result,omitempty"`
}

func defaults() options {
	return options{set: map[string]bool{}, s: Settings{
		Steps: DefaultSteps, Batch: DefaultBatch, Seeds: DefaultSeeds, Seed: DefaultSeed,
		EvalEvery: DefaultEvalEvery, EvalWindows: DefaultEvalWindows,
	}}
}

func apply(opts []Option) options {
	o := defaults()
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// New prepares a new study in folder dir (created by Run if missing). It
// checks every input before anything is trained or written: the
// settings, that every spec is linked, the data file (not empty, long
// enough for a window of every spec in both its training and held-out
// parts), that dir is not a file, and that dir holds no earlier study or
// file the study would overwrite (continue an earlier study with Open).
func New(dir string, opts ...Option) (*Study, error) {
	o := apply(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	if len(o.s.Specs) == 0 {
		family := DefaultFamily
		if o.s.Task == TaskClassify || o.s.Task == TaskListOps {
			family = DefaultClassifyFamily
		}
		fam, err := family()
		if err != nil {
			return nil, err
		}
		o.s.Specs = fam
	}
	if err := checkSpecs(o.s.Specs); err != nil {
		return nil, err
	}
	if err := o.resolveClassify(); err != nil {
		return nil, err
	}
	if err := o.resolveData(); err != nil {
		return nil, err
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	st := &Study{dir: dir, o: o, state: &manifest{Version: 1, Settings: o.s}}
	for _, r := range st.runs() {
		st.state.Runs = append(st.state.Runs, runState{Spec: r.Spec.Name, Seed: r.Seed, Checkpoint: filepath.Base(r.Checkpoint)})
	}
	// Nothing already in the folder may be overwritten.
	names := []string{ManifestFile, MarkdownFile, CSVFile, JSONFile, LossPlotFile}
	if o.s.isClassify() {
		names = append(names, AccuracyPlotFile)
	}
	for _, r := range st.state.Runs {
		base := strings.TrimSuffix(r.Checkpoint, ".safetensors")
		names = append(names, r.Checkpoint, base+".opt.safetensors", base+".csv")
	}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Lstat(p); err == nil {
			what := "a file"
			if n == ManifestFile {
				what = "a study"
			}
			return nil, fmt.Errorf("output folder %s already holds %s (%s) that this study would overwrite: continue that study with resume, or choose another folder", dir, what, p)
		}
	}
	return st, nil
}

// Open prepares the continuation of the study saved in folder dir: its
// settings come from dir/study.json; options may repeat them (a setting
// that differs is an error, since the table would no longer be the
// study's) and set Workers and OnProgress. Finished runs are not
// retrained; an interrupted run continues from its checkpoint.
func Open(dir string, opts ...Option) (*Study, error) {
	o := apply(opts)
	if err := o.validate(); err != nil {
		return nil, err
	}
	if err := checkDir(dir); err != nil {
		return nil, err
	}
	mp := filepath.Join(dir, ManifestFile)
	if fi, err := os.Stat(mp); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("resume: %s is not a regular file", mp) // a FIFO would block the read
	}
	b, err := os.ReadFile(mp)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("resume: no study in %s (no %s): start one without resume", dir, ManifestFile)
	}
	if err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("resume: %s: %w", mp, err)
	}
	saved := m.Settings
	if m.Version != 1 || len(saved.Specs) == 0 || saved.Steps < 1 || saved.Batch < 1 || saved.Seeds < 1 || saved.Seeds > MaxSeeds {
		return nil, fmt.Errorf("resume: %s is not a study manifest this program understands", mp)
	}
	// Options given must agree with the saved settings.
	var diff []string
	check := func(name string, same bool, given, was any) {
		if o.set[name] && !same {
			diff = append(diff, fmt.Sprintf("%s %v (the study's: %v)", name, given, was))
		}
	}
	check("steps", o.s.Steps == saved.Steps, o.s.Steps, saved.Steps)
	check("batch", o.s.Batch == saved.Batch, o.s.Batch, saved.Batch)
	check("seeds", o.s.Seeds == saved.Seeds, o.s.Seeds, saved.Seeds)
	check("seed", o.s.Seed == saved.Seed, o.s.Seed, saved.Seed)
	check("eval-every", o.s.EvalEvery == saved.EvalEvery, o.s.EvalEvery, saved.EvalEvery)
	check("eval-windows", o.s.EvalWindows == saved.EvalWindows, o.s.EvalWindows, saved.EvalWindows)
	if o.set["specs"] {
		check("specs", specNames(o.s.Specs) == specNames(saved.Specs), specNames(o.s.Specs), specNames(saved.Specs))
	}
	if o.set["data"] {
		abs, err := filepath.Abs(o.data)
		if err != nil {
			abs = o.data
		}
		check("data", abs == saved.Data, abs, saved.Data)
	}
	if len(diff) > 0 {
		return nil, fmt.Errorf("resume %s: %s: a resumed study keeps its settings; drop them, or start a new study in another folder", dir, strings.Join(diff, "; "))
	}
	if err := checkSpecs(saved.Specs); err != nil {
		return nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	o.s, o.data = saved, saved.Data
	size, sum, err := fingerprint(saved.Data)
	if err != nil {
		return nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	if size != saved.DataSize || sum != saved.DataSHA256 {
		return nil, fmt.Errorf("resume %s: data file %s changed since the study began (%d bytes, sha256 %.12s…; was %d bytes, %.12s…)", dir, saved.Data, size, sum, saved.DataSize, saved.DataSHA256)
	}
	if saved.isClassify() {
		for _, f := range [][2]string{{saved.Valid, saved.ValidSHA256}, {saved.Test, saved.TestSHA256}} {
			if _, sum, err := fingerprint(f[0]); err != nil {
				return nil, fmt.Errorf("resume %s: %w", dir, err)
			} else if sum != f[1] {
				return nil, fmt.Errorf("resume %s: labelled file %s changed since the study began", dir, f[0])
			}
		}
	}
	if o.set["task"] {
		check("task", o.s.Task == saved.Task, o.s.Task, saved.Task)
		if len(diff) > 0 {
			return nil, fmt.Errorf("resume %s: %s: a resumed study keeps its settings", dir, strings.Join(diff, "; "))
		}
	}
	if err := checkStudyData(saved); err != nil {
		return nil, fmt.Errorf("resume %s: %w", dir, err)
	}
	st := &Study{dir: dir, o: o, resumed: true, state: &m}
	want := st.runs()
	if len(m.Runs) != len(want) {
		return nil, fmt.Errorf("resume: %s lists %d runs, its settings make %d", mp, len(m.Runs), len(want))
	}
	for i, r := range want {
		if m.Runs[i].Spec != r.Spec.Name || m.Runs[i].Seed != r.Seed {
			return nil, fmt.Errorf("resume: %s: run %d is %s seed %d, want %s seed %d", mp, i, m.Runs[i].Spec, m.Runs[i].Seed, r.Spec.Name, r.Seed)
		}
	}
	return st, nil
}

func (o *options) validate() error {
	s := o.s
	switch {
	case s.Steps < 1:
		return fmt.Errorf("steps %d must be ≥ 1", s.Steps)
	case s.Batch < 1:
		return fmt.Errorf("batch %d must be ≥ 1", s.Batch)
	case s.Seeds < 1 || s.Seeds > MaxSeeds:
		return fmt.Errorf("seeds %d must satisfy 1 ≤ seeds ≤ %d", s.Seeds, MaxSeeds)
	case s.EvalEvery < 0:
		return fmt.Errorf("eval-every %d must be ≥ 0", s.EvalEvery)
	case s.EvalWindows < 0:
		return fmt.Errorf("eval-windows %d must be ≥ 0", s.EvalWindows)
	case o.workers < 0 || o.workers > synth.MaxWorkers():
		return fmt.Errorf("workers %d must satisfy 0 ≤ workers ≤ %d (%d per CPU)", o.workers, synth.MaxWorkers(), synth.WorkersPerCPU)
	}
	return nil
}

// resolveData fixes the data file (the default text when none is given),
// checks it against every spec and records its fingerprint.
func (o *options) resolveData() error {
	path := o.data
	if path == "" {
		p, err := synth.DefaultText()
		if err != nil {
			return err
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("data file %s: %w", path, err)
	}
	s := o.s
	s.Data = abs
	if err := checkStudyData(s); err != nil {
		return err
	}
	size, sum, err := fingerprint(abs)
	if err != nil {
		return err
	}
	o.data = abs
	o.s.Data, o.s.DataSize, o.s.DataSHA256 = abs, size, sum
	return nil
}

// checkStudyData checks the study's data against its specs: the text of a
// language-model study, the labelled files of a classification study.
func checkStudyData(s Settings) error {
	if s.isClassify() {
		return checkLabelled(s)
	}
	return checkData(s.Data, s.Specs)
}

// checkData checks that the text at path trains and evaluates every spec.
func checkData(path string, ss []specs.Spec) error {
	b, err := data.ReadFile(path)
	if err != nil {
		return err
	}
	if len(b) == 0 {
		return fmt.Errorf("data file %s is empty", path)
	}
	done := map[[2]int]bool{}
	for _, s := range ss {
		k := [2]int{s.N, s.Vocab}
		if done[k] {
			continue
		}
		done[k] = true
		if _, err := synth.HeldOut(path, s); err != nil {
			return fmt.Errorf("spec %s: %w", s.Name, err)
		}
	}
	return nil
}

func fingerprint(path string) (int64, string, error) {
	b, err := data.ReadFile(path)
	if err != nil {
		return 0, "", err
	}
	h := sha256.Sum256(b)
	return int64(len(b)), hex.EncodeToString(h[:]), nil
}

// checkSpecs checks that every spec is valid, linked as it is, and given
// once.
func checkSpecs(ss []specs.Spec) error {
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s.Name] {
			return fmt.Errorf("spec %s is given twice", s.Name)
		}
		seen[s.Name] = true
		if err := s.Validate(); err != nil {
			return fmt.Errorf("spec %s: %w", s.Name, err)
		}
		linked, err := synth.LookupSpec(s.Name)
		if err != nil {
			return fmt.Errorf("spec %s: %w", s.Name, err)
		}
		if linked.JSON() != s.JSON() {
			return fmt.Errorf("spec %s %s differs from the linked %s: regenerate its package (go generate)", s.Name, s.JSON(), linked.JSON())
		}
	}
	return nil
}

// checkDir fails when dir exists and is not a directory.
func checkDir(dir string) error {
	if dir == "" {
		return errors.New("no output folder given")
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("output folder %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("output folder %s is a file, not a folder", dir)
	}
	return nil
}

func specNames(ss []specs.Spec) string {
	var n []string
	for _, s := range ss {
		n = append(n, s.Name)
	}
	return strings.Join(n, ",")
}

// runs lists the study's runs: every spec, then every seed.
func (st *Study) runs() []RunPlan {
	s := st.o.s
	var out []RunPlan
	for _, sp := range s.Specs {
		for k := 0; k < s.Seeds; k++ {
			seed := s.Seed + uint64(k)
			out = append(out, RunPlan{Spec: sp, Seed: seed, Checkpoint: filepath.Join(st.dir, fmt.Sprintf("%s-seed%d.safetensors", sp.Name, seed))})
		}
	}
	return out
}

// Plan says what Run will do: the runs, which are done, and where each
// interrupted one stands.
func (st *Study) Plan() Plan {
	p := Plan{Dir: st.dir, Settings: st.o.s, Resumed: st.resumed, Workers: st.o.workers}
	for i, r := range st.runs() {
		rs := st.state.Runs[i]
		r.Done = rs.Result != nil
		if r.Done {
			r.Step = st.o.s.Steps
		} else if st.resumed {
			if _, step, err := synth.CheckpointSpec(r.Checkpoint); err == nil && fileExists(synthOpt(r.Checkpoint)) {
				r.Step = step
			}
		}
		p.Runs = append(p.Runs, r)
		p.TotalSteps += st.o.s.Steps
		p.DoneSteps += r.Step
	}
	return p
}

// String describes the plan in a few lines.
func (p Plan) String() string {
	var b strings.Builder
	s := p.Settings
	verb := "study"
	if p.Resumed {
		verb = "resuming study"
	}
	done := 0
	for _, r := range p.Runs {
		if r.Done {
			done++
		}
	}
	fmt.Fprintf(&b, "%s in %s: %d specs × %d seed(s) = %d runs (%d done)\n", verb, p.Dir, len(s.Specs), s.Seeds, len(p.Runs), done)
	fmt.Fprintf(&b, "specs: %s\n", specNames(s.Specs))
	if s.isClassify() {
		fmt.Fprintf(&b, "task %s: train on %s, validation curve on %s, table on %s\n", s.Task, s.Data, s.Valid, s.Test)
		fmt.Fprintf(&b, "each run: %d steps × batch %d, %s, validation every %d steps, final loss and accuracy on the test file", s.Steps, s.Batch, seedText(s), s.EvalEvery)
		return b.String()
	}
	fmt.Fprintf(&b, "data: %s (%d bytes, last 10%% held out)\n", s.Data, s.DataSize)
	fmt.Fprintf(&b, "each run: %d steps × batch %d, %s, validation curve every %d steps on %s windows, final validation on every held-out window",
		s.Steps, s.Batch, seedText(s), s.EvalEvery, windowText(s.EvalWindows))
	return b.String()
}

func synthOpt(ckpt string) string {
	return strings.TrimSuffix(ckpt, ".safetensors") + ".opt.safetensors"
}

func runCSV(ckpt string) string { return strings.TrimSuffix(ckpt, ".safetensors") + ".csv" }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// writeAtomic writes b to path through a temporary file and a rename.
func writeAtomic(path string, b []byte) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
