package synth

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
	"github.com/synthgen/synthgen/specs"
)

// Model is a byte-level language model of one spec, running on the kernels
// of the generated package that the program links for that spec, together
// with the number of training steps its weights have seen.
//
// A Model is not safe for concurrent use: run one Evaluate, Sample or
// training step at a time (each uses all of the model's workers).
type Model struct {
	net  *model.Model
	step int
}

// Linked lists the names of the specs whose generated packages this
// program links, sorted.
func Linked() []string { return kernels.Names() }

// LookupSpec resolves a spec given by the name of a linked spec ("small")
// or by the path of a spec file ("specs/small.json", anything ending in
// .json or holding a path separator). A file's spec must be exactly the
// one its linked package was generated from.
func LookupSpec(nameOrFile string) (specs.Spec, error) {
	name := nameOrFile
	var file *specs.Spec
	if strings.HasSuffix(nameOrFile, ".json") || strings.ContainsRune(nameOrFile, filepath.Separator) || strings.ContainsRune(nameOrFile, '/') {
		s, err := specs.Load(nameOrFile)
		if err != nil {
			return specs.Spec{}, err
		}
		file, name = s, s.Name
	}
	linked, err := kernels.Spec(name)
	if err != nil {
		return specs.Spec{}, err
	}
	if file != nil && file.JSON() != linked.JSON() {
		pkg, _ := kernels.PackageOf(name)
		return specs.Spec{}, fmt.Errorf("spec file %s: its spec %s differs from the linked %q %s (package %s): regenerate that package from the file (go generate) and rebuild", nameOrFile, file.JSON(), name, linked.JSON(), pkg)
	}
	return linked, nil
}

// dispatch returns the kernels of spec s, checking that the linked package
// of that name was generated from exactly s.
// A nil isa is the level Level gives (the CPU's best, or SYNTHGEN_ISA).
func dispatch(s specs.Spec, isa *kernels.ISA) (*kernels.Kernels, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if isa != nil {
		return kernels.ForAt(s, *isa)
	}
	return kernels.For(s)
}

// New builds a fresh model of spec s, initialised as the model card says
// from seed. The program must link s's generated package (a blank import
// of it is enough); otherwise the error says which spec and how to
// generate it.
func New(s specs.Spec, seed uint64) (*Model, error) { return newModel(s, seed, nil) }

// newModel is New on the kernels of level isa (nil: Level's).
func newModel(s specs.Spec, seed uint64, isa *kernels.ISA) (*Model, error) {
	k, err := dispatch(s, isa)
	if err != nil {
		return nil, err
	}
	net, err := model.New(s, k, seed)
	if err != nil {
		return nil, fmt.Errorf("build model %s: %w", s.Name, err)
	}
	return &Model{net: net}, nil
}

// Load reads a checkpoint written by Save or by a training run: the
// weights, the spec and the step. The spec's generated package must be
// linked. A ctx cancelled before or during the read gives its error.
//
// Of the options, Load takes ISA, which runs the model's kernels at that
// instruction-set level or below, whatever SYNTHGEN_ISA says (a level this
// CPU lacks is an error); without it, the kernels run at kernels.Level().
// Any other option, a training run's setting, is an error naming it.
//
//	m, err := synth.Load(ctx, "small.safetensors", synth.ISA(kernels.AVX2))
func Load(ctx context.Context, path string, opts ...Option) (*Model, error) {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	for key := range o.set {
		if key != "isa" {
			name := optionNames[key]
			if name == "" {
				name = key
			}
			return nil, fmt.Errorf("load %s: option %s is a training run's setting; Load takes only ISA", path, name)
		}
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	h, err := checkpoint.ReadHeader(path)
	if err != nil {
		return nil, err
	}
	k, err := dispatch(h.Spec, o.isa)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %s: %w", path, err)
	}
	net, err := model.New(h.Spec, k, 0)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	if err := h.Into(net); err != nil {
		return nil, err
	}
	if err := cancelled(ctx); err != nil {
		return nil, err
	}
	return &Model{net: net, step: h.Step}, nil
}

// cancelled is ctx's error once ctx is done, with its cause when that is
// another error.
func cancelled(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if c := context.Cause(ctx); c != nil && c != err {
		return fmt.Errorf("%w: %w", c, err)
	}
	return err
}

// CheckpointSpec reads the spec and step a checkpoint file states, checking
// the file's structure but loading no weights and needing no linked
// package.
func CheckpointSpec(path string) (specs.Spec, int, error) {
	h, err := checkpoint.ReadHeader(path)
	if err != nil {
		return specs.Spec{}, 0, err
	}
	return h.Spec, h.Step, nil
}

