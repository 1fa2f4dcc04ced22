package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CheckOutput checks that path may be written (replaced by a rename, or
// created): it is absent or a regular file (or a symbolic link to one, or
// to nothing), never a directory, device, FIFO or socket, nor a link to
// one; its folder exists; and it is not the same file as any of inputs
// (the files a run reads: its data, the checkpoint it resumes). It looks
// at the file with Lstat and Stat only: nothing is opened, so a FIFO never
// blocks it.
func CheckOutput(path string, inputs ...string) error {
	if path == "" {
		return errors.New("output: no file name given")
	}
	li, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		dir := filepath.Dir(path)
		di, err := os.Stat(dir)
		if err != nil {
			return fmt.Errorf("output %s: directory %s: %w", path, dir, err)
		}
		if !di.IsDir() {
			return fmt.Errorf("output %s: %s is not a directory", path, dir)
		}
		return nil
	case err != nil:
		return fmt.Errorf("output %s: %w", path, err)
	}
	fi, link := li, li.Mode()&fs.ModeSymlink != 0
	if link {
		if fi, err = os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil // a dangling link: the rename replaces the link itself
		} else if err != nil {
			return fmt.Errorf("output %s: %w", path, err)
		}
	}
	if !fi.Mode().IsRegular() {
		what := FileKind(fi.Mode())
		if link {
			what = "a symbolic link to " + what
		}
		return fmt.Errorf("output %s is %s, not a regular file: choose a file name", path, what)
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		ii, err := os.Stat(in)
		if err == nil && os.SameFile(fi, ii) {
			return fmt.Errorf("output %s is the same file as the input %s: writing it would destroy the input; choose another output", path, in)
		}
	}
	return nil
}

// FileKind names the type of a file that is not a regular file.
func FileKind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
