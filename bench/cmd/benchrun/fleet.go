package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/chorusrt/chorus/bench/internal/corpus"
	"github.com/chorusrt/chorus/bench/internal/scenario"
	"github.com/chorusrt/chorus/bench/internal/server"
)

// gatewayFleet is the fleet's scenario (issue 31): in a child process, two
// gateways over one runtime with one fully limited, priced key, its
// limits and spend counted in memory and in a SQLite key store, under the
// gateway scenario's open-loop load, alternating.
func (r *runner) gatewayFleet() {
	job := scenario.Job{Scenario: "gatewayfleet", Client: "gateway", Format: corpus.OpenAI, BaseURL: r.srv.URL, Rates: r.p.GWRates, Duration: r.p.GWDuration, Repeats: r.p.MacroRuns, Timeout: 5 * time.Minute}
	r.measure("gatewayfleet", "openai", job, r.p.MacroRuns, func(*scenario.Job) {
		r.srv.SetMode(server.Mode{Deltas: r.p.GWDeltas, FlushEvery: r.p.ConcFlush})
	}, nil)
}

// gwFleetRow is the fleet scenario's row, if it ran.
func (r *runner) gwFleetRow() (Row, bool) {
	row, err := r.find("gatewayfleet", "openai", "gateway", corpus.OpenAI)
	return row, err == nil
}

// gwFleetTargets is issue 31's target: the gateway's CPU per request with
// the ledger and fleet limits on within 15% of off, at each rate.
func (r *runner) gwFleetTargets(b *strings.Builder) {
	row, ok := r.gwFleetRow()
	if !ok {
		return
	}
	r.offOnTargets(b, row, 1.15, "with a key store (ledger and fleet limits) on", "with a key store on (SQLite ledger, fleet limits)") // report.go
}

// sectionGatewayFleet is issue 31's figures: the gateway with a key's
// limits and spend in memory and in a key store, in the same child
// process, alternating.
func (r *runner) sectionGatewayFleet(b *strings.Builder) {
	row, ok := r.gwFleetRow()
	if !ok {
		return
	}
	fmt.Fprintf(b, "## 14. Fleet: the gateway with its key store off and on\n\nMeasured on %s by `benchrun` (scenario `gatewayfleet`; load average %s at the run's start, %s at its end, on %d cores). Two gateways over one runtime in one child process, served on two loopback ports, both requiring one gateway key whose rpm, tpm, concurrency and budget are all set and whose model is priced, so that every call is admitted, its most possible cost reserved and its cost settled: **off** counts them in the Handler's memory (`gateway.Options{Keys: ...}`), **on** in a key store on a SQLite file (`Options.KeyStore`, what `chorus serve` keeps by default: leases taken ahead of need, settlement every 250 ms, heartbeat, all off the request's path). The load is scenario 7's open loop of small buffered chat requests, %s at each rate, off and on alternating %d times (each figure the median of those), median of %d runs, each in a fresh process. CPU is the whole process's per request, the key store's background writes included. **Fleet** is on minus off, and on ÷ off their ratio.\n\n",
		r.date.UTC().Format("2006-01-02 15:04 UTC"), r.machine.Load, r.loadEnd, r.machine.Cores, r.p.GWDuration, r.p.MacroRuns, r.p.MacroRuns)
	if row.Err != "" {
		fmt.Fprintf(b, "Could not run: %s\n\n", oneLine(row.Err))
		return
	}
	v := row.Values
	r.offOnTable(b, v, "fleet") // report.go
	fmt.Fprintf(b, "\nThe key store's ledger held %.0f settled calls once the on gateway closed, %.0f left reserved (median of the runs). Target (issue 31): on within 15%% of off; the verdicts are in the Targets table above.\n\n", v["settled_calls"], v["reserved_after_close"])
	if len(row.Notes) > 0 {
		fmt.Fprintf(b, "Notes: %s\n\n", oneLine(strings.Join(row.Notes, "; ")))
	}
}
