package requestlog_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/providers"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/runtime"
)

const providerKey = "sk-provider-SECRET-0123456789"

var reqNo = regexp.MustCompile(`req-(\d+)-`)

// usageOf is what the upstream answers request n with: its input tokens
// are unique, so a record names its request.
func usageOf(n int) llm.Usage {
	return llm.Usage{PromptTokens: 1000 + n, CacheReadTokens: n % 7, CompletionTokens: 1 + n%50}
}

// failing requests: the upstream answers 500 to every attempt.
func failing(n int) bool { return n%25 == 7 }

// told is what a client was told about its request.
type told struct {
	cost   float64
	failed bool
	key    string
}

// newGateway is a gateway over llmtest upstreams (every format, priced)
// with lg as its RequestLog and two keys.
func newGateway(t testing.TB, lg gateway.RequestLog) (*httptest.Server, func()) {
	t.Helper()
	up := llmtest.NewServer()
	up.SetResponder(func(r llmtest.Recorded) llmtest.Step {
		m := reqNo.FindSubmatch(r.Body)
		if m == nil {
			return llmtest.Text("?")
		}
		n, _ := strconv.Atoi(string(m[1]))
		if failing(n) {
			return llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 500}}
		}
		u := usageOf(n)
		return llmtest.Respond(llmtest.Reply{Deltas: []string{"a", "b"}, Usage: &u})
	})
	rt, err := runtime.New(
		runtime.WithProvider(providers.Config{ID: "openai", Format: providers.FormatOpenAI, BaseURL: up.OpenAIBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "anthropic", Format: providers.FormatAnthropic, BaseURL: up.AnthropicBaseURL(), APIKey: providerKey}),
		runtime.WithProvider(providers.Config{ID: "gemini", Format: providers.FormatGemini, BaseURL: up.GeminiBaseURL(), APIKey: providerKey}),
		runtime.WithClientOptions(providers.WithRetryPolicy(providers.RetryPolicy{MaxAttempts: 1})),
		runtime.WithAlias("fast", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5"),
		runtime.WithPrices(llm.Prices{"openai/gpt-4.1-mini": {Input: 2, CachedInput: 0.5, Output: 8}, "anthropic/claude-haiku-4-5": {Input: 1, Output: 5}, "gemini/gemini-2.5-flash": {Input: 0.3, Output: 2.5}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	h, err := gateway.New(rt, gateway.Options{RequestLog: lg, Keys: []gateway.Key{
		{Name: "team-a", SHA256: gateway.HashKey("gk-a")}, {Name: "team-b", SHA256: gateway.HashKey("gk-b")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	return gw, func() {
		gw.CloseClientConnections()
		gw.Close()
		h.Close(context.Background())
		rt.Close(context.Background())
		up.Close()
	}
}

// shape is request n's route, body and whether it is streamed.
func shape(n int) (path, body string, key string) {
	p := fmt.Sprintf("req-%d-", n)
	key = []string{"gk-a", "gk-b"}[n%2]
	switch n % 8 {
	case 0:
		return "/v1/chat/completions", `{"model":"openai/gpt-4.1-mini","messages":[{"role":"user","content":"` + p + `"}]}`, key
	case 1:
		return "/v1/chat/completions", `{"model":"fast","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + p + `"}]}`, key
	case 2:
		return "/v1/responses", `{"model":"openai/gpt-4.1-mini","input":"` + p + `"}`, key
	case 3:
		return "/v1/responses", `{"model":"openai/gpt-4.1-mini","stream":true,"input":"` + p + `"}`, key
	case 4:
		return "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":16,"messages":[{"role":"user","content":"` + p + `"}]}`, key
	case 5:
		return "/v1/messages", `{"model":"anthropic/claude-haiku-4-5","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"` + p + `"}]}`, key
	case 6:
		return "/v1beta/models/gemini-2.5-flash:generateContent", `{"contents":[{"role":"user","parts":[{"text":"` + p + `"}]}]}`, key
	default:
		return "/v1/embeddings", `{"model":"openai/gpt-4.1-mini","input":"` + p + `"}`, key
	}
}

// serveRequests sends requests from..to-1 (shape), 16 at a time, and
// keeps what each client was told in out.
func serveRequests(t *testing.T, gw *httptest.Server, from, to int, out []told) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				path, body, key := shape(n)
				req, _ := http.NewRequest("POST", gw.URL+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("x-api-key", key)
				req.Header.Set("x-goog-api-key", key)
				resp, err := gw.Client().Do(req)
				if err != nil {
					t.Errorf("request %d: %v", n, err)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				tl := told{key: key}
				cost := resp.Header.Get("x-chorus-cost-usd")
				if cost == "" {
					cost = resp.Trailer.Get("x-chorus-cost-usd")
				}
				tl.cost, _ = strconv.ParseFloat(cost, 64)
				isErr := resp.StatusCode != 200 // a stream fails before its first event: a status too
				tl.failed = isErr
				if isErr != failing(n) {
					t.Errorf("request %d (%s): status %d, want failing=%v: %.300s", n, path, resp.StatusCode, failing(n), b)
				}
				if !isErr && n%8 != 7 && cost == "" {
					t.Errorf("request %d (%s): no x-chorus-cost-usd", n, path)
				}
				out[n] = tl
			}
		}()
	}
	for n := from; n < to; n++ {
		next <- n
	}
	close(next)
	wg.Wait()
}

// checkRecords: every record the log wrote is one answered request, once,
// with the usage the upstream gave and the cost the client was told.
func checkRecords(t *testing.T, st requestlog.Store, out []told) int {
	t.Helper()
	seen := map[int]bool{}
	failed := 0
	q := requestlog.Query{Limit: 1000}
	for {
		p, err := st.List(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			if strings.Contains(fmt.Sprintf("%+v", r), "gk-") {
				t.Fatalf("a record holds a key: %+v", r)
			}
			if r.ErrorType != "" {
				failed++
				if r.ErrorType != "upstream" || r.Status != 502 {
					t.Errorf("failed record: %+v", r)
				}
				continue
			}
			n := r.InputTokens - 1000 - r.CachedTokens // InputTokens = 1000+n uncached + n%7 cached
			embed := r.Route == "POST /v1/embeddings"
			if n < 0 || n >= len(out) {
				t.Fatalf("record names no request: %+v", r)
			}
			if seen[n] {
				t.Fatalf("request %d recorded twice", n)
			}
			seen[n] = true
			u := usageOf(n)
			if embed { // an embedding reports its prompt tokens only
				u = llm.Usage{PromptTokens: u.PromptTokens}
			}
			if embed != (n%8 == 7) {
				t.Fatalf("request %d recorded on %s", n, r.Route)
			}
			tl := out[n]
			if r.OutputTokens != u.CompletionTokens || r.CachedTokens != u.CacheReadTokens || r.Cost != tl.cost || r.KeyName != map[string]string{"gk-a": "team-a", "gk-b": "team-b"}[tl.key] ||
				r.Attempts != 1 || r.Latency <= 0 || r.Stream != (n%2 == 1 && n%8 != 7) || r.Stream && r.TTFT <= 0 {
				t.Fatalf("request %d (cost told %v): record %+v", n, tl.cost, r)
			}
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	return len(seen) + failed
}

// requests is how many requests the gateway tests send: 100,000
// ($CHORUS_REQUESTLOG_REQUESTS for another number).
func requests(t *testing.T) int {
	t.Helper()
	n := 100_000
	if s := os.Getenv("CHORUS_REQUESTLOG_REQUESTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			t.Fatalf("CHORUS_REQUESTLOG_REQUESTS=%q: want a number of 100 or more", s)
		}
	}
	return n
}

// TestGatewayLogsEveryRequest: 100,000 requests through the gateway; the
// log holds exactly one record per answered request with its usage and
// the cost the client was told (x-chorus-cost-usd, header or trailer).
func TestGatewayLogsEveryRequest(t *testing.T) {
	n := requests(t)
	start := time.Now()
	st := openSQLite(t)
	lg := requestlog.New(nopClose{st}, requestlog.Options{})
	defer st.Close()
	gw, stop := newGateway(t, lg)
	out := make([]told, n)
	serveRequests(t, gw, 0, n, out)
	stop()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := lg.Stats()
	if got := checkRecords(t, st, out); got != n || s.Logged != int64(n) || s.Written != int64(n) || s.Dropped != 0 {
		t.Fatalf("%d records of %d requests; stats %+v", got, n, s)
	}
	rows, err := st.Usage(context.Background(), requestlog.UsageQuery{GroupBy: "key"})
	if err != nil {
		t.Fatal(err)
	}
	var cost float64
	for _, tl := range out {
		cost += tl.cost
	}
	if len(rows) != 2 || rows[0].Group != "team-a" || rows[0].Requests != int64(n/2) || fmt.Sprintf("%.6f", rows[0].Cost+rows[1].Cost) != fmt.Sprintf("%.6f", cost) {
		t.Fatalf("usage per key %+v; clients were told $%.6f", rows, cost)
	}
	t.Logf("%d requests, %d records, $%.4f told and logged (%v)", n, s.Written, cost, time.Since(start).Round(time.Millisecond))
}

// TestGatewayStoreHangs: the store hangs for the middle third of 3,000
// requests (released only after the last answer, so a request that waited
// on it would never finish): every request is answered, the overflow is
// counted, and every record written is right.
func TestGatewayStoreHangs(t *testing.T) {
	const n = 3000
	inner := openSQLite(t)
	defer inner.Close()
	fs := &faultyStore{Store: nopClose{inner}}
	lg := requestlog.New(fs, requestlog.Options{Queue: 200, Batch: 50, Interval: 10 * time.Millisecond})
	gw, stop := newGateway(t, lg)
	out := make([]told, n)
	serveRequests(t, gw, 0, n/3, out)
	fs.block()
	start := time.Now()
	serveRequests(t, gw, n/3, 2*n/3, out)
	hung := time.Since(start)
	during := lg.Stats()
	fs.release()
	serveRequests(t, gw, 2*n/3, n, out)
	stop()
	if err := lg.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := lg.Stats()
	got := checkRecords(t, inner, out)
	// While hung at most Queue + two batches are held (one taken just
	// before the hang, one waiting on it): the rest of the 1,000 dropped.
	if s.Logged != n || s.Written+s.Dropped != n || int64(got) != s.Written || during.Dropped < n/3-300 {
		t.Fatalf("%d records; stats %+v (while hung: %+v)", got, s, during)
	}
	t.Logf("%d requests answered while the store hung (%v); %d written, %d dropped and counted", n/3, hung, s.Written, s.Dropped)
}

// TestGatewayPostgresStopped: 100,000 requests with a real PostgreSQL
// shut down for the middle third and started again: every request is
// answered, what could not be written is counted, and every record written
// is one answered request with the usage and cost its client was told.
func TestGatewayPostgresStopped(t *testing.T) {
	n := requests(t)
	start0 := time.Now()
	c := pgtest.Crashable(t)
	st, err := requestlog.OpenPostgres(context.Background(), pgtest.SchemaDSNOn(t, c.DSN()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lg := requestlog.New(nopClose{st}, requestlog.Options{Queue: 500, Batch: 500, Interval: 10 * time.Millisecond, WriteTimeout: time.Second})
	gw, stop := newGateway(t, lg)
	out := make([]told, n)
	serveRequests(t, gw, 0, n/3, out)
	if err := c.Crash(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	serveRequests(t, gw, n/3, 2*n/3, out)
	down := time.Since(start)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	serveRequests(t, gw, 2*n/3, n, out)
	stop()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := lg.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s := lg.Stats()
	got := checkRecords(t, st, out)
	// While down at most Queue + two batches are held: the rest of the
	// third dropped, and counted.
	if s.Logged != int64(n) || s.Written+s.Dropped != int64(n) || int64(got) != s.Written || s.WriteErrors == 0 || s.Dropped < int64(n/3-2000) {
		t.Fatalf("%d records; stats %+v", got, s)
	}
	t.Logf("%d requests answered while PostgreSQL was down (%v); %d written, %d dropped and counted, %d failed inserts (%v in all)", 2*n/3-n/3, down, s.Written, s.Dropped, s.WriteErrors, time.Since(start0).Round(time.Millisecond))
}
