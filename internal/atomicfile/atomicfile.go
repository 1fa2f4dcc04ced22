// Package atomicfile writes files atomically: the bytes go to a temporary
// file in the target's directory, which is synced, closed and renamed over
// the target, and the directory is synced. A crash or a failed write (a
// full disk) leaves the previous file, if any, untouched, and a failed
// write removes its temporary file. Checkpoints (runtime/checkpoint), the
// generator's output (gen) and synth compare's results use it.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Write creates path with the bytes fill writes, atomically. Temporary
// files of path left by an earlier, killed writer (".NAME.tmpDIGITS") are
// removed first. Errors name path.
func Write(path string, fill func(io.Writer) error) error {
	p, err := Stage(path, fill)
	if err != nil {
		return err
	}
	return p.Commit()
}

// Pending is a file written to a temporary file beside its path and not
// yet renamed into place: Commit renames it, Discard removes it. Staging
// several files before committing any lets a writer fail before it
// changes anything.
type Pending struct {
	path, tmp string
}

// Stage writes the bytes fill writes to a new temporary file beside path
// (removing the temporary files of path a killed writer left), synced and
// closed, and returns it uncommitted. On error nothing is left.
func Stage(path string, fill func(io.Writer) error) (p *Pending, err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	if err := CheckOutput(path); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	removeStaleTemps(dir, base)
	tmp, err := os.CreateTemp(dir, tempPrefix(base)+"*")
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, diskFull(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	var w io.Writer = tmp
	if hooks.Wrap != nil {
		w = hooks.Wrap(path, w)
	}
	hide := func(err error) error { return hideTemp(diskFull(err), tmp.Name()) }
	if err = fill(w); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, hide(err))
	}
	if err = tmp.Chmod(0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, hide(err))
	}
	if err = tmp.Sync(); err != nil {
		return nil, fmt.Errorf("write %s: sync: %w", path, hide(err))
	}
	if err = tmp.Close(); err != nil {
		return nil, fmt.Errorf("write %s: close: %w", path, hide(err))
	}
	return &Pending{path: path, tmp: tmp.Name()}, nil
}

// Path is the file p replaces when committed.
func (p *Pending) Path() string { return p.path }

// Commit renames the temporary file over Path and syncs the directory. A
// failed rename removes the temporary file.
func (p *Pending) Commit() error {
	rename := os.Rename
	if hooks.Rename != nil {
		rename = hooks.Rename
	}
	if err := rename(p.tmp, p.path); err != nil {
		os.Remove(p.tmp)
		return fmt.Errorf("write %s: %w", p.path, hideTemp(err, p.tmp))
	}
	dir := filepath.Dir(p.path)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("write %s: open directory to sync: %w", p.path, err)
	}
	serr := d.Sync()
	d.Close()
	// Some file systems cannot sync a directory (EINVAL); the rename stands.
	if serr != nil && !errors.Is(serr, syscall.EINVAL) {
		return fmt.Errorf("write %s: sync directory %s: %w", p.path, dir, serr)
	}
	return nil
}

// Discard removes the temporary file of an uncommitted p.
func (p *Pending) Discard() { os.Remove(p.tmp) }

// Hooks let tests fail writes part-way and renames, as a full disk or a
// read-only directory would.
type Hooks struct {
	// Wrap, if set, wraps the writer of each temporary file filled for path.
	Wrap func(path string, w io.Writer) io.Writer
	// Rename, if set, replaces os.Rename in Commit.
	Rename func(from, to string) error
}

// hooks are the tests' hooks; zero in production (one comparison per file).
var hooks Hooks

// SetTestHooks installs h until the returned function restores the
// previous hooks. For tests only; not safe for concurrent use with writes.
func SetTestHooks(h Hooks) (restore func()) {
	old := hooks
	hooks = h
	return func() { hooks = old }
}

// tempPrefix is the name prefix of the temporary files for a file named
// base; os.CreateTemp appends random decimal digits.
func tempPrefix(base string) string { return "." + base + ".tmp" }

// isTemp reports whether name is one of this package's temporary files for
// a file named base: the prefix, then one or more decimal digits only.
func isTemp(name, base string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix(base))
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// removeStaleTemps removes the temporary files of base in dir that a killed
// writer left behind. Failing to list or remove them is not an error: the
// write that follows does not need it.
func removeStaleTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.Type().IsRegular() && isTemp(e.Name(), base) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// hideTemp is err with the temporary file's name tmp replaced by
// "temporary file" in its text (errors.Is and errors.As still see err's
// chain): the error names the file being written, not a hidden one that no
// longer exists.
func hideTemp(err error, tmp string) error {
	if err == nil || !strings.Contains(err.Error(), tmp) {
		return err
	}
	return &tempError{err: err, tmp: tmp}
}

type tempError struct {
	err error
	tmp string
}

func (e *tempError) Error() string { return strings.ReplaceAll(e.err.Error(), e.tmp, "temporary file") }
func (e *tempError) Unwrap() error { return e.err }

// diskFull adds a plain statement to an out-of-space error (ENOSPC or
// EDQUOT): the file being written was not replaced.
func diskFull(err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w (disk full: the previous file, if any, is unchanged)", err)
	}
	return err
}
