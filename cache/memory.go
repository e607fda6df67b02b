package cache

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// ErrClosed is returned by a store's calls after Close.
var ErrClosed = errors.New("cache: store closed")

// Memory is the in-process Store: bounded by its Limits, evicting the
// least recently used entry first. The zero value is not usable; call
// NewMemory.
type Memory struct {
	lim Limits

	mu     sync.Mutex
	ll     *list.List // front: most recently used
	items  map[string]*list.Element
	bytes  int64
	closed bool
}

type memEntry struct {
	id      string
	e       Entry
	size    int64
	expires time.Time
	// res is the decoded answer when a Cache put it (putResult): its hits
	// skip decoding Value.
	res *llm.ChatResult
}

// NewMemory returns an empty in-memory store capped by lim, or an
// *llm.ConfigError naming the limit that cannot hold.
func NewMemory(lim Limits) (*Memory, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	return &Memory{lim: lim, ll: list.New(), items: map[string]*list.Element{}}, nil
}

// Get implements Store; a hit makes the entry the most recently used.
func (m *Memory) Get(_ context.Context, namespace, key string, now time.Time) ([]byte, bool, error) {
	me, err := m.get(namespace, key, now)
	if me == nil {
		return nil, false, err
	}
	return me.e.Value, true, nil
}

// getResult is Get for a Cache: the decoded answer, nil when the entry
// was put as bytes only (then decoded here).
func (m *Memory) getResult(namespace, key string, now time.Time) (*llm.ChatResult, bool, error) {
	me, err := m.get(namespace, key, now)
	if me == nil {
		return nil, false, err
	}
	if me.res != nil {
		return me.res, true, nil
	}
	res, err := decode(me.e.Value)
	if err != nil {
		return nil, false, err
	}
	return res, true, nil
}

func (m *Memory) get(namespace, key string, now time.Time) (*memEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	el := m.items[namespace+"\x00"+key]
	if el == nil {
		return nil, nil
	}
	me := el.Value.(*memEntry)
	if !me.expires.IsZero() && !now.Before(me.expires) {
		m.remove(el)
		return nil, nil
	}
	m.ll.MoveToFront(el)
	return me, nil
}

// Put implements Store.
func (m *Memory) Put(_ context.Context, e Entry) error { return m.putResult(e, nil) }

// putResult is Put for a Cache, keeping res (the decoded Value, never
// changed after) beside the bytes.
func (m *Memory) putResult(e Entry, res *llm.ChatResult) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	id := e.Namespace + "\x00" + e.Key
	if el := m.items[id]; el != nil {
		m.remove(el)
	}
	e.Value = append([]byte(nil), e.Value...)
	me := &memEntry{id: id, e: e, size: entrySize(e), expires: e.Expires, res: res}
	m.items[id] = m.ll.PushFront(me)
	m.bytes += me.size
	for m.ll.Len() > 1 && (m.lim.MaxEntries > 0 && m.ll.Len() > m.lim.MaxEntries || m.lim.MaxBytes > 0 && m.bytes > m.lim.MaxBytes) {
		m.remove(m.ll.Back())
	}
	if m.lim.MaxBytes > 0 && m.bytes > m.lim.MaxBytes {
		m.remove(m.ll.Back()) // one entry larger than the whole cap
	}
	return nil
}

func (m *Memory) remove(el *list.Element) {
	me := el.Value.(*memEntry)
	m.ll.Remove(el)
	delete(m.items, me.id)
	m.bytes -= me.size
}

// Len returns the number of entries held (expired ones not yet dropped
// included).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ll.Len()
}

// Close implements Store: it drops every entry.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.ll.Init()
	m.items = map[string]*list.Element{}
	m.bytes = 0
	return nil
}

// entrySize is what an entry counts against Limits.MaxBytes.
func entrySize(e Entry) int64 { return int64(len(e.Namespace) + len(e.Key) + len(e.Value)) }

// EntrySize is what e counts against Limits.MaxBytes: its namespace, key
// and value bytes. SQL stores count the same.
func EntrySize(e Entry) int64 { return entrySize(e) }
