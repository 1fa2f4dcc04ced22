package synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// csvHeader is the first line of a run's CSV log.
const csvHeader = "step,loss,val_loss,lr,tokens_per_s\n"

// csvLog is the run's CSV log: step, loss, val_loss, lr, tokens_per_s. It
// follows the checkpoint: rows are kept in memory and written and synced
// to the file by flush, before each save of the checkpoint, and the file
// is created (or, resuming in place, cut back to the rows of the resumed
// checkpoint's steps) only at the first flush, so that a run that fails
// before its first save leaves no log, and a resumed run's log holds each
// step once.
type csvLog struct {
	path    string
	resume  bool // continue the log of the run resumed in place
	from    int  // the step the run starts from: a resumed log keeps the rows up to it
	discard bool // a rank that writes no log
	created bool // the first flush created the file
	f       *os.File
	buf     bytes.Buffer
}

// newCSVLog prepares the log at path (os.DevNull: none) of a run that
// starts at step from; resume continues the log of the run resumed in
// place.
func newCSVLog(path string, resume bool, from int) *csvLog {
	return &csvLog{path: path, resume: resume, from: from, discard: path == os.DevNull}
}

func (l *csvLog) printf(format string, args ...any) {
	if !l.discard {
		fmt.Fprintf(&l.buf, format, args...)
	}
}

// open opens the log file for the first flush: created with its header,
// or the resumed run's log cut after its last row of a step ≤ l.from (rows
// a crash left past the checkpoint, and a torn last line, are dropped).
func (l *csvLog) open() error {
	if err := checkpoint.CheckOutput(l.path); err != nil {
		return fmt.Errorf("CSV log: %w", err)
	}
	_, err := os.Lstat(l.path)
	l.created = errors.Is(err, fs.ErrNotExist)
	flags := os.O_RDWR | os.O_CREATE
	if !l.resume {
		flags |= os.O_TRUNC
	}
	// Not blocking: a FIFO put there since the check fails below, not hangs.
	f, err := os.OpenFile(l.path, flags|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		return fmt.Errorf("CSV log: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("CSV log %s: not a regular file", l.path)
	}
	var keep int64
	if l.resume {
		b, err := io.ReadAll(f)
		if err != nil {
			f.Close()
			return fmt.Errorf("CSV log %s: %w", l.path, err)
		}
		keep = int64(keepRows(b, l.from))
	}
	if err := f.Truncate(keep); err != nil {
		f.Close()
		return fmt.Errorf("CSV log %s: %w", l.path, err)
	}
	if _, err := f.Seek(keep, io.SeekStart); err != nil {
		f.Close()
		return fmt.Errorf("CSV log %s: %w", l.path, err)
	}
	if keep == 0 {
		rows := append([]byte(csvHeader), l.buf.Bytes()...)
		l.buf.Reset()
		l.buf.Write(rows)
	}
	l.f = f
	return nil
}

// keepRows is the length of the prefix of log b to keep when resuming
// from step from: the header and the complete rows of steps ≤ from, up to
// the first row that is not one (0 when b does not begin with the header).
func keepRows(b []byte, from int) int {
	if !bytes.HasPrefix(b, []byte(csvHeader)) {
		return 0
	}
	at := len(csvHeader)
	for at < len(b) {
		nl := bytes.IndexByte(b[at:], '\n')
		if nl < 0 {
			break // a torn last line
		}
		line := b[at : at+nl]
		if bytes.Count(line, []byte(",")) != 4 {
			break
		}
		step, err := strconv.Atoi(string(line[:bytes.IndexByte(line, ',')]))
		if err != nil || step > from {
			break
		}
		at += nl + 1
	}
	return at
}

// flush writes the rows so far to the file and syncs it.
func (l *csvLog) flush() error {
	if l.discard {
		return nil
	}
	if l.f == nil {
		if err := l.open(); err != nil {
			return err
		}
	}
	if _, err := l.f.Write(l.buf.Bytes()); err != nil {
		return fmt.Errorf("CSV log %s: %w", l.path, err)
	}
	l.buf.Reset()
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("CSV log %s: sync: %w", l.path, err)
	}
	return nil
}

// remove closes and removes the log file if the first flush created it.
func (l *csvLog) remove() {
	if l.f != nil && l.created {
		l.f.Close()
		os.Remove(l.path)
		l.f = nil
	}
}

// close closes the file. Rows after the last flush are dropped: no
// checkpoint holds their steps.
func (l *csvLog) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("CSV log %s: %w", l.path, err)
	}
	return nil
}
