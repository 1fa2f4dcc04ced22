package synth

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/synthgen/synthgen/runtime/checkpoint"
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

// Inspect reads the checkpoint at path, checks its tensors against its
// spec (whose generated package must be linked) and reads the optimizer
// state beside it, if any.
func Inspect(path string) (*Inspection, error) {
	h, err := checkpoint.ReadHeader(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("inspect: %w", err)
	}
	in := &Inspection{Path: path, Size: fi.Size(), Spec: h.Spec, Step: h.Step, NumParams: m.NumParams(), OptPath: checkpoint.OptPath(path)}
	for _, p := range m.net.Params {
		in.Tensors = append(in.Tensors, TensorInfo{Name: p.Name, DType: h.File.Tensors[p.Name].DType, Shape: p.Shape, Elems: len(p.Data), Frozen: p.Frozen, Decay: p.Decay})
		if !p.Frozen {
			in.Trainable += len(p.Data)
		}
	}
	f, err := checkpoint.Read(in.OptPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		in.OptErr = fs.ErrNotExist
	case err != nil:
		in.OptErr = err
	default:
		c, err := train.ConfigFromMetadata(in.OptPath, f.Metadata)
		if err != nil {
			in.OptErr = err
			break
		}
		in.OptStep, in.OptConfig, in.OptData = f.Metadata[checkpoint.KeyStep], c, f.Metadata[KeyData]
	}
	return in, nil
}
