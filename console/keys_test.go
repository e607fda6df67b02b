package console

import (
	"bytes"
	"context"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/requestlog"
)

// keysKit is a console over a SQLite key store (and, with a request log,
// its charts), served on httptest; seen keeps every answer's body, so a
// test can check that no key text leaks into one.
type keysKit struct {
	*kit
	st   *keystore.Store
	seen [][]byte
}

func newKeysKit(t *testing.T, opt Options) *keysKit {
	t.Helper()
	st, err := keystore.OpenSQLite(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opt.KeyStore = st
	switch opt.Token {
	case "":
		opt.Token = testToken
	case "-": // no token: read-only
		opt.Token = ""
	}
	h, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &keysKit{kit: &kit{t: t, h: h, srv: srv}, st: st}
}

// call makes an API request with the operator token and checks its status.
func (k *keysKit) call(method, path string, body any, status int) resp {
	k.t.Helper()
	r := k.do(req{method: method, path: APIPrefix + path, body: body, bearer: testToken})
	k.seen = append(k.seen, r.body)
	if r.status != status {
		k.t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, status)
	}
	return r
}

// fieldErr checks a 400 naming field.
func (k *keysKit) fieldErr(method, path string, body any, field string) {
	k.t.Helper()
	r := k.do(req{method: method, path: APIPrefix + path, body: body, bearer: testToken})
	var e ErrorBody
	r.json(k.t, &e)
	if r.status != http.StatusBadRequest || e.Error.Code != "bad_request" || e.Error.Field != field || !strings.Contains(e.Error.Message, field) {
		k.t.Fatalf("%s %s %v: %d %s, want a 400 naming %s", method, path, body, r.status, r.body, field)
	}
}

// rawCall sends body as it is (not JSON-encoded).
func (k *keysKit) rawCall(method, path, body string) resp {
	k.t.Helper()
	r, err := http.NewRequestWithContext(ctxT(k.t, 10*time.Second), method, k.srv.URL+APIPrefix+path, strings.NewReader(body))
	if err != nil {
		k.t.Fatal(err)
	}
	r.Header.Set("Authorization", "Bearer "+testToken)
	res, err := http.DefaultClient.Do(r)
	if err != nil {
		k.t.Fatal(err)
	}
	defer res.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b.Bytes()}
}

func ptr[T any](v T) *T { return &v }

// spend makes key id spend usd through the ledger, as a gateway replica
// does: reserve, then settle (and hold reserved more in flight).
func (k *keysKit) spend(id, period string, usd, reserved float64, calls int64) {
	k.t.Helper()
	ctx := context.Background()
	now := time.Now()
	if err := k.st.Register(ctx, "replica-test", now); err != nil {
		k.t.Fatal(err)
	}
	want := keystore.ToNano(usd + reserved)
	got, err := k.st.Reserve(ctx, "replica-test", id, period, want, want, now)
	if err != nil || got != want {
		k.t.Fatalf("reserve: %d, %v (want %d)", got, err, want)
	}
	if err := k.st.Settle(ctx, "replica-test", []keystore.Settlement{{KeyID: id, Period: period, Spent: keystore.ToNano(usd), Calls: calls}}, now); err != nil {
		k.t.Fatal(err)
	}
}

