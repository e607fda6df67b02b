package keystore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Period is how often a key's budget starts again: never (a total), every
// UTC day, or every UTC month (LiteLLM's budget_duration).
type Period string

// The periods of a budget.
const (
	Total   Period = ""
	Daily   Period = "day"
	Monthly Period = "month"
)

// ParsePeriod reads "", "total", "day", "daily", "month" or "monthly".
func ParsePeriod(s string) (Period, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "total", "none":
		return Total, nil
	case "day", "daily", "1d":
		return Daily, nil
	case "month", "monthly", "1mo":
		return Monthly, nil
	}
	return "", &FieldError{Field: "budget_period", Msg: fmt.Sprintf("%q is not total, day or month", s)}
}

// ID is the ledger's name of the period t falls in: "" for a total,
// "2026-12-04" for a day, "2026-12" for a month (UTC).
func (p Period) ID(t time.Time) string {
	switch p {
	case Daily:
		return t.UTC().Format("2006-01-02")
	case Monthly:
		return t.UTC().Format("2006-01")
	}
	return ""
}

// Resets is when the period that holds t ends (zero for a total).
func (p Period) Resets(t time.Time) time.Time {
	t = t.UTC()
	switch p {
	case Daily:
		return time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
	case Monthly:
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// Key is one gateway key as the store keeps it: its SHA-256, never its
// text.
type Key struct {
	// ID names the key in the admin API and the ledger ("key_..."); it is
	// not secret and never changes, not even when the key is rotated.
	ID string `json:"id"`
	// Name is the operator's name for it, unique in the store.
	Name string `json:"name"`
	// Hash is the SHA-256 of the key's text.
	Hash [32]byte `json:"-"`
	// Models the key may call (empty: every model); see gateway.Key.
	Models []string `json:"models"`
	// RPM, TPM and Concurrency are the key's limits for the whole fleet
	// (zero: none).
	RPM         int `json:"rpm"`
	TPM         int `json:"tpm"`
	Concurrency int `json:"concurrency"`
	// BudgetUSD is what the key may spend per BudgetPeriod (zero: no
	// budget).
	BudgetUSD    float64 `json:"budget_usd"`
	BudgetPeriod Period  `json:"budget_period"`
	// DropUnsupported is gateway.Key.DropUnsupported.
	DropUnsupported bool `json:"drop_unsupported"`
	// Created and Updated are when the key was created and last changed;
	// Revoked, when not zero, when it was revoked (it is kept, refused).
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	Revoked time.Time `json:"revoked,omitzero"`
	// PrevHash is the hash a rotation replaced: it keeps working until
	// PrevUntil.
	PrevHash  [32]byte  `json:"-"`
	PrevUntil time.Time `json:"previous_valid_until,omitzero"`
	// Rev orders the store's changes: every change of any key takes the
	// next one (Changes).
	Rev int64 `json:"rev"`
}

// Fingerprint names the key without revealing it: the first 16 hex digits
// of its SHA-256, as the request log and the runtime's telemetry name keys.
func (k *Key) Fingerprint() string { return Fingerprint(k.Hash) }

// Fingerprint is the first 16 hex digits of a key hash.
func Fingerprint(h [32]byte) string { return hex.EncodeToString(h[:8]) }

// Live reports whether the key is served at t: not revoked.
func (k *Key) Live() bool { return k.Revoked.IsZero() }

// Accepts reports whether a client presenting a key of hash h at t
// authenticates as k: its hash, or the hash it was rotated from within
// the grace period.
func (k *Key) Accepts(h [32]byte, t time.Time) bool {
	if !k.Live() {
		return false
	}
	return h == k.Hash || (k.PrevHash != ([32]byte{}) && h == k.PrevHash && t.Before(k.PrevUntil))
}

// HashKey is the SHA-256 of a key's text.
func HashKey(text string) [32]byte { return sha256.Sum256([]byte(text)) }

// NewSecret returns a new random key text, "sk-chorus-" and 40 base32
// characters (200 bits): show it once, keep only HashKey of it.
func NewSecret() string {
	var b [25]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "sk-chorus-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

func newID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "key_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// Errors the store returns; match them with errors.Is (a *FieldError with
// errors.As).
var (
	// ErrNotFound: no key has that id (a 404).
	ErrNotFound = errors.New("keystore: no such key")
	// ErrConflict: a key with that name or hash exists (a 409).
	ErrConflict = errors.New("keystore: a key with that name or hash exists")
	// ErrRevoked: the key is revoked and cannot be changed (a 409).
	ErrRevoked = errors.New("keystore: the key is revoked")
)

// FieldError names a field of a key that is not valid (a 400).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "keystore: " + e.Field + ": " + e.Msg }

// validate checks what a key may hold.
func (k *Key) validate() error {
	switch {
	case strings.TrimSpace(k.Name) == "" || len(k.Name) > 200:
		return &FieldError{Field: "name", Msg: "want 1 to 200 characters"}
	case k.Hash == ([32]byte{}):
		return &FieldError{Field: "hash", Msg: "missing"}
	case k.RPM < 0:
		return &FieldError{Field: "rpm", Msg: "must not be negative"}
	case k.TPM < 0:
		return &FieldError{Field: "tpm", Msg: "must not be negative"}
	case k.Concurrency < 0:
		return &FieldError{Field: "concurrency", Msg: "must not be negative"}
	case k.BudgetUSD < 0 || math.IsNaN(k.BudgetUSD) || math.IsInf(k.BudgetUSD, 0) || k.BudgetUSD > 1e9:
		return &FieldError{Field: "budget_usd", Msg: "want a finite amount from 0 to 1e9"}
	}
	if _, err := ParsePeriod(string(k.BudgetPeriod)); err != nil {
		return err
	}
	for i, m := range k.Models {
		if strings.TrimSpace(m) == "" {
			return &FieldError{Field: fmt.Sprintf("models[%d]", i), Msg: "empty"}
		}
	}
	return nil
}

// NanoUSD is an amount of US dollars in billionths, as the ledger keeps
// money: sums of integers are exact where sums of floats drift.
type NanoUSD = int64

// ToNano converts dollars to NanoUSD, rounding to the nearest.
func ToNano(usd float64) NanoUSD { return NanoUSD(math.Round(usd * 1e9)) }

// FromNano converts NanoUSD to dollars.
func FromNano(n NanoUSD) float64 { return float64(n) / 1e9 }

// Update changes some of a key's settings; a nil field is left as it is.
type Update struct {
	Models          *[]string
	RPM, TPM        *int
	Concurrency     *int
	BudgetUSD       *float64
	BudgetPeriod    *Period
	DropUnsupported *bool
	Name            *string
}

// Apply sets on k what u names (Store.Update does it under the key's
// lock; a caller building a Key to Create may too).
func (u *Update) Apply(k *Key) {
	if u.Models != nil {
		k.Models = append([]string(nil), (*u.Models)...)
	}
	if u.RPM != nil {
		k.RPM = *u.RPM
	}
	if u.TPM != nil {
		k.TPM = *u.TPM
	}
	if u.Concurrency != nil {
		k.Concurrency = *u.Concurrency
	}
	if u.BudgetUSD != nil {
		k.BudgetUSD = *u.BudgetUSD
	}
	if u.BudgetPeriod != nil {
		k.BudgetPeriod = *u.BudgetPeriod
	}
	if u.DropUnsupported != nil {
		k.DropUnsupported = *u.DropUnsupported
	}
	if u.Name != nil {
		k.Name = *u.Name
	}
}
