package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/regressd/regressd/scheduler"
	"github.com/regressd/regressd/schemas"
)

// replayProgress draws replay's progress bar: redrawn in place on a terminal, a
// line every few seconds (and at the end) otherwise.
type replayProgress struct {
	w       io.Writer
	tty     bool
	total   int
	done    int
	failed  int
	written int
	start   time.Time
	last    time.Time
}

func newReplayProgress(w io.Writer, total int) *replayProgress {
	p := &replayProgress{w: w, total: total, start: time.Now()}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	p.draw(true)
	return p
}

// add counts a finished (or failed to start) window.
func (p *replayProgress) add(j *scheduler.ReplayWindow) {
	p.done++
	p.written += j.Summary.Written
	if j.Err != nil || j.Summary.Status == schemas.StatusFailed {
		p.failed++
	}
	p.draw(p.done == p.total)
}

func (p *replayProgress) draw(force bool) {
	if !p.tty && !force && time.Since(p.last) < 5*time.Second {
		return
	}
	p.last = time.Now()
	const width = 30
	fill := 0
	if p.total > 0 {
		fill = width * p.done / p.total
	}
	line := fmt.Sprintf("replay [%s%s] %d/%d tasks · %d rows written · %d failed · %v",
		strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.done, p.total, p.written, p.failed,
		time.Since(p.start).Round(time.Second))
	if p.tty {
		fmt.Fprint(p.w, "\r"+line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

func (p *replayProgress) finish() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
