package console

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/requestlog"
)

// TestRequestLogAPI: /api/console/requests pages newest first by its
// cursor with filters, in JSON and CSV; /api/console/usage aggregates; a
// bad filter is a 400 naming it.
func TestRequestLogAPI(t *testing.T) {
	st, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var recs []requestlog.Record
	for i := range 120 {
		r := requestlog.Record{Time: t0.Add(time.Duration(i) * time.Minute), KeyName: []string{"a", "b"}[i%2], KeyFingerprint: "fp",
			Model: "openai/m", Provider: "openai", Status: 200, Latency: time.Duration(i+1) * time.Millisecond, InputTokens: i, OutputTokens: 1, Cost: 0.001}
		if i%10 == 0 {
			r.Status, r.ErrorType = 502, "upstream"
		}
		recs = append(recs, r)
	}
	if err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	lg := requestlog.New(st, requestlog.Options{})
	defer lg.Close(context.Background())
	h, err := New(Options{RequestLog: lg, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, http.Header, string) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	// Key b's records, 25 a page, newest first.
	var inputs []int
	cursor := ""
	for pages := 0; ; pages++ {
		code, _, body := get("/api/console/requests?key=b&limit=25&cursor=" + cursor)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var rb RequestsBody
		if err := json.Unmarshal([]byte(body), &rb); err != nil {
			t.Fatal(err)
		}
		for _, r := range rb.Records {
			inputs = append(inputs, r.InputTokens)
		}
		if rb.Next == "" {
			break
		}
		cursor = rb.Next
	}
	if len(inputs) != 60 || inputs[0] != 119 || inputs[59] != 1 {
		t.Fatalf("key b paged %d records: %v", len(inputs), inputs)
	}
	// CSV, errors only.
	code, hd, body := get("/api/console/requests?status=error&format=csv&limit=5")
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != 200 || err != nil || len(rows) != 6 || rows[0][0] != "id" || rows[1][12] != "502" || hd.Get("X-Next-Cursor") == "" || !strings.HasPrefix(hd.Get("Content-Type"), "text/csv") {
		t.Fatalf("csv %d %v: %v", code, err, rows)
	}
	// Usage per key and hour.
	code, _, body = get("/api/console/usage?group_by=key&bucket=hour&from=2026-12-01T00:00:00Z&to=2026-12-01T02:00:00Z")
	var ub UsageBody
	if code != 200 || json.Unmarshal([]byte(body), &ub) != nil || len(ub.Rows) != 4 {
		t.Fatalf("usage %d %s", code, body)
	}
	if r := ub.Rows[0]; r.Group != "a" || r.Requests != 30 || r.Errors != 6 || r.ErrorsByKind["upstream"] != 6 || fmt.Sprintf("%.3f", r.Cost) != "0.030" {
		t.Fatalf("first row %+v", r)
	}
	code, _, body = get("/api/console/usage?group_by=model&format=csv")
	rows, err = csv.NewReader(strings.NewReader(body)).ReadAll()
	if code != 200 || err != nil || len(rows) != 2 || rows[1][1] != "openai/m" || rows[1][2] != "120" || rows[1][3] != "12" {
		t.Fatalf("usage csv %d %v %v", code, err, rows)
	}
	// Bad filters: 400 naming them.
	for _, c := range []struct{ path, filter string }{
		{"/api/console/requests?colour=red", "colour"},
		{"/api/console/requests?from=monday", "from"},
		{"/api/console/requests?from=2026-12-02T00:00:00Z&to=2026-12-01T00:00:00Z", "from"},
		{"/api/console/requests?cursor=nope", "cursor"},
		{"/api/console/requests?format=xml", "format"},
		{"/api/console/usage?group_by=colour", "group_by"},
		{"/api/console/usage?bucket=week", "bucket"},
	} {
		code, _, body := get(c.path)
		var fe FilterErrorBody
		if code != 400 || json.Unmarshal([]byte(body), &fe) != nil || fe.Filter != c.filter || fe.Error.Code != "bad_filter" || !strings.Contains(fe.Error.Message, c.filter) {
			t.Errorf("%s: %d %s; want a 400 naming %s", c.path, code, body, c.filter)
		}
	}
}

// TestRequestLogAPIAbsent: without a request log both endpoints are 404.
func TestRequestLogAPIAbsent(t *testing.T) {
	h, err := New(Options{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, p := range []string{"/api/console/requests", "/api/console/usage"} {
		resp, err := srv.Client().Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
}

// TestRequestsPageContent: the Requests page shows a record's request
// body and answer, escaped, only when the record holds them.
func TestRequestsPageContent(t *testing.T) {
	st, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	recs := []requestlog.Record{
		{Time: t0, Model: "openai/m", Status: 200},
		{Time: t0.Add(time.Second), Model: "openai/m", Status: 200, RequestBody: `{"messages":"<script>alert(1)</script>"}`, Answer: "an answer"},
	}
	if err := st.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	lg := requestlog.New(st, requestlog.Options{})
	defer lg.Close(context.Background())
	h, err := New(Options{RequestLog: lg, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + PagePrefix + "requests")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != 200 || strings.Count(page, `class="content request-body"`) != 1 || strings.Count(page, `class="content answer">an answer</pre>`) != 1 ||
		strings.Contains(page, "<script>alert") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") || strings.Count(page, "<dt>request body</dt>") != 1 {
		t.Fatalf("%d %s", resp.StatusCode, page)
	}
}
