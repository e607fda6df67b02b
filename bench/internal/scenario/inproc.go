package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
)

// memBuffered answers every request from memory with format f's small
// buffered answer: the transport is excluded from what is measured.
type memBuffered struct {
	b *corpus.Buffered
}

func (m memBuffered) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	h := http.Header{}
	h.Set("Content-Type", m.b.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(m.b.Body)))
	return &http.Response{
		Status: "200 OK", StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: &memBody{b: m.b.Body}, ContentLength: int64(len(m.b.Body)), Request: req,
	}, nil
}

// inProcess is the in-process cost of one small buffered request (issue
// 20): the client's whole stack with an in-memory http.RoundTripper
// returning the canned answer, so that for chorus-runtime it is admission
// through the credential actor, request encoding, response decoding and
// the report after the call. Requests run one after another; µs (wall and
// the process's CPU), allocations and bytes per request, median of
// job.Repeats repeats of about 200 ms each.
func inProcess(ctx context.Context, job Job, res *Result) error {
	hc := &http.Client{Transport: memBuffered{b: corpus.BufferedOf(job.Format)}}
	job.BaseURL = "http://memory.invalid"
	c, err := newClient(job, hc)
	if err != nil {
		return err
	}
	defer c.Close()
	one := func() error {
		text, err := c.Chat(ctx, "m")
		if err != nil {
			return err
		}
		if job.Client != "floor-bare" && text != corpus.ShortText {
			return fmt.Errorf("answer %q, want %q", text, corpus.ShortText)
		}
		return nil
	}
	start := time.Now()
	for range 200 {
		if err := one(); err != nil {
			return err
		}
	}
	per := time.Since(start) / 200
	k := max(int((200*time.Millisecond)/max(per, time.Microsecond)), 50)
	var before, after runtime.MemStats
	for range max(job.Repeats, 1) {
		runtime.GC()
		runtime.ReadMemStats(&before)
		cpu0, t0 := sysinfo.CPU(), time.Now()
		for range k {
			if err := one(); err != nil {
				return err
			}
		}
		wall, cpu := time.Since(t0), sysinfo.CPU()-cpu0
		runtime.ReadMemStats(&after)
		res.sample("us_per_req", float64(wall.Nanoseconds())/1e3/float64(k))
		res.sample("cpu_us_per_req", float64(cpu.Nanoseconds())/1e3/float64(k))
		res.sample("allocs_per_req", float64(after.Mallocs-before.Mallocs)/float64(k))
		res.sample("bytes_per_req", float64(after.TotalAlloc-before.TotalAlloc)/float64(k))
	}
	res.set("requests_per_repeat", float64(k))
	return nil
}
