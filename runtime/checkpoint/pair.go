package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/runtime/model"
	"github.com/synthgen/synthgen/runtime/optim"
)

// A training run's checkpoint and its optimizer state are two files, and no
// file system renames two files at once. SaveRun keeps a consistent pair on
// disk at every instant anyway, with a third file: before it replaces the
// optimizer state of the checkpoint on disk (step s) it moves it aside to
// OptPrevPath, and it removes that backup only once the new checkpoint
// (step s+1) has replaced the old one. The files on disk after a crash at
// any instant are therefore one of
//
//	checkpoint s,   state s                  (before the save, or after it failed)
//	checkpoint s,   backup s                 (the state moved aside)
//	checkpoint s,   state s+1, backup s      (the new state written)
//	checkpoint s+1, state s+1, backup s      (the new checkpoint written)
//	checkpoint s+1, state s+1                (the save complete)
//
// and ResolveOpt picks whichever of the state and the backup has the
// checkpoint's step. A save that fails (a full disk) moves the backup back,
// so the files are those of step s again.

// OptPrevPath is the backup of the optimizer state that SaveRun keeps while
// it replaces a checkpoint: "x.safetensors" → "x.opt.prev.safetensors".
func OptPrevPath(path string) string {
	return strings.TrimSuffix(path, ".safetensors") + ".opt.prev.safetensors"
}

// SaveRun writes the optimizer state (SaveOpt, to OptPath(path)) and then
// the checkpoint (Save, to path) of one step so that a crash at any instant
// leaves a checkpoint beside an optimizer state of the same step, in
// OptPath(path) or OptPrevPath(path) (see ResolveOpt). If a write fails it
// restores the previous pair and returns the error. The bytes of both files
// are those of SaveOpt and Save.
func SaveRun(path string, m *model.Model, o *optim.AdamW, step int, extra map[string]string) (err error) {
	opt, prev := OptPath(path), OptPrevPath(path)
	backup := false
	if ms, merr := FileStep(path); merr == nil {
		if optStep, oerr := FileStep(opt); oerr == nil && optStep == ms {
			// The pair on disk is consistent: keep its state as the backup.
			if rerr := os.Rename(opt, prev); rerr != nil {
				return fmt.Errorf("save optimizer state: keep the previous one: %w", rerr)
			}
			backup = true
		} else if ps, perr := FileStep(prev); perr == nil && ps == ms {
			// An earlier save was interrupted after moving the state aside:
			// the backup is the checkpoint's state; keep it.
			backup = true
		}
	}
	defer func() {
		if err == nil || !backup {
			return
		}
		if ms, merr := FileStep(path); merr == nil && ms == step {
			return // the new checkpoint landed (a directory sync failed after the rename)
		}
		// Put the previous state back beside the previous checkpoint.
		if rerr := os.Rename(prev, opt); rerr != nil {
			err = fmt.Errorf("%w; and restoring %s from %s: %v", err, opt, prev, rerr)
		}
	}()
	if err := SaveOpt(opt, m, o, step, extra); err != nil {
		return err
	}
	if err := Save(path, m, step); err != nil {
		return err
	}
	// The pair of this step is complete; the backup is stale. A failure to
	// remove it is harmless: ResolveOpt prefers the state of the right step,
	// and the next save replaces the backup.
	os.Remove(prev)
	return nil
}

// ResolveOpt finds the optimizer state of the checkpoint at path, which is
// at step step: OptPath(path) when it is of that step, else
// OptPrevPath(path) when that is (a save was interrupted; note says so).
// It returns "" when neither file exists (a run saved without its state).
// When the only state on disk is of another step, or unreadable, the error
// says so and how to resume from the weights alone. ResolveOptFor also
// checks the states' binding to the checkpoint's weights.
func ResolveOpt(path string, step int) (optPath, note string, err error) {
	return ResolveOptFor(path, step, "")
}

// ResolveOptFor is ResolveOpt for a checkpoint whose weights have the
// checksum sum (WeightsSum; "" skips the check): a state that records the
// checksum of other weights is not the checkpoint's (a new run's state
// left beside an older checkpoint by an interrupted save, or another run's
// state put beside it), and neither is one whose AdamW update count is
// past the step.
func ResolveOptFor(path string, step int, sum string) (optPath, note string, err error) {
	opt, prev := OptPath(path), OptPrevPath(path)
	optMeta, oerr := ReadMetadata(opt)
	optStep := -1
	if oerr == nil {
		optStep, oerr = metaStep(opt, optMeta)
	}
	var bindErr error
	if oerr == nil && optStep == step {
		if bindErr = checkBinding(opt, optMeta, step, sum); bindErr == nil {
			return opt, "", nil
		}
	}
	if pm, perr := ReadMetadata(prev); perr == nil {
		if ps, perr := metaStep(prev, pm); perr == nil && ps == step && checkBinding(prev, pm, step, sum) == nil {
			return prev, fmt.Sprintf("an earlier save was interrupted: the optimizer state of step %d is read from its backup %s", step, prev), nil
		}
	}
	switch {
	case bindErr != nil:
		return "", "", fmt.Errorf("optimizer state of checkpoint %s: %w", path, bindErr)
	case oerr == nil:
		return "", "", fmt.Errorf("optimizer state %s is at step %d but checkpoint %s is at step %d (written by an interrupted save, or by another run); %s", opt, optStep, path, step, weightsAlone(opt))
	case !errors.Is(oerr, fs.ErrNotExist):
		return "", "", fmt.Errorf("optimizer state: %w; %s", oerr, weightsAlone(opt))
	}
	// No state; a backup of another step, if any, is ignored (the next save
	// that completes removes it).
	return "", "", nil
}

// FileStep reads the "step" metadata of the safetensors file at path from
// its header alone (not its tensors).
func FileStep(path string) (int, error) {
	meta, err := ReadMetadata(path)
	if err != nil {
		return 0, err
	}
	return metaStep(path, meta)
}

// metaStep is the "step" entry of the metadata meta of file path.
func metaStep(path string, meta map[string]string) (int, error) {
	st, ok := meta[KeyStep]
	if !ok {
		return 0, fmt.Errorf("%s: metadata has no %q entry", path, KeyStep)
	}
	step, err := strconv.Atoi(st)
	if err != nil || step < 0 {
		return 0, fmt.Errorf("%s: metadata \"step\" = %q is not a non-negative integer", path, st)
	}
	return step, nil
}

// ReadMetadata reads the "__metadata__" strings of the safetensors file at
// path from its header alone, reading no more than the header: its length
// is checked against the file's size before anything is allocated. The
// tensor table is not validated (Read does that).
func ReadMetadata(path string) (map[string]string, error) {
	f, fi, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readMetadata(path, f, fi.Size())
}

// readMetadata is ReadMetadata of the size bytes of r.
func readMetadata(path string, r io.ReaderAt, size int64) (map[string]string, error) {
	fail := func(format string, args ...any) (map[string]string, error) {
		return nil, fmt.Errorf("%s: not a valid safetensors file: %s", path, fmt.Sprintf(format, args...))
	}
	if size < 8 {
		return fail("%d bytes is shorter than the 8-byte header length", size)
	}
	var lb [8]byte
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	hlen := binary.LittleEndian.Uint64(lb[:])
	if err := checkHeaderLen(hlen, size); err != nil {
		return fail("%v", err)
	}
	h := make([]byte, hlen)
	if _, err := r.ReadAt(h, 8); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	_, meta, err := decodeHeader(h)
	if err != nil {
		return fail("%v", err)
	}
	return meta, nil
}