// TestKeysAPI goes through every route of the keys' admin API: create
// (the secret shown once, its hash stored), list, read with the ledger
// after spend settled through it, update, rotate with a grace period,
// revoke (twice, by POST and DELETE); the secrets appear in their own
// answers only.
func TestKeysAPI(t *testing.T) {
	k := newKeysKit(t, Options{})
	var list KeysBody
	k.call("GET", "keys", nil, 200).json(t, &list)
	if list.Keys == nil || len(list.Keys) != 0 {
		t.Fatalf("empty store: %+v", list)
	}

	var created KeyBody
	r := k.call("POST", "keys", KeyRequest{Name: ptr("team-a"), Models: ptr([]string{"openai/gpt-4.1-mini", " sim/echo "}), RPM: ptr(600), TPM: ptr(100000),
		Concurrency: ptr(8), BudgetUSD: ptr(50.0), BudgetPeriod: ptr("month"), DropUnsupported: ptr(true)}, 201)
	r.json(t, &created)
	secret := created.Secret
	kv := created.Key
	if !strings.HasPrefix(secret, "sk-chorus-") || len(secret) != len("sk-chorus-")+40 {
		t.Fatalf("secret %q", secret)
	}
	stored, err := k.st.Get(context.Background(), kv.ID)
	if err != nil || stored.Hash != keystore.HashKey(secret) || kv.Fingerprint != keystore.Fingerprint(keystore.HashKey(secret)) {
		t.Fatalf("stored %+v %v: not the hash of the secret, or another fingerprint than %s", stored, err, kv.Fingerprint)
	}
	month := time.Now().UTC().Format("2006-01")
	if kv.Name != "team-a" || strings.Join(kv.Models, ",") != "openai/gpt-4.1-mini,sim/echo" || kv.RPM != 600 || kv.TPM != 100000 || kv.Concurrency != 8 ||
		kv.BudgetUSD != 50 || kv.BudgetPeriod != "month" || !kv.DropUnsupported || kv.Status != "active" || kv.Revoked != nil || kv.PreviousValidUntil != nil ||
		kv.Spend.Period != month || kv.Spend.SpentUSD != 0 || kv.Spend.Resets == nil || kv.Created.IsZero() {
		t.Fatalf("created key %+v", kv)
	}
	if !strings.Contains(string(r.body), `"resets"`) || strings.Contains(string(r.body), `"revoked"`) {
		t.Fatalf("create's JSON %s", r.body)
	}
	// A second key without a budget: a total, no resets.
	var other KeyBody
	k.call("POST", "keys", KeyRequest{Name: ptr("team-b")}, 201).json(t, &other)
	if other.Key.BudgetPeriod != "total" || other.Key.Spend.Period != "" || other.Key.Spend.Resets != nil || len(other.Key.Models) != 0 {
		t.Fatalf("team-b %+v", other.Key)
	}

	// Spend: $1.25 settled over 3 calls, $0.50 more held in flight.
	k.spend(kv.ID, month, 1.25, 0.5, 3)
	k.call("GET", "keys", nil, 200).json(t, &list)
	if len(list.Keys) != 2 {
		t.Fatalf("list: %+v", list)
	}
	for _, x := range list.Keys {
		if x.ID == kv.ID && (x.Spend.SpentUSD != 1.25 || x.Spend.ReservedUSD != 0.5 || x.Spend.Calls != 3) {
			t.Fatalf("listed spend %+v", x.Spend)
		}
	}
	var one struct {
		Key    KeyView     `json:"key"`
		Ledger []LedgerRow `json:"ledger"`
	}
	k.call("GET", "keys/"+kv.ID, nil, 200).json(t, &one)
	if one.Key.ID != kv.ID || one.Key.Spend.SpentUSD != 1.25 || len(one.Ledger) != 1 || one.Ledger[0] != (LedgerRow{Period: month, SpentUSD: 1.25, Calls: 3}) {
		t.Fatalf("one key: %+v", one)
	}
	k.call("GET", "keys/"+other.Key.ID, nil, 200).json(t, &one)
	if one.Ledger == nil || len(one.Ledger) != 0 {
		t.Fatalf("a key with nothing spent: %+v", one)
	}

	// Update: a subset of the fields; the rest stay.
	var upd KeyBody
	k.call("PATCH", "keys/"+kv.ID, KeyRequest{BudgetUSD: ptr(2.0), BudgetPeriod: ptr("day"), Models: ptr([]string{})}, 200).json(t, &upd)
	today := time.Now().UTC().Format("2006-01-02")
	if upd.Key.BudgetUSD != 2 || upd.Key.BudgetPeriod != "day" || len(upd.Key.Models) != 0 || upd.Key.RPM != 600 || upd.Key.Name != "team-a" ||
		upd.Key.Spend.Period != today || upd.Key.Spend.SpentUSD != 0 || !upd.Key.Updated.After(kv.Created) && !upd.Key.Updated.Equal(kv.Created) {
		t.Fatalf("updated %+v", upd.Key)
	}
	k.call("PATCH", "keys/"+kv.ID, KeyRequest{Name: ptr("team-a2"), RPM: ptr(0)}, 200).json(t, &upd)
	if upd.Key.Name != "team-a2" || upd.Key.RPM != 0 || upd.Key.BudgetUSD != 2 {
		t.Fatalf("renamed %+v", upd.Key)
	}

	// Rotate with an hour of grace: both keys authenticate, the id stays.
	var rot KeyBody
	k.call("POST", "keys/"+kv.ID+"/rotate", RotateRequest{Grace: "1h"}, 200).json(t, &rot)
	if rot.Secret == "" || rot.Secret == secret || rot.Key.ID != kv.ID || rot.Key.Status != "rotating" || rot.Key.PreviousValidUntil == nil ||
		rot.Key.Fingerprint == kv.Fingerprint || rot.Key.Fingerprint != keystore.Fingerprint(keystore.HashKey(rot.Secret)) {
		t.Fatalf("rotated %+v", rot)
	}
	if d := time.Until(*rot.Key.PreviousValidUntil); d < 59*time.Minute || d > time.Hour {
		t.Fatalf("previous key valid for %v, want 1h", d)
	}
	stored, _ = k.st.Get(context.Background(), kv.ID)
	if !stored.Accepts(keystore.HashKey(secret), time.Now()) || !stored.Accepts(keystore.HashKey(rot.Secret), time.Now()) {
		t.Fatal("within the grace period both keys should be accepted")
	}
	// Rotate with no body: no grace.
	var rot2 KeyBody
	r = k.rawCall("POST", "keys/"+other.Key.ID+"/rotate", "")
	r.json(t, &rot2)
	k.seen = append(k.seen, r.body)
	if r.status != 200 || rot2.Key.Status != "active" || rot2.Key.PreviousValidUntil != nil || rot2.Secret == "" {
		t.Fatalf("rotate without grace: %d %s", r.status, r.body)
	}

	// Revoke, by POST then DELETE (which changes nothing more).
	var rev KeyBody
	k.call("POST", "keys/"+kv.ID+"/revoke", nil, 200).json(t, &rev)
	if rev.Key.Status != "revoked" || rev.Key.Revoked == nil || rev.Secret != "" {
		t.Fatalf("revoked %+v", rev)
	}
	var again KeyBody
	k.call("DELETE", "keys/"+kv.ID, nil, 200).json(t, &again)
	if again.Key.Status != "revoked" || !again.Key.Revoked.Equal(*rev.Key.Revoked) {
		t.Fatalf("revoked again %+v", again.Key)
	}
	k.call("DELETE", "keys/"+other.Key.ID, nil, 200)
	stored, _ = k.st.Get(context.Background(), kv.ID)
	if stored.Accepts(keystore.HashKey(secret), time.Now()) || stored.Accepts(keystore.HashKey(rot.Secret), time.Now()) {
		t.Fatal("a revoked key is accepted")
	}
	// The ledger outlives the revocation.
	k.call("GET", "keys/"+kv.ID, nil, 200).json(t, &one)
	if len(one.Ledger) != 1 || one.Ledger[0].SpentUSD != 1.25 {
		t.Fatalf("revoked key's ledger %+v", one.Ledger)
	}

	// Each secret is in its own answer only; no answer holds a hash.
	secrets := []string{secret, other.Secret, rot.Secret, rot2.Secret}
	for _, body := range k.seen {
		n := 0
		for _, s := range secrets {
			n += strings.Count(string(body), s)
			h := keystore.HashKey(s)
			if strings.Contains(string(body), hex.EncodeToString(h[:])) {
				t.Fatalf("an answer holds a key's hash: %s", body)
			}
		}
		if n > 1 || (n == 1 && !strings.Contains(string(body), `"secret"`)) {
			t.Fatalf("an answer holds a key's text outside its secret: %s", body)
		}
	}
	seenSecrets := 0
	for _, body := range k.seen {
		if strings.Contains(string(body), `"secret"`) {
			seenSecrets++
		}
	}
	if seenSecrets != 4 {
		t.Fatalf("%d answers carry a secret, want 4 (2 creations, 2 rotations)", seenSecrets)
	}
}

