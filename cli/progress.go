package cli

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/synthgen/synthgen/runtime/synth"
)

// liveLine prints progress: on a terminal one line redrawn in place (\r)
// at most every 100 ms, plain lines every logEvery steps otherwise.
type liveLine struct {
	e        *env
	logEvery int
	lastDraw time.Time
	live     bool // a live line is on screen
}

// step reports the progress line of step; force draws it (or prints it)
// whatever the step.
func (l *liveLine) step(step int, line fmt.Stringer, force bool) {
	if l.e.terminal {
		now := time.Now()
		if !force && now.Sub(l.lastDraw) < 100*time.Millisecond {
			return
		}
		l.lastDraw = now
		fmt.Fprintf(l.e.out, "\r%s\x1b[K", line)
		l.live = true
		return
	}
	if force || step%l.logEvery == 0 {
		fmt.Fprintln(l.e.out, line)
	}
}

// println prints a permanent message, keeping the live line below it.
func (l *liveLine) println(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if l.e.terminal && l.live {
		fmt.Fprintf(l.e.out, "\r\x1b[K%s\n", strings.TrimRight(msg, "\n"))
		l.live = false
		return
	}
	fmt.Fprintln(l.e.out, msg)
}

// finish ends the live line.
func (l *liveLine) finish() {
	if l.e.terminal && l.live {
		fmt.Fprintln(l.e.out)
		l.live = false
	}
}

// progress prints a training run's events.
type progress struct{ liveLine }

func newProgress(e *env, logEvery int) *progress {
	return &progress{liveLine{e: e, logEvery: logEvery}}
}

// event reports one event of the run.
func (p *progress) event(ev synth.Event) {
	if ev.Step == ev.Start && math.IsNaN(ev.Loss) { // the initial evaluation
		p.println("%s", ev)
		return
	}
	if ev.Evaluated && p.e.terminal {
		p.println("step %d: loss %.4f, val loss %.4f (%.4f bpb)", ev.Step, ev.Loss, ev.Val, ev.Eval.BPB())
	}
	p.step(ev.Step, ev, ev.Evaluated || ev.Step == ev.Stop)
}
