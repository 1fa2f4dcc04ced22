package synth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/synthgen/synthgen/runtime/checkpoint"
	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/train"
	"github.com/synthgen/synthgen/specs"
)

// Inspection is what a checkpoint holds: its spec and step, its tensors,
// and the optimizer state beside it.
type Inspection struct {
	Path      string
	Size      int64 // bytes
	Spec      specs.Spec
	Step      int
	Labels    []string     // a classifier's labels in class order (nil for a language model)
	Tensors   []TensorInfo // in the model's parameter order
	NumParams int
	Trainable int // parameters that training updates (not frozen)

	// OptPath is the optimizer-state file beside the checkpoint; OptErr
	// says why it is unusable (nil when it is fine; fs.ErrNotExist when it
	// is absent). The other Opt fields are set when OptErr is nil.
	OptPath   string
	OptErr    error
	OptStep   string // the step the state belongs to, as saved
	OptConfig Config // the saved run's settings
	OptData   string // the saved run's data file, if recorded
}

// TensorInfo describes one tensor of a checkpoint.
type TensorInfo struct {
	Name   string
	DType  string
	Shape  []int
	Elems  int
	Frozen bool // not trained (fixed_random's R)
	Decay  bool // AdamW's weight decay applies
}

// Inspect reads the checkpoint at path, checks its tensors' names, dtypes
// and shapes against its spec, and reads the header of the optimizer state
// beside it, if any, and checks that every weight is finite. It needs no
// linked kernels: a program can inspect a checkpoint of any spec. Of the
// optimizer state it reads only the header.
func Inspect(path string) (*Inspection, error) {
	h, err := checkpoint.PeekHeader(path)
	if err != nil {
		return nil, err
	}
	params, err := model.Layout(h.Spec)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	in := &Inspection{Path: path, Size: fi.Size(), Spec: h.Spec, Step: h.Step, Labels: h.Labels, OptPath: checkpoint.OptPath(path)}
	for _, p := range params {
		t, ok := h.File.Tensors[p.Name]
		elems := 1
		for _, d := range p.Shape {
			elems *= d
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("inspect %s: tensor %q of spec %s is missing", path, p.Name, h.Spec.Name)
		case t.DType != "F32" || !slices.Equal(t.Shape, p.Shape):
			return nil, fmt.Errorf("inspect %s: tensor %q is %s %v, want F32 %v", path, p.Name, t.DType, t.Shape, p.Shape)
		}
		in.Tensors = append(in.Tensors, TensorInfo{Name: p.Name, DType: t.DType, Shape: p.Shape, Elems: elems, Frozen: p.Frozen, Decay: p.Decay})
		in.NumParams += elems
		if !p.Frozen {
			in.Trainable += elems
		}
	}
	if len(h.File.Tensors) != len(params) {
		for _, n := range h.File.Names() {
			if !slices.ContainsFunc(params, func(p *model.Param) bool { return p.Name == n }) {
				return nil, fmt.Errorf("inspect %s: tensor %q is not a parameter of spec %s", path, n, h.Spec.Name)
			}
		}
	}
	f, err := checkpoint.Read(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	for _, n := range f.Names() {
		if err := f.Tensors[n].CheckFinite(); err != nil {
			return nil, fmt.Errorf("inspect %s: %w", path, err)
		}
	}
	meta, err := checkpoint.ReadMetadata(in.OptPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		in.OptErr = fs.ErrNotExist
	case err != nil:
		in.OptErr = err
	default:
		c, err := train.ConfigFromMetadata(in.OptPath, meta)
		if err != nil {
			in.OptErr = err
			break
		}
		in.OptStep, in.OptConfig, in.OptData = meta[checkpoint.KeyStep], c, meta[keyData]
	}
	return in, nil
}
