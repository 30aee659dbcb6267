// Package progress draws the progress bar of a long command on a stream
// (stderr): redrawn in place on a terminal, a line now and then otherwise.
// 'regressd replay' and 'regressd bench' draw theirs with it.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Bar is one task's progress: done of total, with a detail after it.
type Bar struct {
	w     io.Writer
	tty   bool
	name  string
	total int64
	every time.Duration
	done  atomic.Int64
	start time.Time

	mu     sync.Mutex
	detail string
	last   time.Time

	stop chan struct{}
	wg   sync.WaitGroup
}

// New starts a bar named name for total steps on w. On a terminal it is
// redrawn ten times a second by a goroutine Finish stops; elsewhere a line
// is written at most once per every (never before Finish when every is 0).
func New(w io.Writer, name string, total int, every time.Duration) *Bar {
	b := &Bar{w: w, tty: IsTerminal(w), name: name, total: int64(total), every: every, start: time.Now(), stop: make(chan struct{})}
	b.last = b.start
	if b.tty {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-b.stop:
					return
				case <-t.C:
					b.draw()
				}
			}
		}()
	}
	return b
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Add counts n more steps done.
func (b *Bar) Add(n int) {
	b.done.Add(int64(n))
	b.maybeLine()
}

// Set sets the steps done.
func (b *Bar) Set(n int) {
	b.done.Store(int64(n))
	b.maybeLine()
}

// Detail sets the text drawn after the counts.
func (b *Bar) Detail(s string) {
	b.mu.Lock()
	b.detail = s
	b.mu.Unlock()
}

// maybeLine writes a line off a terminal when every has passed.
func (b *Bar) maybeLine() {
	if b.tty || b.every == 0 {
		return
	}
	b.mu.Lock()
	due := time.Since(b.last) >= b.every
	if due {
		b.last = time.Now()
	}
	b.mu.Unlock()
	if due {
		b.draw()
	}
}

func (b *Bar) draw() {
	const width = 30
	d := b.done.Load()
	fill := width
	if b.total > 0 {
		fill = int(min(d, b.total) * width / b.total)
	}
	b.mu.Lock()
	detail := b.detail
	b.mu.Unlock()
	if detail != "" {
		detail = " · " + detail
	}
	line := fmt.Sprintf("%-22s [%s%s] %d/%d%s %5.1fs", b.name, strings.Repeat("█", fill), strings.Repeat("·", width-fill),
		d, b.total, detail, time.Since(b.start).Seconds())
	if b.tty {
		fmt.Fprint(b.w, "\r"+line)
	} else {
		fmt.Fprintln(b.w, line)
	}
}

// Finish draws the final state, ends the line and stops the redrawing.
func (b *Bar) Finish() {
	close(b.stop)
	b.wg.Wait()
	b.draw()
	if b.tty {
		fmt.Fprintln(b.w)
	}
}
