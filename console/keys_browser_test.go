package console

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/requestlog"
)

// TestBrowserKeys drives the Keys pages in chromium as an operator: log
// in, create a key with the form (its text shown once, its hash stored),
// open its page, set its budget and limits, watch its spend rise as a
// replica settles through the ledger (no reload), rotate it with grace,
// revoke it; the Keys page and the key's page are captured.
func TestBrowserKeys(t *testing.T) {
	ctx := browser(t)
	dir := artifacts(t)
	plog := watchConsole(t, ctx)

	rs, err := requestlog.OpenSQLite(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	lg := requestlog.New(rs, requestlog.Options{})
	defer lg.Close(context.Background())
	k := newKeysKit(t, Options{RequestLog: lg})
	month := time.Now().UTC().Format("2006-01")
	today := time.Now().UTC().Format("2006-01-02")

	// Another key, spending most of its daily budget, and the request log
	// of the last hours of both.
	var other KeyBody
	k.call("POST", "keys", KeyRequest{Name: ptr("batch-jobs"), Models: ptr([]string{"openai/gpt-4.1-mini"}), TPM: ptr(2000000), BudgetUSD: ptr(20.0), BudgetPeriod: ptr("day")}, 201).json(t, &other)
	k.spend(other.Key.ID, today, 14.2, 0.8, 5400)
	now := time.Now().UTC()
	var recs []requestlog.Record
	for i := range 600 {
		name := []string{"team-a", "batch-jobs"}[i%2]
		recs = append(recs, requestlog.Record{Time: now.Add(-time.Duration(i*2) * time.Minute), KeyName: name, Route: "POST /v1/chat/completions",
			Model: "openai/gpt-4.1-mini", Provider: "openai", Status: 200, InputTokens: 800 + 300*(i%7), CachedTokens: 200 * (i % 3), OutputTokens: 150 + 20*(i%5),
			Cost: 0.002 + 0.0004*float64(i%7), Latency: 300 * time.Millisecond})
		if i%23 == 0 {
			recs[len(recs)-1].Status, recs[len(recs)-1].ErrorType = 429, "rate_limit"
		}
	}
	if err := rs.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}

	within(t, ctx, 20*time.Second, "login",
		chromedp.Navigate(k.srv.URL+PagePrefix+"keys"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#key-create")),
	)
	plog.clean(t, "login, keys")

	// Create team-a with the form: the secret is shown once.
	within(t, ctx, 20*time.Second, "create",
		chromedp.SendKeys(chromedp.CSS(`#key-create input[name=name]`), "team-a"),
		chromedp.SendKeys(chromedp.CSS(`#key-create input[name=models]`), "openai/gpt-4.1-mini, anthropic/claude-haiku-4-5"),
		chromedp.SendKeys(chromedp.CSS(`#key-create input[name=rpm]`), "600"),
		chromedp.SendKeys(chromedp.CSS(`#key-create input[name=budget_usd]`), "50"),
		chromedp.SetValue(chromedp.CSS(`#key-create select[name=budget_period]`), "month"),
		chromedp.Click(chromedp.CSS("#create-submit")),
		chromedp.WaitVisible(chromedp.CSS("#new-secret")),
	)
	secret := evalJS[string](t, ctx, `document.querySelector('#secret-text').textContent`)
	a, err := k.st.ByName(context.Background(), "team-a")
	if err != nil || !strings.HasPrefix(secret, "sk-chorus-") || a.Hash != keystore.HashKey(secret) {
		t.Fatalf("created %+v (%v): the page showed %q, not the key whose hash is stored", a, err, secret)
	}
	if a.RPM != 600 || a.BudgetUSD != 50 || a.BudgetPeriod != keystore.Monthly || strings.Join(a.Models, ",") != "openai/gpt-4.1-mini,anthropic/claude-haiku-4-5" {
		t.Fatalf("created %+v", a)
	}
	waitText(t, ctx, `#keys tr[data-id="`+a.ID+`"] .spend-text`, "of $50.0000 this month")
	plog.clean(t, "create")
	// A form's refusal names the field.
	within(t, ctx, 10*time.Second, "duplicate",
		chromedp.SendKeys(chromedp.CSS(`#key-create input[name=name]`), "team-a"),
		chromedp.Click(chromedp.CSS("#create-submit")),
	)
	waitText(t, ctx, "#key-result", "conflict")
	plog.mu.Lock()
	plog.errs = nil // the browser logs the 409 it was answered
	plog.mu.Unlock()

	// The key's page: set its budget and limits.
	within(t, ctx, 20*time.Second, "key page",
		chromedp.Click(chromedp.CSS("#new-key-link")),
		chromedp.WaitVisible(chromedp.CSS("#key-update")),
	)
	if html := evalJS[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, secret) {
		t.Fatal("the key's page shows its text")
	}
	within(t, ctx, 20*time.Second, "set the budget",
		chromedp.SetValue(chromedp.CSS(`#key-update input[name=budget_usd]`), "5"),
		chromedp.SetValue(chromedp.CSS(`#key-update input[name=concurrency]`), "4"),
		chromedp.Click(chromedp.CSS("#update-submit")),
	)
	waitText(t, ctx, "#key-result", "saved")
	waitText(t, ctx, "#k-spend .spend-text", "$0.0000 of $5.0000 this month")
	waitText(t, ctx, "#k-limits", "600 rpm, 0 tpm, 4 at once")
	if a, _ = k.st.Get(context.Background(), a.ID); a.BudgetUSD != 5 || a.Concurrency != 4 || a.RPM != 600 {
		t.Fatalf("after the form: %+v", a)
	}
	plog.clean(t, "set budget")

	// Watch its spend: a replica settles $3.40 over 120 calls and holds
	// $0.35 more; the page follows without a reload.
	k.spend(a.ID, month, 3.4, 0.35, 120)
	waitText(t, ctx, "#k-spend .spend-text", "$3.4000 + $0.3500 reserved of $5.0000 this month · 120 calls")
	if v := evalJS[float64](t, ctx, `document.querySelector('#k-spend meter').value`); v != 3.4 {
		t.Fatalf("the spend bar shows %v, want 3.4", v)
	}
	waitText(t, ctx, "#ledger tbody", month+"$3.4000120")
	for _, c := range []string{"chart-spend", "chart-requests", "chart-tokens"} {
		if n := evalJS[int](t, ctx, `document.querySelectorAll('#`+c+` polyline.series').length`); n == 0 {
			t.Errorf("%s: no series drawn", c)
		}
	}
	shoot(t, ctx, dir, "key")
	plog.clean(t, "spend")

	// The Keys page: both keys, their spend against their budgets.
	within(t, ctx, 20*time.Second, "keys page",
		chromedp.Navigate(k.srv.URL+PagePrefix+"keys"),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-id="`+a.ID+`"]`)),
	)
	waitText(t, ctx, `#keys tr[data-id="`+other.Key.ID+`"] .spend-text`, "$14.2000 + $0.8000 reserved of $20.0000 today")
	if html := evalJS[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, secret) || !strings.Contains(html, a.Fingerprint()) {
		t.Fatal("the Keys page shows a key's text, or not its fingerprint")
	}
	shoot(t, ctx, dir, "keys")
	plog.clean(t, "keys")

	// Rotate it with an hour's grace: the new text shown once, both work.
	within(t, ctx, 20*time.Second, "rotate",
		chromedp.Navigate(k.srv.URL+PagePrefix+"keys/"+a.ID),
		chromedp.WaitVisible(chromedp.CSS("#key-rotate")),
		chromedp.SendKeys(chromedp.CSS(`#key-rotate input[name=grace]`), "1h"),
		chromedp.Click(chromedp.CSS("#rotate-submit")),
		chromedp.WaitVisible(chromedp.CSS("#new-secret")),
	)
	rotated := evalJS[string](t, ctx, `document.querySelector('#secret-text').textContent`)
	waitText(t, ctx, "#k-status", "rotating (the previous key works until ")
	if a, _ = k.st.Get(context.Background(), a.ID); rotated == secret || !a.Accepts(keystore.HashKey(rotated), time.Now()) || !a.Accepts(keystore.HashKey(secret), time.Now()) {
		t.Fatalf("after Rotate with 1h of grace: %+v (the page showed %q)", a, rotated)
	}
	waitText(t, ctx, "#k-fingerprint", a.Fingerprint())
	plog.clean(t, "rotate")

	// Revoke it: the page says so, the store refuses the key.
	within(t, ctx, 20*time.Second, "revoke",
		chromedp.Click(chromedp.CSS("#revoke")),
	)
	waitText(t, ctx, "#key-result", "revoked")
	waitText(t, ctx, "#k-status", "revoked at ")
	if a, _ = k.st.Get(context.Background(), a.ID); a.Live() || a.Accepts(keystore.HashKey(secret), time.Now()) || a.Accepts(keystore.HashKey(rotated), time.Now()) {
		t.Fatalf("after Revoke: %+v", a)
	}
	if dis := evalJS[bool](t, ctx, `document.querySelector('#update-submit').disabled && document.querySelector('#revoke').disabled`); !dis {
		t.Fatal("a revoked key's forms stay enabled")
	}
	within(t, ctx, 20*time.Second, "keys page after revoke",
		chromedp.Navigate(k.srv.URL+PagePrefix+"keys"),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-id="`+a.ID+`"]`)),
	)
	waitText(t, ctx, `#keys tr[data-id="`+a.ID+`"] td.status`, "revoked")
	plog.clean(t, "revoked")
}
