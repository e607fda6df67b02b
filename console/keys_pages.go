package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/requestlog"
)

// The Keys pages (Options.KeyStore): the list of the gateway's keys with
// each one's spend against its budget and a form that creates one, and a
// key's page with its settings, its ledger, forms that change, rotate and
// revoke it, and charts of its spend, requests and tokens per hour over
// the last day, drawn from the request log (Options.RequestLog) as the
// Usage page draws its own. The forms call the admin API (keys.go) from
// the page's script, with the login's CSRF token.

type keysPageView struct {
	Keys    []KeyView
	Err     string
	NoStore bool
}

func (h *Handler) pageKeys(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	var v keysPageView
	status := 0
	body, err := h.keysView(ctx)
	switch {
	case errors.Is(err, errNoKeyStore):
		v.NoStore = true
	case err != nil:
		v.Err, status = err.Error(), http.StatusInternalServerError
	}
	v.Keys = body.Keys
	h.pages.render(w, r, "keys", pageData{Title: "Keys", Data: v, Status: status})
}

type keyPageView struct {
	Key     KeyView
	Ledger  []LedgerRow
	Charts  []chart
	From    time.Time
	To      time.Time
	NoLog   bool
	LogErr  string
	Err     string
	NoStore bool
}

func (h *Handler) pageKey(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	id := r.PathValue("id")
	body, err := h.oneKey(ctx, id)
	v := keyPageView{Key: body.Key, Ledger: body.Ledger}
	title := "Key " + id
	if err != nil {
		status := http.StatusNotFound
		switch {
		case errors.Is(err, errNoKeyStore):
			v.NoStore = true
		case errors.Is(err, keystore.ErrNotFound):
			v.Err = "no key has the id " + id
		default:
			v.Err, status = err.Error(), http.StatusInternalServerError
		}
		h.pages.render(w, r, "key", pageData{Title: title, Active: "keys", Data: v, Status: status})
		return
	}
	title = "Key " + body.Key.Name
	lg := h.opt.RequestLog
	if lg == nil {
		v.NoLog = true
	} else {
		v.To = h.now().UTC().Truncate(time.Hour).Add(time.Hour)
		v.From = v.To.Add(-24 * time.Hour)
		q := requestlog.UsageQuery{Filter: requestlog.Filter{Key: body.Key.Name, From: v.From, To: v.To}, Bucket: requestlog.Hour}
		rows, err := lg.Store().Usage(ctx, q)
		if err != nil {
			v.LogErr = err.Error()
		} else {
			v.Charts = keyCharts(rows, q)
		}
	}
	h.pages.render(w, r, "key", pageData{Title: title, Active: "keys", Data: v})
}

// keyCharts draws a key's spend, requests (and errors) and tokens (in,
// cached, out) per bucket.
func keyCharts(rows []requestlog.UsageRow, q requestlog.UsageQuery) []chart {
	var buckets []time.Time
	for t := q.From; t.Before(q.To); t = t.Add(q.Bucket) {
		buckets = append(buckets, t)
	}
	at := map[int64]requestlog.UsageRow{}
	for _, r := range rows {
		at[r.Bucket.Unix()] = r
	}
	series := func(fs map[string]func(requestlog.UsageRow) float64) map[string][]float64 {
		out := map[string][]float64{}
		for name, f := range fs {
			vals := make([]float64, len(buckets))
			for i, b := range buckets {
				if r, ok := at[b.Unix()]; ok {
					vals[i] = f(r)
				}
			}
			out[name] = vals
		}
		return out
	}
	return []chart{
		drawChart("chart-spend", "Spend per hour", "USD", buckets, []string{"spend"},
			series(map[string]func(requestlog.UsageRow) float64{"spend": func(r requestlog.UsageRow) float64 { return r.Cost }})),
		drawChart("chart-requests", "Requests per hour", "requests", buckets, []string{"requests", "errors"},
			series(map[string]func(requestlog.UsageRow) float64{
				"requests": func(r requestlog.UsageRow) float64 { return float64(r.Requests) },
				"errors":   func(r requestlog.UsageRow) float64 { return float64(r.Errors) },
			})),
		drawChart("chart-tokens", "Tokens per hour", "tokens", buckets, []string{"input", "cached", "output"},
			series(map[string]func(requestlog.UsageRow) float64{
				"input":  func(r requestlog.UsageRow) float64 { return float64(r.InputTokens) },
				"cached": func(r requestlog.UsageRow) float64 { return float64(r.CachedTokens) },
				"output": func(r requestlog.UsageRow) float64 { return float64(r.OutputTokens) },
			})),
	}
}

// spendPct is the share of a budget used (spent and reserved), in
// percent, capped at 100; -1 without a budget.
func spendPct(k KeyView) float64 {
	if k.BudgetUSD <= 0 {
		return -1
	}
	return math.Min(100, 100*(k.Spend.SpentUSD+k.Spend.ReservedUSD)/k.BudgetUSD)
}

func dollars(v float64) string { return fmt.Sprintf("$%.4f", v) }
