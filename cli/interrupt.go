package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// interruptContext is signal.NotifyContext for Ctrl-C and SIGTERM with a
// way out. The first signal cancels the context (training abandons the
// step in progress, saves the last completed one and stops) and says so
// on w at once; a second one exits immediately with status 130, saying
// that the last saved checkpoint is intact: every save replaces its files
// atomically, so an exit at any instant leaves the previous save whole.
func interruptContext(w io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			fmt.Fprintf(w, "\nsynth: %v: stopping: the step in progress is abandoned (under mpirun: finished), then the last completed step is saved (signal again to quit at once: the last saved checkpoint stays intact)\n", s)
			cancel(signalCause(s.String() + " signal received"))
		case <-done:
			return
		}
		select {
		case s := <-ch:
			fmt.Fprintf(w, "\nsynth: %v again: quitting now; the last saved checkpoint is intact (saves are atomic)\n", s)
			exit(130)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// exit is os.Exit (a variable for tests).
var exit = os.Exit

// signalCause is the cause of a context cancelled by a signal; it is
// context.Canceled for errors.Is, as signal.NotifyContext's is.
type signalCause string

func (s signalCause) Error() string        { return string(s) }
func (s signalCause) Is(target error) bool { return target == context.Canceled }
