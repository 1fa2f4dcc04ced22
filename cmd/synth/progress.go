package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/synthgen/synthgen/runtime/synth"
)

// progress prints a run's events: one line redrawn in place (\r) on a
// terminal, plain lines every logEvery steps otherwise.
type progress struct {
	e        *env
	logEvery int
	lastDraw time.Time
	live     bool // a live line is on screen
}

func newProgress(e *env, logEvery int) *progress {
	return &progress{e: e, logEvery: logEvery}
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
	if p.e.terminal {
		now := time.Now()
		if !ev.Evaluated && now.Sub(p.lastDraw) < 100*time.Millisecond && ev.Step != ev.Stop {
			return
		}
		p.lastDraw = now
		fmt.Fprintf(p.e.out, "\r%s\x1b[K", ev)
		p.live = true
		return
	}
	if ev.Evaluated || ev.Step%p.logEvery == 0 || ev.Step == ev.Stop {
		fmt.Fprintln(p.e.out, ev)
	}
}

// println prints a permanent message, keeping the live line below it.
func (p *progress) println(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if p.e.terminal && p.live {
		fmt.Fprintf(p.e.out, "\r\x1b[K%s\n", strings.TrimRight(msg, "\n"))
		p.live = false
		return
	}
	fmt.Fprintln(p.e.out, msg)
}

// finish ends the live line.
func (p *progress) finish() {
	if p.e.terminal && p.live {
		fmt.Fprintln(p.e.out)
		p.live = false
	}
}
