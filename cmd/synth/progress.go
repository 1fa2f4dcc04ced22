package main

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// progress shows a run's progress: one line redrawn in place (\r) on a
// terminal, plain lines every logEvery steps otherwise.
type progress struct {
	e        *env
	total    int // the run's last step
	first    int // the step this process started at
	logEvery int

	start    time.Time     // when this process started training
	trainDur time.Duration // time spent in training steps (not eval, not saving)
	lastDraw time.Time
	live     bool // a live line is on screen
	val      float64
}

func newProgress(e *env, first, total, logEvery int) *progress {
	return &progress{e: e, first: first, total: total, logEvery: logEvery, start: time.Now(), val: math.NaN()}
}

// tokensPerSec is the training throughput of this process so far.
func (p *progress) tokensPerSec(step, tokensPerStep int) float64 {
	if p.trainDur <= 0 {
		return 0
	}
	return float64((step-p.first)*tokensPerStep) / p.trainDur.Seconds()
}

func fmtDur(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	d = d.Round(time.Second)
	h, m, s := int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60
	if h > 0 {
		return fmt.Sprintf("%dh%02dm%02ds", h, m, s)
	}
	if m > 0 {
		return fmt.Sprintf("%dm%02ds", m, s)
	}
	return fmt.Sprintf("%ds", s)
}

// line is the status of step: step/total, loss, val loss, lr, tokens/s, ETA.
func (p *progress) line(step int, loss, lr, tps float64) string {
	val := "-"
	if !math.IsNaN(p.val) {
		val = fmt.Sprintf("%.4f", p.val)
	}
	done := step - p.first
	eta := "-"
	if done > 0 {
		per := time.Since(p.start) / time.Duration(done)
		eta = fmtDur(per * time.Duration(p.total-step))
	}
	return fmt.Sprintf("step %*d/%d  loss %.4f  val %s  lr %.2e  %s tok/s  ETA %s",
		len(fmt.Sprint(p.total)), step, p.total, loss, val, lr, humanCount(tps), eta)
}

// update reports a finished step; force draws even between log points.
func (p *progress) update(step int, loss, lr, tps float64, force bool) {
	if p.e.terminal {
		now := time.Now()
		if !force && now.Sub(p.lastDraw) < 100*time.Millisecond && step != p.total {
			return
		}
		p.lastDraw = now
		fmt.Fprintf(p.e.out, "\r%s\x1b[K", p.line(step, loss, lr, tps))
		p.live = true
		return
	}
	if force || step%p.logEvery == 0 || step == p.total {
		fmt.Fprintln(p.e.out, p.line(step, loss, lr, tps))
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
