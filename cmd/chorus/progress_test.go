package main

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/internal/testkit/syncbuf"
)

// TestProgressPlainLines: off a terminal, a plain status line is printed
// every plainEvery, with done/total, failures, rates and an ETA.
func TestProgressPlainLines(t *testing.T) {
	old := plainEvery
	plainEvery = 20 * time.Millisecond
	t.Cleanup(func() { plainEvery = old })
	var buf syncbuf.Buffer
	p := newProgress(&buf, false, nil, 10)
	p.skip()
	p.item(false, 100)
	p.item(true, 0)
	time.Sleep(70 * time.Millisecond)
	p.logf("a log line")
	p.finish()
	out := buf.String()
	if strings.Contains(out, "\r") || strings.Contains(out, "\x1b") {
		t.Errorf("terminal codes off a terminal: %q", out)
	}
	re := regexp.MustCompile(`(?m)^chorus batch: 3/10 done, 1 failed, [\d.]+ req/s, [\d.k]+ tok/s, ETA \S+$`)
	if n := len(re.FindAllString(out, -1)); n < 2 {
		t.Errorf("%d status lines, want several:\n%s", n, out)
	}
	if !strings.Contains(out, "a log line\n") {
		t.Errorf("log line missing:\n%s", out)
	}
}

// TestProgressBar: on a terminal the bar is redrawn in place, log lines
// clear it first, and finish leaves the line clean.
func TestProgressBar(t *testing.T) {
	old := barEvery
	barEvery = 10 * time.Millisecond
	t.Cleanup(func() { barEvery = old })
	var buf syncbuf.Buffer
	p := newProgress(&buf, true, func() int { return 100 }, 4)
	p.item(false, 10)
	p.item(false, 10)
	time.Sleep(40 * time.Millisecond)
	p.logf("line %d", 101)
	p.finish()
	out := buf.String()
	if !strings.Contains(out, "\r\x1b[2K 50% [====================>                   ] 2/4 done, 0 failed") {
		t.Errorf("no half-full bar:\n%q", out)
	}
	if !strings.Contains(out, "\r\x1b[2Kline 101\n") {
		t.Errorf("log line not printed on a cleared line:\n%q", out)
	}
	if !strings.HasSuffix(out, "\r\x1b[2K") {
		t.Errorf("finish did not clear the bar:\n%q", out)
	}
	for _, l := range strings.Split(out, "\r\x1b[2K") {
		if len(strings.TrimSuffix(l, "\n")) > 99 {
			t.Errorf("line wider than the terminal: %q", l)
		}
	}
}
