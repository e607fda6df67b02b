package console

import (
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// The Requests and Usage pages (Options.RequestLog). Both are rendered on
// the server from the same reads as the API: the Requests page is one
// keyset page with a link to the next, each record opening in place; the
// Usage page draws its charts as inline SVG, with no script and no
// external service.

// requestsView is the Requests page's data.
type requestsView struct {
	Filter  url.Values
	Records []requestlog.Record
	Next    string // the next page's address, "" at the end
	Err     string // a bad filter, shown above the form
	Log     requestlog.Stats
	NoLog   bool
}

func (h *Handler) pageRequests(w http.ResponseWriter, r *http.Request) {
	v := requestsView{Filter: r.URL.Query()}
	lg := h.opt.RequestLog
	status := 0
	switch {
	case lg == nil:
		v.NoLog = true
	default:
		v.Log = lg.Stats()
		q, err := requestlog.ParseQuery(nonEmpty(r.URL.Query()))
		if err == nil {
			var p requestlog.Page
			if p, err = lg.Store().List(r.Context(), q); err == nil {
				v.Records = p.Records
				if p.Next != "" {
					next := nonEmpty(r.URL.Query())
					next.Set("cursor", p.Next)
					v.Next = PagePrefix + "requests?" + next.Encode()
				}
			}
		}
		if err != nil {
			v.Err, status = err.Error(), http.StatusBadRequest
		}
	}
	h.pages.render(w, r, "requests", pageData{Title: "Requests", Data: v, Status: status})
}

// nonEmpty drops the form's empty fields: an empty filter selects all.
func nonEmpty(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		if len(vs) > 0 && vs[0] != "" {
			out[k] = vs
		}
	}
	return out
}

// usagePageView is the Usage page's data.
type usagePageView struct {
	Filter url.Values
	Group  string
	From   time.Time
	To     time.Time
	Bucket string
	Rows   []requestlog.UsageRow
	Totals []requestlog.UsageRow // one per group, over the range
	Charts []chart
	Err    string
	Log    requestlog.Stats
	NoLog  bool
}

func (h *Handler) pageUsage(w http.ResponseWriter, r *http.Request) {
	in := nonEmpty(r.URL.Query())
	v := usagePageView{Filter: r.URL.Query()}
	lg := h.opt.RequestLog
	if lg == nil {
		v.NoLog = true
		h.pages.render(w, r, "usage", pageData{Title: "Usage", Data: v})
		return
	}
	v.Log = lg.Stats()
	// Defaults: the last day by hour, per model.
	if in.Get("group_by") == "" {
		in.Set("group_by", "model")
	}
	if in.Get("bucket") == "" {
		in.Set("bucket", "hour")
	}
	if in.Get("to") == "" {
		in.Set("to", h.now().UTC().Truncate(time.Hour).Add(time.Hour).Format(time.RFC3339))
	}
	if in.Get("from") == "" {
		if to, err := time.Parse(time.RFC3339, in.Get("to")); err == nil {
			in.Set("from", to.Add(-24*time.Hour).Format(time.RFC3339))
		}
	}
	v.Group, v.Bucket = in.Get("group_by"), in.Get("bucket")
	q, err := requestlog.ParseUsage(in)
	if err == nil {
		v.From, v.To = q.From, q.To
		v.Rows, err = lg.Store().Usage(r.Context(), q)
	}
	if err == nil {
		tq := q
		tq.Bucket = 0
		v.Totals, err = lg.Store().Usage(r.Context(), tq)
	}
	if err != nil {
		v.Err = err.Error()
		h.pages.render(w, r, "usage", pageData{Title: "Usage", Data: v, Status: http.StatusBadRequest})
		return
	}
	v.Charts = usageCharts(v.Rows, q)
	h.pages.render(w, r, "usage", pageData{Title: "Usage", Data: v})
}

// chart is one SVG line chart: a series per group over the buckets.
type chart struct {
	ID, Title, Unit string
	SVG             template.HTML
	Legend          []legendItem
}

type legendItem struct{ Name, Color string }

var palette = []string{"#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"}