// Save writes the model's weights, spec and step to path as a safetensors
// checkpoint with the model card's tensor names. The file is replaced
// atomically: a crash leaves the old file or the new one.
func (m *Model) Save(path string) error { return checkpoint.Save(path, m.net, m.step) }

// Spec is the model's spec.
func (m *Model) Spec() specs.Spec { return m.net.Spec }

// Step is the number of training steps the weights have seen.
func (m *Model) Step() int { return m.step }

// NumParams is the number of parameters (frozen ones included).
func (m *Model) NumParams() int { return m.net.NumParams() }

// ISA is the highest instruction set the model's kernels run on.
func (m *Model) ISA() kernels.ISA { return m.net.Kernels.ISA }

// SetWorkers sets the number of goroutines the model's passes use
// (0: GOMAXPROCS). Results do not depend on it.
func (m *Model) SetWorkers(n int) { m.net.SetWorkers(n) }

// EvalResult is an evaluation: the mean next-byte cross-entropy over the
// scored bytes (or, for a classifier's validation, the mean cross-entropy
// and the accuracy over the examples).
type EvalResult struct {
	Loss    float64 // nats per byte (a classifier's: nats per example)
	Windows int     // windows of n+1 bytes scored
	Tokens  int     // bytes scored: Windows·n
	// A classifier's validation during training: the examples scored and
	// the share classified right (NaN for a language model).
	Examples int
	Accuracy float64
}

// BPB is the loss in bits per byte.
func (r EvalResult) BPB() float64 { return r.Loss / math.Ln2 }

// EvalOptions tune Evaluate. The zero value scores every window, 16 per
// forward pass.
type EvalOptions struct {
	Windows int // score at most this many windows (0: all)
	Batch   int // windows per forward pass: speed and memory only (0: 16)
	// AllowLargeMemory skips the check that the evaluation's workspace
	// fits in MemoryLimit (without it, a batch too large is an error).
	AllowLargeMemory bool
}

// Evaluate is the model card's loss of the model on text: its consecutive,
// non-overlapping windows of n+1 bytes (a trailing partial window is
// dropped), each scored on predicting bytes 1..n from the bytes before.
// It stops early with ctx's error when ctx is cancelled.
func (m *Model) Evaluate(ctx context.Context, text []byte, opts EvalOptions) (EvalResult, error) {
	if m.IsClassifier() {
		return EvalResult{}, fmt.Errorf("evaluate: spec %q is a classifier: evaluate it on a labelled file (EvaluateLabelled)", m.net.Spec.Name)
	}
	if opts.Windows < 0 {
		return EvalResult{}, fmt.Errorf("evaluate: windows %d must be ≥ 0", opts.Windows)
	}
	if opts.Batch < 0 {
		return EvalResult{}, fmt.Errorf("evaluate: batch %d must be ≥ 0", opts.Batch)
	}
	batch := opts.Batch
	if batch == 0 {
		batch = 16
	}
	n := m.net.Spec.N
	if len(text) < n+1 {
		return EvalResult{}, fmt.Errorf("evaluate: %d bytes is too short: a window needs n+1 = %d bytes", len(text), n+1)
	}
	k := data.NumWindows(text, n, opts.Windows)
	if !opts.AllowLargeMemory {
		ws := m.net.WorkspaceBytes(min(batch, k))
		if rule := overMemory(m.net.ParamBytes()+ws, ws); rule != "" {
			return EvalResult{}, fmt.Errorf("evaluate: batch %d: %s at %d windows per pass %s: lower the batch, or allow it with EvalOptions.AllowLargeMemory (synth eval: -force)", batch, m.net.Spec.Name, min(batch, k), rule)
		}
	}
	ev := train.NewEvaluator(m.net, min(batch, k))
	res, err := ev.EvaluateContext(ctx, text, opts.Windows)
	return lmResult(res), err
}

// DefaultText is the path of the default training text, Isaac Newton's
// Opticks as every Go installation ships it.
func DefaultText() (string, error) { return data.DefaultFile() }

// HeldOut returns the validation part of the text file at path for spec
// s: the last 10% that training holds out. An empty path is the default
// text, as for training.
func HeldOut(path string, s specs.Spec) ([]byte, error) {
	if path == "" {
		p, err := data.DefaultFile()
		if err != nil {
			return nil, err
		}
		path = p
	}
	ds, err := data.Load(path, s.N, s.Vocab)
	if err != nil {
		return nil, err
	}
	return ds.Val, nil
}

// ErrNotLinked is matched (errors.Is) by the errors of New, Load and
// training when the program does not link the spec's generated package.
var ErrNotLinked = kernels.ErrNotLinked
