package console

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/keystore"
)

// The gateway keys' admin API (Options.KeyStore):
//
//	GET    /api/console/keys               {"keys": [KeyView...]}
//	POST   /api/console/keys               KeyRequest -> 201 {"key", "secret"}
//	GET    /api/console/keys/{id}          {"key", "ledger": [LedgerRow...]}
//	PATCH  /api/console/keys/{id}          KeyRequest (any subset) -> {"key"}
//	POST   /api/console/keys/{id}/rotate   {"grace": "1h"} -> {"key", "secret"}
//	POST   /api/console/keys/{id}/revoke   -> {"key"}
//	DELETE /api/console/keys/{id}          -> {"key"} (a revoke: the key and its ledger are kept)
//
// Reads need the console's read access, changes its operator token (and
// the CSRF checks of every state change). A key's text appears in one
// answer only, the "secret" of its creation or rotation; everything else
// names it by its fingerprint. Errors: a malformed body or a field that is
// unknown or not valid is a 400 bad_request whose "field" names it; a
// duplicate name a 409 conflict; an unknown id a 404 unknown_key; a change
// of a revoked key a 409 revoked (revoking it again changes nothing and
// answers 200); without a key store every route is a 404 no_keystore.

// KeyView is a gateway key as the admin API shows it: never its hash or
// text, its fingerprint only.
type KeyView struct {
	ID              string   `json:"id"`
	Name            string   `json:"name"`
	Fingerprint     string   `json:"fingerprint"`
	Models          []string `json:"models"`
	RPM             int      `json:"rpm"`
	TPM             int      `json:"tpm"`
	Concurrency     int      `json:"concurrency"`
	BudgetUSD       float64  `json:"budget_usd"`
	BudgetPeriod    string   `json:"budget_period"` // total, day or month
	DropUnsupported bool     `json:"drop_unsupported"`
	// Status is active, rotating (the previous key still works until
	// PreviousValidUntil) or revoked.
	Status             string     `json:"status"`
	Created            time.Time  `json:"created"`
	Updated            time.Time  `json:"updated"`
	Revoked            *time.Time `json:"revoked,omitempty"`
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty"`
	// Spend is the key's ledger for the current period.
	Spend SpendView `json:"spend"`
}

// SpendView is a key's spend in one budget period.
type SpendView struct {
	// Period is the ledger's name of the period (keystore.Period.ID):
	// "" for a total, "2026-12-04" for a day, "2026-12" for a month.
	Period string `json:"period"`
	// SpentUSD is what the ledger holds; ReservedUSD what live replicas
	// hold for calls in flight or to come.
	SpentUSD    float64 `json:"spent_usd"`
	ReservedUSD float64 `json:"reserved_usd"`
	Calls       int64   `json:"calls"`
	// Resets is when the period ends (absent for a total).
	Resets *time.Time `json:"resets,omitempty"`
}

// LedgerRow is one period of a key's ledger.
type LedgerRow struct {
	Period   string  `json:"period"`
	SpentUSD float64 `json:"spent_usd"`
	Calls    int64   `json:"calls"`
}

// KeysBody answers GET /api/console/keys.
type KeysBody struct {
	Keys []KeyView `json:"keys"`
}

// KeyBody answers a key's read or change; Secret is the key's text, on
// its creation and rotation only (shown once: the store keeps its hash);
// Ledger, on GET of one key, every period of its ledger, oldest first.
type KeyBody struct {
	Key    KeyView     `json:"key"`
	Secret string      `json:"secret,omitempty"`
	Ledger []LedgerRow `json:"ledger,omitempty"`
}

// KeyRequest is the body of POST /api/console/keys (Name is required) and
// of PATCH /api/console/keys/{id} (any subset; an absent field is left as
// it is). BudgetPeriod is total, day or month.
type KeyRequest struct {
	Name            *string   `json:"name,omitempty"`
	Models          *[]string `json:"models,omitempty"`
	RPM             *int      `json:"rpm,omitempty"`
	TPM             *int      `json:"tpm,omitempty"`
	Concurrency     *int      `json:"concurrency,omitempty"`
	BudgetUSD       *float64  `json:"budget_usd,omitempty"`
	BudgetPeriod    *string   `json:"budget_period,omitempty"`
	DropUnsupported *bool     `json:"drop_unsupported,omitempty"`
}

// RotateRequest is the body of POST /api/console/keys/{id}/rotate: how
// long the previous key keeps working, a Go duration (default 0: not at
// all).
type RotateRequest struct {
	Grace string `json:"grace,omitempty"`
}

// errNoKeyStore: the console has no key store.
var errNoKeyStore = errors.New("this console has no key store (chorus serve keeps one; console.Options.KeyStore from Go)")

