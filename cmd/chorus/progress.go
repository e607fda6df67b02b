package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress reports a batch's advance on stderr: a bar redrawn in place when
// stderr is a terminal, else a plain line every plainEvery. Log lines
// (bad input lines) go through it so that they never tear the bar.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width func() int

	total   int // input items; 0 when unknown (stdin)
	skipped int // already in the output (--resume)
	done    int // finished in this run, failed and bad included
	failed  int // failed items and bad lines
	tokens  int64
	start   time.Time

	drawn     bool
	lastPlain time.Time
	stop      chan struct{}
	stopped   chan struct{}
}

// Redraw and plain-line intervals.
var (
	barEvery   = 100 * time.Millisecond
	plainEvery = 2 * time.Second
)

func newProgress(w io.Writer, tty bool, width func() int, total int) *progress {
	p := &progress{w: w, tty: tty, width: width, total: total, start: time.Now(),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	p.lastPlain = p.start
	go p.loop()
	return p
}

func (p *progress) loop() {
	defer close(p.stopped)
	every := barEvery
	if !p.tty {
		every = plainEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			p.mu.Lock()
			if p.tty {
				p.drawLocked()
			} else {
				fmt.Fprintln(p.w, "chorus batch: "+p.statusLocked(time.Now()))
			}
			p.mu.Unlock()
		case <-p.stop:
			return
		}
	}
}

// skip counts one input line already in the output.
func (p *progress) skip() {
	p.mu.Lock()
	p.skipped++
	p.mu.Unlock()
}

// item counts one finished item (or bad line).
func (p *progress) item(failed bool, tokens int) {
	p.mu.Lock()
	p.done++
	if failed {
		p.failed++
	}
	p.tokens += int64(tokens)
	p.mu.Unlock()
}

// logf prints one line above the bar.
func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearLocked()
	fmt.Fprintf(p.w, format+"\n", args...)
	if p.tty {
		p.drawLocked()
	}
}

// finish stops the reporting and clears the bar.
func (p *progress) finish() {
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	p.clearLocked()
	p.mu.Unlock()
}

func (p *progress) clearLocked() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[2K")
		p.drawn = false
	}
}

// statusLocked is the counts line: done/total, failed, rates, ETA.
func (p *progress) statusLocked(now time.Time) string {
	el := now.Sub(p.start).Seconds()
	rate, trate := 0.0, 0.0
	if el > 0 {
		rate, trate = float64(p.done)/el, float64(p.tokens)/el
	}
	var b strings.Builder
	done := p.skipped + p.done
	if p.total > 0 {
		fmt.Fprintf(&b, "%d/%d", done, p.total)
	} else {
		fmt.Fprintf(&b, "%d", done)
	}
	fmt.Fprintf(&b, " done, %d failed, %s req/s, %s tok/s", p.failed, human(rate), human(trate))
	if p.total > 0 {
		left := p.total - done
		switch {
		case left <= 0:
		case rate > 0:
			fmt.Fprintf(&b, ", ETA %s", eta(time.Duration(float64(left)/rate*float64(time.Second))))
		default:
			b.WriteString(", ETA --")
		}
	}
	return b.String()
}

func (p *progress) drawLocked() {
	status := p.statusLocked(time.Now())
	width := 80
	if p.width != nil {
		if w := p.width(); w > 20 {
			width = w
		}
	}
	line := status
	if room := width - len(status) - 9; p.total > 0 && room >= 10 {
		barW := min(room, 40)
		frac := float64(p.skipped+p.done) / float64(p.total)
		frac = min(max(frac, 0), 1)
		fill := int(frac * float64(barW))
		bar := strings.Repeat("=", fill)
		if fill < barW {
			bar += ">" + strings.Repeat(" ", barW-fill-1)
		}
		line = fmt.Sprintf("%3.0f%% [%s] %s", frac*100, bar, status)
	}
	if len(line) > width-1 {
		line = line[:width-1]
	}
	fmt.Fprint(p.w, "\r\x1b[2K"+line)
	p.drawn = true
}

// human prints a rate with a k or M suffix.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func eta(d time.Duration) string {
	switch {
	case d < time.Second:
		return "<1s"
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}
