package scenario

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/chorusrt/chorus/bench/internal/clients"
	"github.com/chorusrt/chorus/bench/internal/sysinfo"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers"
)

// ranged is the ranged-streams scenario (issue 38): job.Streams streams
// of job.Deltas deltas at once over loopback, each read to its end, the
// whole set job.Repeats times; the client process's CPU per delta
// (connections and requests included). "chorus-all" is a plain
// providers.Client ranged over stream.All(), the way its users write it;
// every other client is read its own way (clients.Client.Stream).
func ranged(ctx context.Context, job Job, res *Result) error {
	n, d := job.Streams, job.Deltas
	hc, err := httpClient(job, n+16)
	if err != nil {
		return err
	}
	var stream func(ctx context.Context, cnt *counter) error
	if job.Client == "chorus-all" {
		cfg := clients.ChorusConfig(job.Format, job.BaseURL)
		c, err := providers.New(cfg, providers.WithHTTPClient(hc))
		if err != nil {
			return err
		}
		defer c.CloseIdleConnections()
		req := &llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("Say hi")}, MaxTokens: 1024}
		stream = func(ctx context.Context, cnt *counter) error {
			s, err := c.Stream(ctx, req)
			if err != nil {
				return err
			}
			for ev, err := range s.All() {
				if err != nil {
					return err
				}
				if ev.Type == llm.EventText {
					cnt.delta(ev.Text)
				}
			}
			return nil
		}
	} else {
		c, err := newClient(job, hc)
		if err != nil {
			return err
		}
		defer c.Close()
		stream = func(ctx context.Context, cnt *counter) error { return c.Stream(ctx, "m", cnt.delta) }
	}
	name := job.Client
	one := func() error {
		var cnt counter
		if err := stream(ctx, &cnt); err != nil {
			return err
		}
		return cnt.check(name, d)
	}
	if err := one(); err != nil { // warm-up
		return err
	}
	for range max(job.Repeats, 1) {
		errs := make(chan error, n)
		var wg sync.WaitGroup
		cpu0, t0 := sysinfo.CPU(), time.Now()
		for range n {
			wg.Go(func() {
				if err := one(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		wall, cpu := time.Since(t0), sysinfo.CPU()-cpu0
		close(errs)
		if err := <-errs; err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		total := float64(n * d)
		res.sample("cpu_ns_per_delta", float64(cpu.Nanoseconds())/total)
		res.sample("deltas_per_s", total/wall.Seconds())
	}
	return nil
}

// RangedClients are the ranged-streams scenario's clients, in report
// order.
var RangedClients = []string{"floor-extract", "chorus-all", "openai-go"}
