package checkpoint

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/runtime/data"
	"github.com/synthgen/synthgen/runtime/kernels"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
	"github.com/synthgen/synthgen/specs"
)

// Metadata keys of checkpoints (the model card's) and of optimizer files.
const (
	KeySpec   = "spec"   // the spec's canonical JSON (specs.Spec.JSON)
	KeyStep   = "step"   // completed training steps, decimal
	KeyFormat = "format" // "pt", as PyTorch-written safetensors say
	KeyLabels = "labels" // a classifier's label strings in class order, a JSON list
)

// Prefixes of the optimizer-state tensors.
const (
	PrefixM = "adam.m."
	PrefixV = "adam.v."
)

// OptPath is the optimizer-state file beside checkpoint path:
// "x.safetensors" → "x.opt.safetensors" (other names get ".opt.safetensors"
// appended).
func OptPath(path string) string {
	return strings.TrimSuffix(path, ".safetensors") + ".opt.safetensors"
}

// Save writes m's parameters, spec and step to path, atomically.
func Save(path string, m *model.Model, step int) error {
	ts := make([]WriteTensor, len(m.Params))
	for i, p := range m.Params {
		ts[i] = WriteTensor{Name: p.Name, Shape: p.Shape, Data: p.Data}
	}
	meta := map[string]string{KeySpec: m.Spec.JSON(), KeyStep: strconv.Itoa(step), KeyFormat: "pt"}
	if m.Spec.IsClassifier() {
		if err := checkLabels(m.Labels, m.Spec.Classes); err != nil {
			return fmt.Errorf("save checkpoint %s: %w", path, err)
		}
		js, err := json.Marshal(m.Labels)
		if err != nil {
			return fmt.Errorf("save checkpoint %s: labels: %w", path, err)
		}
		meta[KeyLabels] = string(js)
	}
	if err := Write(path, ts, meta); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// Header is what a checkpoint says about itself.
type Header struct {
	File   *File
	Spec   specs.Spec
	Step   int
	Labels []string // a classifier's labels in class order; nil for a language model
}

// checkLabels checks a classifier's labels: classes of them, each a valid
// label (data.NewLabels), none twice.
func checkLabels(labels []string, classes int) error {
	if len(labels) != classes {
		return fmt.Errorf("the classifier has %d labels for its %d classes", len(labels), classes)
	}
	if _, err := data.NewLabels(labels); err != nil {
		return fmt.Errorf("labels: %w", err)
	}
	return nil
}

// specLabels reads f's "labels" metadata: required of a classifier (a JSON
// list of s.Classes labels), refused for a language model.
func specLabels(f *File, s *specs.Spec) ([]string, error) {
	js, ok := f.Metadata[KeyLabels]
	if !s.IsClassifier() {
		if ok {
			return nil, fmt.Errorf("%s: metadata %q is only for a classifier, and the spec's task is a language model", f.Path, KeyLabels)
		}
		return nil, nil
	}
	if !ok {
		return nil, fmt.Errorf("%s: metadata has no %q entry, which a classifier's checkpoint must have", f.Path, KeyLabels)
	}
	var labels []string
	if err := json.Unmarshal([]byte(js), &labels); err != nil {
		return nil, fmt.Errorf("%s: metadata %q is not a JSON list of strings: %w", f.Path, KeyLabels, err)
	}
	if err := checkLabels(labels, s.Classes); err != nil {
		return nil, fmt.Errorf("%s: metadata %q: %w", f.Path, KeyLabels, err)
	}
	return labels, nil
}

// ReadHeader reads path and validates its file structure, its spec and its
// step (not the tensors against the spec).
func ReadHeader(path string) (*Header, error) {
	f, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	s, step, err := specStep(f)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	labels, err := specLabels(f, s)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	return &Header{File: f, Spec: *s, Step: step, Labels: labels}, nil
}

func specStep(f *File) (*specs.Spec, int, error) {
	js, ok := f.Metadata[KeySpec]
	if !ok {
		return nil, 0, fmt.Errorf("%s: metadata has no %q entry (not a synthgen checkpoint?)", f.Path, KeySpec)
	}
	s, err := specs.Parse(f.Path+" metadata \"spec\"", []byte(js))
	if err != nil {
		return nil, 0, err
	}
	st, ok := f.Metadata[KeyStep]
	if !ok {
		return nil, 0, fmt.Errorf("%s: metadata has no %q entry", f.Path, KeyStep)
	}
	step, err := strconv.Atoi(st)
	if err != nil || step < 0 {
		return nil, 0, fmt.Errorf("%s: metadata \"step\" = %q is not a non-negative integer", f.Path, st)
	}
	return s, step, nil
}

// Kernels looks up the linked kernels of spec s and checks that the linked
// package was generated from the same spec.
func Kernels(path string, s *specs.Spec) (*kernels.Kernels, error) {
	k, err := kernels.For(*s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Load reads the checkpoint at path and builds its model on the linked
// kernels of its spec. It returns the model and the checkpoint's step.
func Load(path string) (*model.Model, int, error) {
	h, err := ReadHeader(path)
	if err != nil {
		return nil, 0, err
	}
	k, err := Kernels(path, &h.Spec)
	if err != nil {
		return nil, 0, fmt.Errorf("load checkpoint: %w", err)
	}
	m, err := model.New(h.Spec, k, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	if err := h.Into(m); err != nil {
		return nil, 0, err
	}
	return m, h.Step, nil
}

// Into copies the checkpoint's tensors into m's parameters, checking that
// the names, dtypes and shapes are exactly the model's, and a classifier's
// labels into m.Labels.
func (h *Header) Into(m *model.Model) error {
	if m.Spec.JSON() != h.Spec.JSON() {
		return fmt.Errorf("load checkpoint %s: spec %s does not match the model's %s", h.File.Path, h.Spec.JSON(), m.Spec.JSON())
	}
	if err := loadTensors(h.File, "", m.Params, func(p *model.Param) []float32 { return p.Data }); err != nil {
		return err
	}
	m.Labels = append([]string(nil), h.Labels...)
	if h.Labels == nil {
		m.Labels = nil
	}
	return nil
}

// loadTensors copies the tensors prefix+p.Name of f into dst(p) for every
// param, and rejects tensors of f that match none.
func loadTensors(f *File, prefix string, params []*model.Param, dst func(*model.Param) []float32) error {
	want := map[string]bool{}
	for _, p := range params {
		d := dst(p)
		if d == nil {
			continue
		}
		name := prefix + p.Name
		want[name] = true
		t, ok := f.Tensors[name]
		if !ok {
			return fmt.Errorf("load %s: tensor %q is missing", f.Path, name)
		}
		if t.DType != "F32" {
			return fmt.Errorf("load %s: tensor %q has dtype %s, want F32", f.Path, name, t.DType)
		}
		if !slices.Equal(t.Shape, p.Shape) {
			return fmt.Errorf("load %s: tensor %q has shape %v, want %v", f.Path, name, t.Shape, p.Shape)
		}
		if err := t.Float32s(d); err != nil {
			return fmt.Errorf("load %s: %w", f.Path, err)
		}
		for i, x := range d {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("load %s: tensor %q holds %v at element %d: the weights are not finite (a diverged run or a damaged file)", f.Path, name, x, i)
			}
		}
	}
	for _, name := range f.Names() {
		if !want[name] {
			return fmt.Errorf("load %s: unexpected tensor %q (not a parameter of this spec)", f.Path, name)
		}
	}
	return nil
}

// SaveOpt writes the optimizer's moments (adam.m.<name>, adam.v.<name> for
// every non-frozen parameter) with the model's spec, the step, AdamW's
// update count, the checksum of m's weights (KeyWeights, which binds the
// state to the checkpoint of those weights) and extra metadata to path,
// atomically.
func SaveOpt(path string, m *model.Model, o *optim.AdamW, step int, extra map[string]string) error {
	var ts []WriteTensor
	for i, p := range o.Params {
		if o.M[i] == nil {
			continue
		}
		ts = append(ts, WriteTensor{Name: PrefixM + p.Name, Shape: p.Shape, Data: o.M[i]})
	}
	for i, p := range o.Params {
		if o.V[i] == nil {
			continue
		}
		ts = append(ts, WriteTensor{Name: PrefixV + p.Name, Shape: p.Shape, Data: o.V[i]})
	}
	meta := map[string]string{}
	for k, v := range extra {
		meta[k] = v
	}
	meta[KeySpec] = m.Spec.JSON()
	meta[KeyStep] = strconv.Itoa(step)
	meta[KeyAdamSteps] = strconv.Itoa(o.Steps)
	meta[KeyWeights] = WeightsSum(m)
	if err := Write(path, ts, meta); err != nil {
		return fmt.Errorf("save optimizer state: %w", err)
	}
	return nil
}

// LoadOpt reads the optimizer state at path into o, checking that it
// belongs to the model's spec, to a checkpoint of the given step and, when
// the state records the checksum of its weights (KeyWeights; files of
// earlier versions lack it), to m's weights. It returns the file's
// metadata.
func LoadOpt(path string, m *model.Model, o *optim.AdamW, step int) (map[string]string, error) {
	f, err := Read(path)
	if err != nil {
		return nil, fmt.Errorf("load optimizer state: %w", err)
	}
	return loadOpt(f, m, o, step)
}

// loadOpt is LoadOpt of the parsed file f.
func loadOpt(f *File, m *model.Model, o *optim.AdamW, step int) (map[string]string, error) {
	path := f.Path
	s, st, err := specStep(f)
	if err != nil {
		return nil, fmt.Errorf("load optimizer state: %w", err)
	}
	if s.JSON() != m.Spec.JSON() {
		return nil, fmt.Errorf("load optimizer state: %s: spec %s does not match the checkpoint's %s", path, s.JSON(), m.Spec.JSON())
	}
	if st != step {
		return nil, fmt.Errorf("load optimizer state: %s: is at step %d but the checkpoint is at step %d (stale file?)", path, st, step)
	}
	if err := checkBinding(path, f.Metadata, step, WeightsSum(m)); err != nil {
		return nil, fmt.Errorf("load optimizer state: %w", err)
	}
	as, _ := strconv.Atoi(f.Metadata[KeyAdamSteps])
	idx := map[*model.Param]int{}
	for i, p := range o.Params {
		idx[p] = i
	}
	ms := func(p *model.Param) []float32 { return o.M[idx[p]] }
	vs := func(p *model.Param) []float32 { return o.V[idx[p]] }
	// Both prefixes live in one file: check each prefix's tensors, then
	// reject strays.
	fm := &File{Path: f.Path, Tensors: map[string]*Tensor{}}
	fv := &File{Path: f.Path, Tensors: map[string]*Tensor{}}
	for name, t := range f.Tensors {
		switch {
		case strings.HasPrefix(name, PrefixM):
			fm.Tensors[name] = t
		case strings.HasPrefix(name, PrefixV):
			fv.Tensors[name] = t
		default:
			return nil, fmt.Errorf("load optimizer state %s: unexpected tensor %q", path, name)
		}
	}
	o.MomentsChanged() // even a failed load may have written some moments
	if err := loadTensors(fm, PrefixM, o.Params, ms); err != nil {
		return nil, fmt.Errorf("optimizer state: %w", err)
	}
	if err := loadTensors(fv, PrefixV, o.Params, vs); err != nil {
		return nil, fmt.Errorf("optimizer state: %w", err)
	}
	o.Steps = as
	return f.Metadata, nil
}
