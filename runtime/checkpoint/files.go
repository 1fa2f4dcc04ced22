package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/synthgen/synthgen/internal/atomicfile"
)

// CheckOutput checks that path may be written (replaced by a rename, or
// created): it is absent or a regular file (or a symbolic link to one, or
// to nothing), never a directory, device, FIFO or socket, nor a link to
// one; its folder exists; and it is not the same file as any of inputs
// (the files a run reads: its data, the checkpoint it resumes). It looks
// at the file with Lstat and Stat only: nothing is opened, so a FIFO never
// blocks it. Every atomic write makes the same check (without inputs).
func CheckOutput(path string, inputs ...string) error {
	return atomicfile.CheckOutput(path, inputs...)
}

// openRegular opens path for reading if it is a regular file (following
// links), with an error naming the file otherwise: a missing file's error
// wraps fs.ErrNotExist. It checks the type before opening and opens
// without blocking, so a FIFO put in a file's place never hangs the
// caller.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, &notExistError{path: path, err: err}
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, nil, fmt.Errorf("%s: is a directory, not a safetensors file", path)
	}
	if !fi.Mode().IsRegular() {
		// A device or pipe has no size to bound the read (/dev/zero never ends).
		return nil, nil, fmt.Errorf("%s: not a regular file (%s), not a safetensors file", path, atomicfile.FileKind(fi.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, &notExistError{path: path, err: err}
		}
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, nil, fmt.Errorf("%s: %w (replaced while being opened?)", path, err)
	}
	return f, fi, nil
}

// notExistError is a missing file: "<path>: no such file", wrapping the
// error of the file system (errors.Is(err, fs.ErrNotExist) holds).
type notExistError struct {
	path string
	err  error
}

func (e *notExistError) Error() string { return e.path + ": no such file" }
func (e *notExistError) Unwrap() error { return e.err }
