package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/keystore"
)

// keysServer is a console with a SQLite key store on loopback.
func keysServer(t *testing.T, token string) (string, *keystore.Store) {
	t.Helper()
	st, err := keystore.OpenSQLite(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h, err := console.New(console.Options{KeyStore: st, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL, st
}

// TestKeysCommand drives chorus keys against a console: create (the key
// printed once, on stdout alone), list, update, show with the ledger,
// rotate with grace, revoke; refusals exit 1 with the API's code, usage
// errors 2; no output but create's and rotate's holds a key's text.
func TestKeysCommand(t *testing.T) {
	const token = "op-token"
	addr, st := keysServer(t, token)
	ctx := context.Background()
	vars := map[string]string{"CHORUS_CONSOLE_ADDR": addr, "CHORUS_CONSOLE_TOKEN": token}
	var outs []string
	cli := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		code, out, errs := runCLI(t, ctx, vars, append([]string{"keys"}, args...)...)
		if code != wantCode {
			t.Fatalf("chorus keys %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, out, errs)
		}
		outs = append(outs, out+errs)
		return out, errs
	}

	out, errs := cli(0, "create", "--name", "team-a", "--models", "openai/gpt-4.1-mini, sim/echo", "--rpm", "600", "--tpm", "100000",
		"--concurrency", "8", "--budget", "50", "--budget-period", "month", "--drop-unsupported")
	secret := strings.TrimSpace(out)
	if !strings.HasPrefix(secret, "sk-chorus-") || strings.Contains(secret, "\n") || !strings.Contains(errs, "created team-a (key_") || !strings.Contains(errs, "shown once") {
		t.Fatalf("create: stdout %q stderr %q", out, errs)
	}
	k, err := st.ByName(ctx, "team-a")
	if err != nil || k.Hash != keystore.HashKey(secret) || k.RPM != 600 || k.TPM != 100000 || k.Concurrency != 8 || k.BudgetUSD != 50 ||
		k.BudgetPeriod != keystore.Monthly || !k.DropUnsupported || strings.Join(k.Models, ",") != "openai/gpt-4.1-mini,sim/echo" {
		t.Fatalf("stored %+v %v", k, err)
	}
	if !strings.Contains(errs, k.Fingerprint()) {
		t.Fatalf("create names no fingerprint: %q", errs)
	}
	// Spend settled through the ledger shows in list and show.
	month := time.Now().UTC().Format("2006-01")
	now := time.Now()
	if err := st.Register(ctx, "r1", now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Reserve(ctx, "r1", k.ID, month, keystore.ToNano(2), keystore.ToNano(2), now); err != nil {
		t.Fatal(err)
	}
	if err := st.Settle(ctx, "r1", []keystore.Settlement{{KeyID: k.ID, Period: month, Spent: keystore.ToNano(1.5), Release: keystore.ToNano(0.5), Calls: 7}}, now); err != nil {
		t.Fatal(err)
	}
	out, _ = cli(0, "list")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], k.ID) || !strings.Contains(lines[1], k.Fingerprint()) ||
		!strings.Contains(lines[1], "$1.5000 of $50") || !strings.Contains(lines[1], month) || !strings.Contains(lines[1], "active") {
		t.Fatalf("list:\n%s", out)
	}
	out, _ = cli(0, "list", "--json")
	var lb console.KeysBody
	if err := json.Unmarshal([]byte(out), &lb); err != nil || len(lb.Keys) != 1 || lb.Keys[0].Spend.Calls != 7 {
		t.Fatalf("list --json: %s (%v)", out, err)
	}

	// Update the named settings only (flags after the argument too).
	out, _ = cli(0, "update", k.ID, "--budget", "5", "--budget-period", "day", "--drop-unsupported=false")
	if !strings.Contains(out, "updated team-a") || !strings.Contains(out, "budget $5 per day") || !strings.Contains(out, "600 rpm") {
		t.Fatalf("update: %q", out)
	}
	if k, _ = st.Get(ctx, k.ID); k.BudgetUSD != 5 || k.BudgetPeriod != keystore.Daily || k.DropUnsupported || k.RPM != 600 || len(k.Models) != 2 {
		t.Fatalf("after update: %+v", k)
	}
	cli(0, "update", "--models", "", k.ID)
	if k, _ = st.Get(ctx, k.ID); len(k.Models) != 0 {
		t.Fatalf("--models '' should allow every model: %+v", k.Models)
	}
	out, _ = cli(0, "show", k.ID)
	for _, want := range []string{"key team-a (" + k.ID + "): active, fingerprint " + k.Fingerprint(), "every model", "budget $5 per day", "ledger:", month, "$1.5000", "resets "} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}

	// Rotate with grace: a new key printed, the old one still accepted.
	out, errs = cli(0, "rotate", k.ID, "--grace", "1h")
	rotated := strings.TrimSpace(out)
	if !strings.HasPrefix(rotated, "sk-chorus-") || rotated == secret || !strings.Contains(errs, "the previous key works until") {
		t.Fatalf("rotate: %q %q", out, errs)
	}
	k, _ = st.Get(ctx, k.ID)
	if !k.Accepts(keystore.HashKey(rotated), time.Now()) || !k.Accepts(keystore.HashKey(secret), time.Now()) {
		t.Fatal("after rotate --grace 1h both keys should work")
	}
	out, _ = cli(0, "revoke", k.ID)
	if !strings.Contains(out, "revoked team-a") {
		t.Fatalf("revoke: %q", out)
	}
	if k, _ = st.Get(ctx, k.ID); k.Live() {
		t.Fatal("not revoked")
	}

	// Refusals: exit 1 with the API's code.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"update", k.ID, "--rpm", "5"}, "revoked"},
		{[]string{"rotate", k.ID}, "revoked"},
		{[]string{"show", "key_nope"}, "unknown_key"},
		{[]string{"revoke", "key_nope"}, "unknown_key"},
		{[]string{"create", "--name", "team-a"}, "conflict"},
		{[]string{"create", "--name", "x", "--rpm", "-3"}, "rpm"},
		{[]string{"create", "--name", "x", "--budget-period", "weekly"}, "budget_period"},
		{[]string{"create", "--name", "x", "--token", "wrong"}, "unauthorized"},
	} {
		_, errs := cli(1, c.args...)
		if !strings.Contains(errs, c.want) {
			t.Fatalf("%v: %q, want %q", c.args, errs, c.want)
		}
	}
	// Usage errors: exit 2.
	for _, args := range [][]string{{}, {"frobnicate"}, {"create"}, {"show"}, {"list", "extra"}, {"rotate", k.ID, "--rpm", "3"}, {"update", k.ID, "--grace", "1h"},
		{"list", "--addr", "ftp://x"}, {"create", "--name", "x", "--rpm", "many"}} {
		cli(2, args...)
	}
	if code, _, errs := runCLI(t, ctx, vars, "keys", "-h"); code != 0 || !strings.Contains(errs, "chorus keys <list|show|create|update|rotate|revoke>") {
		t.Fatalf("keys -h: %d %q", code, errs)
	}
	if code, out, _ := runCLI(t, ctx, vars, "help"); code != 0 || !strings.Contains(out, "  keys ") {
		t.Fatalf("chorus help names no keys command: %q", out)
	}

	// No output but create's and rotate's holds a key's text.
	for _, o := range outs {
		for _, s := range []string{secret, rotated} {
			if strings.Contains(o, s) && strings.TrimSpace(strings.Split(o, "\n")[0]) != s {
				t.Fatalf("an output holds a key's text: %q", o)
			}
		}
	}
}

// TestKeysCommandReadOnly: a console without a token refuses every change
// (exit 1, read_only) and a console without a key store says so.
func TestKeysCommandReadOnly(t *testing.T) {
	addr, _ := keysServer(t, "")
	ctx := context.Background()
	vars := map[string]string{"CHORUS_CONSOLE_ADDR": addr}
	if code, _, errs := runCLI(t, ctx, vars, "keys", "create", "--name", "x"); code != 1 || !strings.Contains(errs, "read_only") {
		t.Fatalf("create on a read-only console: %d %q", code, errs)
	}
	h, err := console.New(console.Options{Token: "t", Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	if code, _, errs := runCLI(t, ctx, map[string]string{"CHORUS_CONSOLE_ADDR": srv.URL}, "keys", "list"); code != 1 || !strings.Contains(errs, "no_keystore") {
		t.Fatalf("list without a key store: %d %q", code, errs)
	}
}