// TestKeysAPIErrors: each refusal of the admin API, its status, code and
// the field it names.
func TestKeysAPIErrors(t *testing.T) {
	k := newKeysKit(t, Options{})
	var a KeyBody
	k.call("POST", "keys", KeyRequest{Name: ptr("team-a")}, 201).json(t, &a)
	id := a.Key.ID

	// 400s naming the field.
	for _, c := range []struct {
		method, path string
		body         any
		field        string
	}{
		{"POST", "keys", map[string]any{"nme": "x"}, "nme"},
		{"POST", "keys", map[string]any{"name": "x", "rpm": "many"}, "rpm"},
		{"POST", "keys", map[string]any{"name": "x", "budget_usd": "5"}, "budget_usd"},
		{"POST", "keys", map[string]any{"name": "x", "models": "a,b"}, "models"},
		{"POST", "keys", map[string]any{"rpm": 5}, "name"},
		{"POST", "keys", map[string]any{"name": "  "}, "name"},
		{"POST", "keys", map[string]any{"name": "x", "rpm": -1}, "rpm"},
		{"POST", "keys", map[string]any{"name": "x", "tpm": -1}, "tpm"},
		{"POST", "keys", map[string]any{"name": "x", "concurrency": -2}, "concurrency"},
		{"POST", "keys", map[string]any{"name": "x", "budget_usd": -5}, "budget_usd"},
		{"POST", "keys", map[string]any{"name": "x", "budget_period": "weekly"}, "budget_period"},
		{"POST", "keys", map[string]any{"name": "x", "models": []string{"a", ""}}, "models[1]"},
		{"PATCH", "keys/" + id, map[string]any{"budget_usd": -1}, "budget_usd"},
		{"PATCH", "keys/" + id, map[string]any{"hash": "00"}, "hash"},
		{"PATCH", "keys/" + id, map[string]any{"budget_period": "year"}, "budget_period"},
		{"POST", "keys/" + id + "/rotate", map[string]any{"grace": "soon"}, "grace"},
		{"POST", "keys/" + id + "/rotate", map[string]any{"grace": "-1h"}, "grace"},
		{"POST", "keys/" + id + "/rotate", map[string]any{"grace_period": "1h"}, "grace_period"},
	} {
		k.fieldErr(c.method, c.path, c.body, c.field)
	}
	for _, body := range []string{`{"name":`, `not json`, `{"name":"x"} {"name":"y"}`, `[]`} {
		r := k.rawCall("POST", "keys", body)
		var e ErrorBody
		r.json(t, &e)
		if r.status != 400 || e.Error.Field != "body" {
			t.Fatalf("body %q: %d %s, want a 400 naming the body", body, r.status, r.body)
		}
	}
	if r := k.rawCall("PATCH", "keys/"+id, ``); r.status != 400 || r.errCode(t) != "bad_request" {
		t.Fatalf("PATCH without a body: %d %s", r.status, r.body)
	}
	// Nothing was created by a refused request.
	if keys, _ := k.st.List(context.Background()); len(keys) != 1 {
		t.Fatalf("%d keys after refusals, want 1", len(keys))
	}

	// 409: a duplicate name, at creation and by a rename.
	k.call("POST", "keys", KeyRequest{Name: ptr("team-b")}, 201)
	if r := k.call("POST", "keys", KeyRequest{Name: ptr("team-a")}, 409); r.errCode(t) != "conflict" {
		t.Fatalf("duplicate: %s", r.body)
	}
	if r := k.call("PATCH", "keys/"+id, KeyRequest{Name: ptr("team-b")}, 409); r.errCode(t) != "conflict" {
		t.Fatalf("rename onto another: %s", r.body)
	}
	// 404: an unknown id, on every route.
	for _, c := range [][2]string{{"GET", "keys/key_nope"}, {"PATCH", "keys/key_nope"}, {"POST", "keys/key_nope/rotate"}, {"POST", "keys/key_nope/revoke"}, {"DELETE", "keys/key_nope"}} {
		var body any
		if c[0] != "GET" && c[0] != "DELETE" {
			body = map[string]any{}
		}
		if r := k.call(c[0], c[1], body, 404); r.errCode(t) != "unknown_key" {
			t.Fatalf("%v: %s", c, r.body)
		}
	}
	// 409: a change of a revoked key; revoking it again is a 200.
	k.call("POST", "keys/"+id+"/revoke", nil, 200)
	if r := k.call("PATCH", "keys/"+id, KeyRequest{RPM: ptr(5)}, 409); r.errCode(t) != "revoked" {
		t.Fatalf("update of a revoked key: %s", r.body)
	}
	if r := k.call("POST", "keys/"+id+"/rotate", RotateRequest{}, 409); r.errCode(t) != "revoked" {
		t.Fatalf("rotation of a revoked key: %s", r.body)
	}
	k.call("POST", "keys/"+id+"/revoke", nil, 200)

	// Auth: reading and changing need the token (not a loopback console).
	if r := k.do(req{path: APIPrefix + "keys"}); r.status != 401 || r.errCode(t) != "unauthorized" {
		t.Fatalf("read without a token: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "keys", body: KeyRequest{Name: ptr("x")}}); r.status != 401 || r.errCode(t) != "unauthorized" {
		t.Fatalf("create without a token: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "keys", body: KeyRequest{Name: ptr("x")}, bearer: "wrong"}); r.status != 401 {
		t.Fatalf("create with a wrong token: %d %s", r.status, r.body)
	}
	cookie, csrf := k.login()
	if r := k.do(req{method: "POST", path: APIPrefix + "keys", body: KeyRequest{Name: ptr("x")}, cookie: cookie}); r.status != 403 || r.errCode(t) != "csrf" {
		t.Fatalf("create by cookie without CSRF: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "PATCH", path: APIPrefix + "keys/" + a.Key.ID, body: KeyRequest{}, cookie: cookie, header: map[string]string{CSRFHeader: csrf, "Sec-Fetch-Site": "cross-site"}}); r.status != 403 || r.errCode(t) != "csrf" {
		t.Fatalf("a cross-site change: %d %s", r.status, r.body)
	}
	if r := k.do(req{method: "POST", path: APIPrefix + "keys", body: KeyRequest{Name: ptr("by-cookie")}, cookie: cookie, header: map[string]string{CSRFHeader: csrf}}); r.status != 201 {
		t.Fatalf("create by cookie with CSRF: %d %s", r.status, r.body)
	}
	if r := k.do(req{path: APIPrefix + "keys", cookie: cookie}); r.status != 200 {
		t.Fatalf("read by cookie: %d %s", r.status, r.body)
	}

	// A loopback console without a token reads, and refuses changes.
	ro := newKeysKit(t, Options{Loopback: true, Token: "-"})
	if r := ro.do(req{path: APIPrefix + "keys"}); r.status != 200 {
		t.Fatalf("loopback read: %d %s", r.status, r.body)
	}
	if r := ro.do(req{method: "POST", path: APIPrefix + "keys", body: KeyRequest{Name: ptr("x")}}); r.status != 403 || r.errCode(t) != "read_only" {
		t.Fatalf("change on a console without a token: %d %s", r.status, r.body)
	}

	// No key store: every route says so.
	h, err := New(Options{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	none := &kit{t: t, h: h, srv: srv}
	for _, c := range [][2]string{{"GET", "keys"}, {"POST", "keys"}, {"GET", "keys/key_x"}, {"PATCH", "keys/key_x"}, {"POST", "keys/key_x/rotate"}, {"DELETE", "keys/key_x"}} {
		r := none.do(req{method: c[0], path: APIPrefix + c[1], body: map[string]any{"name": "x"}, bearer: testToken})
		if r.status != 404 || r.errCode(t) != "no_keystore" {
			t.Fatalf("%v without a key store: %d %s", c, r.status, r.body)
		}
	}
	if r := none.do(req{path: PagePrefix + "keys", bearer: testToken}); r.status != 200 || !strings.Contains(string(r.body), "no key store") {
		t.Fatalf("Keys page without a key store: %d", r.status)
	}
}

// TestKeysPages renders the Keys page and a key's page on the server:
// names, fingerprints, limits, status, spend against the budget, the
// charts from the request log; never a key's text.
func TestKeysPages(t *testing.T) {
	rs, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	lg := requestlog.New(rs, requestlog.Options{})
	defer lg.Close(context.Background())
	k := newKeysKit(t, Options{RequestLog: lg})
	var a KeyBody
	k.call("POST", "keys", KeyRequest{Name: ptr("team-a"), Models: ptr([]string{"sim/echo"}), RPM: ptr(60), BudgetUSD: ptr(10.0)}, 201).json(t, &a)
	k.spend(a.Key.ID, "", 2.5, 0, 4)
	now := time.Now().UTC()
	var recs []requestlog.Record
	for i := range 30 {
		recs = append(recs, requestlog.Record{Time: now.Add(-time.Duration(i*20) * time.Minute), KeyName: "team-a", KeyFingerprint: a.Key.Fingerprint,
			Route: "POST /v1/chat/completions", Model: "sim/echo", Provider: "sim", Status: 200, InputTokens: 100, OutputTokens: 20, Cost: 0.01, Latency: time.Millisecond})
	}
	recs = append(recs, requestlog.Record{Time: now, KeyName: "team-b", Status: 200, Cost: 9})
	if err := rs.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}

	page := k.do(req{path: PagePrefix + "keys", bearer: testToken})
	body := string(page.body)
	if page.status != 200 || !strings.Contains(body, `data-id="`+a.Key.ID+`"`) || !strings.Contains(body, a.Key.Fingerprint) || !strings.Contains(body, "sim/echo") ||
		!strings.Contains(body, "$2.5000") || !strings.Contains(body, `<meter min="0" max="10"`) || !strings.Contains(body, `id="key-create"`) || !strings.Contains(body, `>Keys</a>`) {
		t.Fatalf("Keys page: %d %s", page.status, body)
	}
	if strings.Contains(body, a.Secret) {
		t.Fatal("the Keys page shows a key's text")
	}
	page = k.do(req{path: PagePrefix + "keys/" + a.Key.ID, bearer: testToken})
	body = string(page.body)
	for _, want := range []string{`id="chart-spend"`, `id="chart-requests"`, `id="chart-tokens"`, `data-series="input"`, `id="key-update"`, `id="key-rotate"`, `id="revoke"`, "4 calls", `value="60"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("key page lacks %s: %s", want, body)
		}
	}
	if strings.Contains(body, a.Secret) {
		t.Fatal("a key's page shows its text")
	}
	// The charts count this key's records only: 30 requests, $0.30.
	rows, err := rs.Usage(context.Background(), requestlog.UsageQuery{Filter: requestlog.Filter{Key: "team-a"}})
	if err != nil || len(rows) != 1 || rows[0].Requests != 30 {
		t.Fatalf("usage of team-a: %+v %v", rows, err)
	}
	if r := k.do(req{path: PagePrefix + "keys/key_nope", bearer: testToken}); r.status != 404 || !strings.Contains(string(r.body), "no key has the id") {
		t.Fatalf("an unknown key's page: %d", r.status)
	}
}
