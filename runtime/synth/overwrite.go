package synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// Overwrite lets a new run (or a resume written to another Out) replace an
// existing checkpoint, optimizer state and CSV log at Out. Without it,
// starting a run over files it did not start from is an error that says
// how to resume them instead: no run silently replaces another's work.
// Resuming a checkpoint in place (Resume without Out) needs no Overwrite.
func Overwrite() Option { return setter("overwrite", func(*options) {}) }

// checkNotStarted fails when the files a run would write to (checkpoint
// out, its optimizer state and its CSV log) already exist and the run did
// not start from them: resume names the checkpoint resumed ("" for a new
// run), and Overwrite allows the replacement.
func (o *options) checkNotStarted(out, resume string) error {
	if o.set["overwrite"] {
		return nil
	}
	if resume != "" && sameFile(out, resume) {
		return nil // resuming in place
	}
	_, cerr := os.Lstat(out)
	noCheckpoint := errors.Is(cerr, fs.ErrNotExist)
	for _, p := range []string{out, checkpoint.OptPath(out), csvPath(out)} {
		if _, err := os.Lstat(p); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return fmt.Errorf("output %s: %w", p, err)
		}
		if noCheckpoint && leftover(p, out) {
			// A run killed in its first save (the state or the log
			// written, the checkpoint not yet): nothing to resume, and
			// the file is that run's own, not another file of the user's.
			continue
		}
		what := "a file"
		if p == out {
			what = "a checkpoint"
			if step, err := checkpoint.FileStep(out); err == nil {
				what = fmt.Sprintf("a checkpoint of step %d", step)
			}
		}
		return fmt.Errorf("output %s already holds %s that this run did not start from: resume it (synth train -resume %s, or synth.Resume), write elsewhere (-out, or the Out option), or replace it (synth train -force, or the synth.Overwrite option)", p, what, out)
	}
	return nil
}

// sameFile reports whether paths a and b name one existing file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// leftover reports whether p, the optimizer state or the CSV log of
// checkpoint out, is what a run writes before its first checkpoint: an
// optimizer state with its step in the metadata, or a log beginning with
// a log's header (a language model's or a classifier's). Such files without their checkpoint are left by a run
// killed in its first save, and a new run may replace them.
func leftover(p, out string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	if p == checkpoint.OptPath(out) {
		meta, err := checkpoint.ReadMetadata(p)
		return err == nil && meta[checkpoint.KeyStep] != ""
	}
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, len(csvClassHeader))
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	return bytes.HasPrefix(head, []byte(csvHeader)) || bytes.HasPrefix(head, []byte(csvClassHeader))
}
