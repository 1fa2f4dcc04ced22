package synth

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/synthgen/synthgen/runtime/checkpoint"
)

// csvHeader is the first line of a language model's CSV log.
const csvHeader = "step,loss,val_loss,lr,tokens_per_s\n"

// csvClassHeader is the first line of a classifier's CSV log: a language
// model's columns, then the validation accuracy.
const csvClassHeader = "step,loss,val_loss,lr,tokens_per_s,val_accuracy\n"

// csvRow is one row of the log; NaN fields are written empty.
type csvRow struct {
	step                    int
	loss, val, lr, tps, acc float64
}

// csvLog is the run's CSV log: step, loss, val_loss, lr, tokens_per_s,
// and for a classifier val_accuracy. It follows the checkpoint: rows are
// kept in memory and written and synced to the file by flush, before each
// save of the checkpoint, and the file is created (or, resuming in place,
// cut back to the rows of the resumed checkpoint's steps) only at the
// first flush, so that a run that fails before its first save leaves no
// log, and a resumed run's log holds each step once. A classifier's log
// resumed in place that has a language model's header (written before the
// accuracy column existed) keeps its five columns.
type csvLog struct {
	path    string
	resume  bool // continue the log of the run resumed in place
	from    int  // the step the run starts from: a resumed log keeps the rows up to it
	acc     bool // the log has the val_accuracy column
	discard bool // a rank that writes no log
	created bool // the first flush created the file
	f       *os.File
	rows    []csvRow // not yet written
	buf     bytes.Buffer
}

// newCSVLog prepares the log at path (os.DevNull: none) of a run that
// starts at step from; resume continues the log of the run resumed in
// place; classify adds the val_accuracy column.
func newCSVLog(path string, resume bool, from int, classify bool) *csvLog {
	return &csvLog{path: path, resume: resume, from: from, acc: classify, discard: path == os.DevNull}
}

// header is the log's first line.
func (l *csvLog) header() string {
	if l.acc {
		return csvClassHeader
	}
	return csvHeader
}

// row adds a row to write at the next flush.
func (l *csvLog) row(r csvRow) {
	if !l.discard {
		l.rows = append(l.rows, r)
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
		if l.acc && bytes.HasPrefix(b, []byte(csvHeader)) {
			l.acc = false // an older classifier's log: its columns are kept
		}
		keep = int64(keepRows(b, l.header(), l.from))
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
		l.buf.WriteString(l.header())
	}
	l.f = f
	return nil
}

// keepRows is the length of the prefix of log b to keep when resuming
// from step from: the header and the complete rows of steps ≤ from, up to
// the first row that is not one (0 when b does not begin with header).
func keepRows(b []byte, header string, from int) int {
	if !bytes.HasPrefix(b, []byte(header)) {
		return 0
	}
	commas := strings.Count(header, ",")
	at := len(header)
	for at < len(b) {
		nl := bytes.IndexByte(b[at:], '\n')
		if nl < 0 {
			break // a torn last line
		}
		line := b[at : at+nl]
		if bytes.Count(line, []byte(",")) != commas {
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
	for _, r := range l.rows {
		fmt.Fprintf(&l.buf, "%d,%s,%s,%s,%s", r.step, ftoa(r.loss), ftoa(r.val), ftoa(r.lr), ftoa(r.tps))
		if l.acc {
			l.buf.WriteString("," + ftoa(r.acc))
		}
		l.buf.WriteByte('\n')
	}
	l.rows = l.rows[:0]
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
