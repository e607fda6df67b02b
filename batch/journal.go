package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// JournalPath is where a native job records its remote batches: next to
// the output, "<output>.batches".
func JournalPath(output string) string { return output + ".batches" }

// journalRecord is one line of the journal.
//
//	intent     written (and synced) before a batch is submitted: its key,
//	           provider, model, the token the batch carries (OpenAI
//	           metadata chorus_job, Gemini displayName) and its custom_ids
//	submitted  written (and synced) as soon as the provider named the id
//	ended      written once every result of the batch is in the output;
//	           Retry lists the custom_ids it expired or cancelled (not
//	           written, so a resumed job runs them live)
type journalRecord struct {
	Op       string    `json:"op"`
	Key      string    `json:"key"`
	Provider string    `json:"provider,omitempty"`
	Model    string    `json:"model,omitempty"`
	Token    string    `json:"token,omitempty"`
	IDs      []string  `json:"ids,omitempty"`
	At       time.Time `json:"at,omitzero"`
	BatchID  string    `json:"batch_id,omitempty"`
	Retry    []string  `json:"retry,omitempty"`
	// Endpoint is the batch's endpoint when it is not chat completions.
	Endpoint string `json:"endpoint,omitempty"`
}

// remoteBatch is what the journal knows of one batch.
type remoteBatch struct {
	key, provider, model, token string
	endpoint                    string
	ids                         []string
	at                          time.Time
	batchID                     string
	ended                       bool
	retry                       []string
}

// journal is the append-only record of a native job's remote batches,
// with the same crash rule as the output: one write per whole line,
// synced before the step it records goes on.
type journal struct {
	mu      sync.Mutex
	f       *os.File
	path    string
	batches map[string]*remoteBatch
	order   []string
}

// openJournal reads (Resume) or starts (Create, Overwrite) the journal of
// a job. In Create mode a non-empty journal is refused like a non-empty
// output: a killed native job must be resumed, or it would submit twice.
func openJournal(path string, mode Mode) (*journal, error) {
	j := &journal{path: path, batches: map[string]*remoteBatch{}}
	switch mode {
	case Create:
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return nil, &OutputError{Path: path, Msg: "records remote batches of an earlier run", Err: ErrOutputExists}
		}
	case Resume:
		if err := j.load(); err != nil {
			return nil, err
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if mode != Resume {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, &OutputError{Path: path, Err: err}
	}
	j.f = f
	return j, nil
}

// openJournalReadOnly reads a journal without opening it for writing (a
// missing one is empty).
func openJournalReadOnly(path string) (*journal, error) {
	j := &journal{path: path, batches: map[string]*remoteBatch{}}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return j, nil
	}
	return j, j.load()
}

// PendingError refuses to resume a job live while its journal records
// remote batches not yet ended: their lines would run twice. Resume it
// with Native (to wait for them) or Native.Cancel.
type PendingError struct {
	Path    string
	Batches int
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s records %d remote batch(es) not yet ended: resume with native batches to wait for them, or cancel them", e.Path, e.Batches)
}

func (j *journal) load() error {
	f, err := os.OpenFile(j.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &OutputError{Path: j.path, Err: err}
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var whole int64
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 { // torn by a kill: the step it recorded never went on
				if err := f.Truncate(whole); err != nil {
					return &OutputError{Path: j.path, Msg: "cutting the unterminated last line", Err: err}
				}
			}
			return nil
		}
		if err != nil {
			return &OutputError{Path: j.path, Err: err}
		}
		whole += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec journalRecord
		if err := json.Unmarshal(line, &rec); err != nil || rec.Key == "" {
			return &OutputError{Path: j.path, Line: n, Msg: "not a batch journal line; refusing to resume with it"}
		}
		j.apply(rec)
	}
}

func (j *journal) apply(rec journalRecord) {
	b := j.batches[rec.Key]
	switch rec.Op {
	case "intent":
		if b == nil {
			b = &remoteBatch{key: rec.Key}
			j.batches[rec.Key] = b
			j.order = append(j.order, rec.Key)
		}
		b.provider, b.model, b.token, b.ids, b.at, b.endpoint = rec.Provider, rec.Model, rec.Token, rec.IDs, rec.At, rec.Endpoint
	case "submitted":
		if b != nil {
			b.batchID = rec.BatchID
		}
	case "ended":
		if b != nil {
			b.ended, b.retry = true, rec.Retry
		}
	}
}

// record appends rec in one write and syncs it.
func (j *journal) record(rec journalRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return &OutputError{Path: j.path, Msg: "writing", Err: err}
	}
	if err := j.f.Sync(); err != nil {
		return &OutputError{Path: j.path, Msg: "syncing", Err: err}
	}
	j.apply(rec)
	return nil
}

// pending are the batches not ended, in the order they were recorded.
func (j *journal) pending() []*remoteBatch {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*remoteBatch
	for _, k := range j.order {
		if b := j.batches[k]; !b.ended {
			out = append(out, b)
		}
	}
	return out
}

// claimed maps the custom_ids of batches not ended to their batch, and
// lists the custom_ids ended batches gave back to run live.
func (j *journal) claimed() (claims map[string]*remoteBatch, retry map[string]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	claims, retry = map[string]*remoteBatch{}, map[string]bool{}
	for _, k := range j.order {
		b := j.batches[k]
		for _, id := range b.ids {
			if !b.ended {
				claims[id] = b
			}
		}
		for _, id := range b.retry {
			retry[id] = true
		}
	}
	return claims, retry
}

// nextKey is a key no batch of the journal has.
func (j *journal) nextKey() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return fmt.Sprintf("b%d", len(j.order)+1)
}

func (j *journal) close() error {
	if err := j.f.Close(); err != nil {
		return &OutputError{Path: j.path, Msg: "closing", Err: err}
	}
	return nil
}