func (h *Handler) keyRoutes(m *http.ServeMux, read, write func(http.HandlerFunc) http.Handler) {
	m.Handle("GET "+APIPrefix+"keys", read(h.apiKeys))
	m.Handle("GET "+APIPrefix+"keys/{id}", read(h.apiKey))
	m.Handle("POST "+APIPrefix+"keys", write(h.apiCreateKey))
	m.Handle("PATCH "+APIPrefix+"keys/{id}", write(h.apiUpdateKey))
	m.Handle("POST "+APIPrefix+"keys/{id}/rotate", write(h.apiRotateKey))
	m.Handle("POST "+APIPrefix+"keys/{id}/revoke", write(h.apiRevokeKey))
	m.Handle("DELETE "+APIPrefix+"keys/{id}", write(h.apiRevokeKey))
}

// keyError answers an error of the key store.
func (h *Handler) keyError(w http.ResponseWriter, err error) {
	var fe *keystore.FieldError
	switch {
	case errors.Is(err, errNoKeyStore):
		writeError(w, http.StatusNotFound, "no_keystore", err.Error())
	case errors.As(err, &fe):
		writeJSON(w, http.StatusBadRequest, ErrorBody{Error: ErrorInfo{Code: "bad_request", Message: fe.Field + ": " + fe.Msg, Field: fe.Field}})
	case errors.Is(err, keystore.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown_key", "no key has that id")
	case errors.Is(err, keystore.ErrRevoked):
		writeError(w, http.StatusConflict, "revoked", "the key is revoked: it cannot be changed")
	case errors.Is(err, keystore.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", "a key with that name exists")
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusGatewayTimeout, "timeout", err.Error())
	default:
		h.log.Warn("console: key store failed", "error", err.Error())
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// decodeKeyBody reads a JSON body of at most 64 KiB into v, refusing
// unknown fields; a 400 names the field at fault. An empty body is {}
// when empty is true.
func decodeKeyBody(w http.ResponseWriter, r *http.Request, v any, empty bool) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("one JSON object wanted, found more")
	}
	if err == nil || (empty && errors.Is(err, io.EOF)) {
		return true
	}
	field := "body"
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		field = te.Field
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field = strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
	}
	writeJSON(w, http.StatusBadRequest, ErrorBody{Error: ErrorInfo{Code: "bad_request", Message: field + ": " + err.Error(), Field: field}})
	return false
}

// keyView is k as the API shows it, with its spend of the period now
// falls in.
func (h *Handler) keyView(ctx context.Context, k keystore.Key, now time.Time) (KeyView, error) {
	v := KeyView{ID: k.ID, Name: k.Name, Fingerprint: k.Fingerprint(), Models: append([]string{}, k.Models...),
		RPM: k.RPM, TPM: k.TPM, Concurrency: k.Concurrency, BudgetUSD: k.BudgetUSD, BudgetPeriod: periodName(k.BudgetPeriod),
		DropUnsupported: k.DropUnsupported, Status: "active", Created: k.Created, Updated: k.Updated}
	if !k.Revoked.IsZero() {
		t := k.Revoked
		v.Revoked, v.Status = &t, "revoked"
	} else if !k.PrevUntil.IsZero() && now.Before(k.PrevUntil) {
		t := k.PrevUntil
		v.PreviousValidUntil, v.Status = &t, "rotating"
	}
	period := k.BudgetPeriod.ID(now)
	sp, err := h.opt.KeyStore.SpendOf(ctx, k.ID, period)
	if err != nil {
		return v, err
	}
	v.Spend = SpendView{Period: period, SpentUSD: keystore.FromNano(sp.Spent), ReservedUSD: keystore.FromNano(sp.Reserved), Calls: sp.Calls}
	if t := k.BudgetPeriod.Resets(now); !t.IsZero() {
		v.Spend.Resets = &t
	}
	return v, nil
}

func periodName(p keystore.Period) string {
	if p == keystore.Total {
		return "total"
	}
	return string(p)
}

// keysView lists every key with its spend.
func (h *Handler) keysView(ctx context.Context) (KeysBody, error) {
	if h.opt.KeyStore == nil {
		return KeysBody{}, errNoKeyStore
	}
	keys, err := h.opt.KeyStore.List(ctx)
	if err != nil {
		return KeysBody{}, err
	}
	now := h.now()
	out := KeysBody{Keys: make([]KeyView, 0, len(keys))}
	for _, k := range keys {
		v, err := h.keyView(ctx, k, now)
		if err != nil {
			return KeysBody{}, err
		}
		out.Keys = append(out.Keys, v)
	}
	return out, nil
}

// oneKey is key id with its whole ledger.
func (h *Handler) oneKey(ctx context.Context, id string) (KeyBody, error) {
	if h.opt.KeyStore == nil {
		return KeyBody{}, errNoKeyStore
	}
	k, err := h.opt.KeyStore.Get(ctx, id)
	if err != nil {
		return KeyBody{}, err
	}
	v, err := h.keyView(ctx, k, h.now())
	if err != nil {
		return KeyBody{}, err
	}
	led, err := h.opt.KeyStore.Ledger(ctx, id)
	if err != nil {
		return KeyBody{}, err
	}
	out := KeyBody{Key: v, Ledger: make([]LedgerRow, 0, len(led))}
	for _, sp := range led {
		out.Ledger = append(out.Ledger, LedgerRow{Period: sp.Period, SpentUSD: keystore.FromNano(sp.Spent), Calls: sp.Calls})
	}
	return out, nil
}