// usageCharts draws spend, requests, error rate and latency percentiles
// over the range's buckets.
func usageCharts(rows []requestlog.UsageRow, q requestlog.UsageQuery) []chart {
	var buckets []time.Time
	for t := q.From; t.Before(q.To); t = t.Add(q.Bucket) {
		buckets = append(buckets, t)
	}
	var groups []string
	for _, r := range rows {
		if !slices.Contains(groups, r.Group) {
			groups = append(groups, r.Group)
		}
	}
	slices.Sort(groups)
	at := map[string]map[int64]requestlog.UsageRow{}
	for _, r := range rows {
		if at[r.Group] == nil {
			at[r.Group] = map[int64]requestlog.UsageRow{}
		}
		at[r.Group][r.Bucket.Unix()] = r
	}
	series := func(f func(requestlog.UsageRow) float64) map[string][]float64 {
		out := map[string][]float64{}
		for _, g := range groups {
			vals := make([]float64, len(buckets))
			for i, b := range buckets {
				if r, ok := at[g][b.Unix()]; ok {
					vals[i] = f(r)
				} else {
					vals[i] = math.NaN() // no request: a gap
				}
			}
			out[g] = vals
		}
		return out
	}
	zeroGaps := func(m map[string][]float64) map[string][]float64 {
		for _, vals := range m {
			for i := range vals {
				if math.IsNaN(vals[i]) {
					vals[i] = 0
				}
			}
		}
		return m
	}
	msOf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	charts := []chart{
		drawChart("chart-spend", "Spend per "+bucketName(q.Bucket), "USD", buckets, groups, zeroGaps(series(func(r requestlog.UsageRow) float64 { return r.Cost }))),
		drawChart("chart-requests", "Requests per "+bucketName(q.Bucket), "requests", buckets, groups, zeroGaps(series(func(r requestlog.UsageRow) float64 { return float64(r.Requests) }))),
		drawChart("chart-errors", "Error rate", "%", buckets, groups, series(func(r requestlog.UsageRow) float64 { return 100 * float64(r.Errors) / float64(r.Requests) })),
	}
	// Latency: p50, p95 and p99 over every group together.
	all := map[int64][3]float64{}
	var pct []string
	if len(groups) > 0 {
		pct = []string{"p50", "p95", "p99"}
	}
	for _, r := range rows { // the worst group's percentile per bucket: an upper bound
		k := r.Bucket.Unix()
		cur := all[k]
		cur[0], cur[1], cur[2] = max(cur[0], msOf(r.LatencyP50)), max(cur[1], msOf(r.LatencyP95)), max(cur[2], msOf(r.LatencyP99))
		all[k] = cur
	}
	lat := map[string][]float64{}
	for i, p := range pct {
		vals := make([]float64, len(buckets))
		for j, b := range buckets {
			if c, ok := all[b.Unix()]; ok {
				vals[j] = c[i]
			} else {
				vals[j] = math.NaN()
			}
		}
		lat[p] = vals
	}
	return append(charts, drawChart("chart-latency", "Latency (slowest "+q.GroupBy+")", "ms", buckets, pct, lat))
}

func bucketName(d time.Duration) string {
	if d == requestlog.Day {
		return "day"
	}
	return "hour"
}

// drawChart draws series (one per name, NaN a gap) as polylines with
// axes, ticks and a title attribute per point.
func drawChart(id, title, unit string, buckets []time.Time, names []string, series map[string][]float64) chart {
	const w, h, left, right, top, bottom = 560.0, 200.0, 56.0, 10.0, 10.0, 28.0
	top_ := 0.0
	for _, vals := range series {
		for _, v := range vals {
			if !math.IsNaN(v) {
				top_ = max(top_, v)
			}
		}
	}
	if top_ == 0 {
		top_ = 1
	}
	n := max(len(buckets), 2)
	x := func(i int) float64 { return left + (w-left-right)*float64(i)/float64(n-1) }
	y := func(v float64) float64 { return top + (h-top-bottom)*(1-v/top_) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" id="%s" viewBox="0 0 %g %g" width="%g" height="%g" role="img" aria-label="%s">`, id, w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#9ca3af"/>`, left, h-bottom, w-right, h-bottom)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#9ca3af"/>`, left, top, left, h-bottom)
	for _, f := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="end" fill="#6b7280">%s</text>`, left-4, y(top_*f)+3, fmtNum(top_*f))
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="#e5e7eb"/>`, left, y(top_*f), w-right, y(top_*f))
	}
	for i := 0; i < len(buckets); i += max(1, len(buckets)/6) {
		fmt.Fprintf(&b, `<text x="%g" y="%g" font-size="10" text-anchor="middle" fill="#6b7280">%s</text>`, x(i), h-bottom+14, buckets[i].UTC().Format("01-02 15h"))
	}
	c := chart{ID: id, Title: title, Unit: unit}
	for gi, name := range names {
		color := palette[gi%len(palette)]
		c.Legend = append(c.Legend, legendItem{Name: name, Color: color})
		vals := series[name]
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(&b, `<polyline class="series" data-series="%s" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, template.HTMLEscapeString(name), color, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for i, v := range vals {
			if math.IsNaN(v) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"><title>%s %s: %s %s</title></circle>`, x(i), y(v), color, template.HTMLEscapeString(name), buckets[i].UTC().Format(time.RFC3339), fmtNum(v), unit)
		}
		flush()
	}
	b.WriteString(`</svg>`)
	c.SVG = template.HTML(b.String()) // every text in it is escaped above
	return c
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4f", v)
}