func (h *Handler) apiKeys(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.keysView(ctx)
	if err != nil {
		h.keyError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (h *Handler) apiKey(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	v, err := h.oneKey(ctx, r.PathValue("id"))
	if err != nil {
		h.keyError(w, err)
		return
	}
	if v.Ledger == nil {
		v.Ledger = []LedgerRow{}
	}
	writeJSON(w, http.StatusOK, struct {
		Key    KeyView     `json:"key"`
		Ledger []LedgerRow `json:"ledger"`
	}{v.Key, v.Ledger})
}

// update is the keystore.Update a request asks for.
func (q *KeyRequest) update() (keystore.Update, error) {
	u := keystore.Update{Name: q.Name, Models: q.Models, RPM: q.RPM, TPM: q.TPM, Concurrency: q.Concurrency,
		BudgetUSD: q.BudgetUSD, DropUnsupported: q.DropUnsupported}
	if q.Models != nil {
		ms := make([]string, 0, len(*q.Models))
		for _, m := range *q.Models {
			ms = append(ms, strings.TrimSpace(m))
		}
		u.Models = &ms
	}
	if q.BudgetPeriod != nil {
		p, err := keystore.ParsePeriod(*q.BudgetPeriod)
		if err != nil {
			return u, err
		}
		u.BudgetPeriod = &p
	}
	return u, nil
}

func (h *Handler) apiCreateKey(w http.ResponseWriter, r *http.Request) {
	if h.opt.KeyStore == nil {
		h.keyError(w, errNoKeyStore)
		return
	}
	var q KeyRequest
	if !decodeKeyBody(w, r, &q, false) {
		return
	}
	if q.Name == nil {
		h.keyError(w, &keystore.FieldError{Field: "name", Msg: "required"})
		return
	}
	u, err := q.update()
	if err != nil {
		h.keyError(w, err)
		return
	}
	secret := keystore.NewSecret()
	k := keystore.Key{Hash: keystore.HashKey(secret)}
	u.Name = q.Name
	u.Apply(&k)
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	now := h.now()
	k, err = h.opt.KeyStore.Create(ctx, k, now)
	if err != nil {
		h.keyError(w, err)
		return
	}
	h.log.Info("console: key created", "key", k.ID, "name", k.Name, "fingerprint", k.Fingerprint())
	h.answerKey(w, ctx, http.StatusCreated, k, secret)
}

// answerKey answers k (and its new secret, if any).
func (h *Handler) answerKey(w http.ResponseWriter, ctx context.Context, status int, k keystore.Key, secret string) {
	v, err := h.keyView(ctx, k, h.now())
	if err != nil {
		h.keyError(w, err)
		return
	}
	writeJSON(w, status, KeyBody{Key: v, Secret: secret})
}

func (h *Handler) apiUpdateKey(w http.ResponseWriter, r *http.Request) {
	if h.opt.KeyStore == nil {
		h.keyError(w, errNoKeyStore)
		return
	}
	var q KeyRequest
	if !decodeKeyBody(w, r, &q, false) {
		return
	}
	u, err := q.update()
	if err != nil {
		h.keyError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	k, err := h.opt.KeyStore.Update(ctx, r.PathValue("id"), u, h.now())
	if err != nil {
		h.keyError(w, err)
		return
	}
	h.log.Info("console: key updated", "key", k.ID, "name", k.Name, "fingerprint", k.Fingerprint())
	h.answerKey(w, ctx, http.StatusOK, k, "")
}

func (h *Handler) apiRotateKey(w http.ResponseWriter, r *http.Request) {
	if h.opt.KeyStore == nil {
		h.keyError(w, errNoKeyStore)
		return
	}
	var q RotateRequest
	if !decodeKeyBody(w, r, &q, true) {
		return
	}
	var grace time.Duration
	if q.Grace != "" {
		var err error
		if grace, err = time.ParseDuration(q.Grace); err != nil {
			h.keyError(w, &keystore.FieldError{Field: "grace", Msg: "want a Go duration such as 1h or 30m"})
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	secret := keystore.NewSecret()
	k, err := h.opt.KeyStore.Rotate(ctx, r.PathValue("id"), keystore.HashKey(secret), grace, h.now())
	if err != nil {
		h.keyError(w, err)
		return
	}
	h.log.Info("console: key rotated", "key", k.ID, "name", k.Name, "fingerprint", k.Fingerprint(), "grace", grace.String())
	h.answerKey(w, ctx, http.StatusOK, k, secret)
}

func (h *Handler) apiRevokeKey(w http.ResponseWriter, r *http.Request) {
	if h.opt.KeyStore == nil {
		h.keyError(w, errNoKeyStore)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), apiTimeout)
	defer cancel()
	k, err := h.opt.KeyStore.Revoke(ctx, r.PathValue("id"), h.now())
	if err != nil {
		h.keyError(w, err)
		return
	}
	h.log.Info("console: key revoked", "key", k.ID, "name", k.Name, "fingerprint", k.Fingerprint())
	h.answerKey(w, ctx, http.StatusOK, k, "")
}
