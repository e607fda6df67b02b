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
)

// Mode says how OpenOutput treats an existing output file.
type Mode uint8

const (
	// Create refuses a non-empty output file (ErrOutputExists).
	Create Mode = iota
	// Resume keeps the whole lines of an existing output, cuts an
	// unterminated last line, and remembers the custom_ids written.
	Resume
	// Overwrite truncates an existing output file.
	Overwrite
)

// ErrOutputExists is returned by OpenOutput in Create mode when the
// output already holds results, or its journal (JournalPath) records the
// remote batches of an interrupted native job: resume it or overwrite it,
// never both by accident. Overwrite deletes the journal.
var ErrOutputExists = errors.New("already holds results")

// OutputError is a problem with the output file; Line is set when one
// line of it is at fault.
type OutputError struct {
	Path string
	Line int
	Msg  string
	Err  error
}

func (e *OutputError) Error() string {
	s := e.Path
	if e.Line > 0 {
		s += fmt.Sprintf(":%d", e.Line)
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *OutputError) Unwrap() error { return e.Err }

// Output is a batch output file: append-only, one write per whole line.
//
// The crash guarantee: every line is built in memory, newline included,
// and handed to the kernel in a single write on an O_APPEND descriptor by
// a single writer. A process killed (even by SIGKILL) between two writes
// leaves only whole lines; a kill during a write can at worst leave the
// last line unterminated (the kernel may stop a large write between pages),
// and Resume cuts such a tail before appending. A custom_id is therefore
// either in the file on a whole line or absent, and a resumed job finishes
// exactly the absent ones.
type Output struct {
	mu   sync.Mutex
	f    *os.File
	path string
	done map[string]bool
	cut  int64
	mode Mode
}

// OpenOutput opens path for a job. In Resume mode it reads the custom_ids
// already written and cuts an unterminated last line (a missing file is an
// empty one); in Create mode a non-empty file is refused with
// ErrOutputExists; Overwrite truncates.
func OpenOutput(path string, mode Mode) (*Output, error) {
	o := &Output{path: path, done: map[string]bool{}, mode: mode}
	switch mode {
	case Resume:
		if err := o.scan(); err != nil {
			return nil, err
		}
	case Create:
		if fi, err := os.Stat(path); err == nil && fi.Size() > 0 {
			return nil, &OutputError{Path: path, Err: ErrOutputExists}
		}
		if fi, err := os.Stat(JournalPath(path)); err == nil && fi.Size() > 0 {
			return nil, &OutputError{Path: JournalPath(path), Msg: "records remote batches of an earlier run", Err: ErrOutputExists}
		}
	case Overwrite:
		// Starting again forgets the remote batches of an earlier run.
		if err := os.Remove(JournalPath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, &OutputError{Path: JournalPath(path), Err: err}
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
	o.f = f
	return o, nil
}

// Path is the file's path.
func (o *Output) Path() string { return o.path }

// Done reports whether custom_id already has a line in the file (read at
// open in Resume mode, or written since).
func (o *Output) Done(customID string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done[customID]
}

// DoneCount is how many custom_ids the file held when it was opened plus
// those written since.
func (o *Output) DoneCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.done)
}

// Cut is the length of the unterminated tail Resume removed (0: none).
func (o *Output) Cut() int64 { return o.cut }

// scan reads the custom_ids of an existing output file and truncates an
// unterminated last line.
func (o *Output) scan() error {
	f, err := os.OpenFile(o.path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &OutputError{Path: o.path, Err: err}
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var whole int64 // bytes of whole lines
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				o.cut = int64(len(line))
			}
			break
		}
		if err != nil {
			return &OutputError{Path: o.path, Err: err}
		}
		whole += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" {
			return &OutputError{Path: o.path, Line: n, Msg: "not a batch output line; refusing to resume into this file"}
		}
		o.done[l.CustomID] = true
	}
	if o.cut > 0 {
		if err := f.Truncate(whole); err != nil {
			return &OutputError{Path: o.path, Msg: "cutting the unterminated last line", Err: err}
		}
	}
	return nil
}

// write appends one whole line (newline included) in a single write, and
// records customID as done.
func (o *Output) write(customID string, line []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.f.Write(line); err != nil {
		return &OutputError{Path: o.path, Msg: "writing", Err: err}
	}
	if customID != "" {
		o.done[customID] = true
	}
	return nil
}

// Close flushes the file to disk and closes it.
func (o *Output) Close() error {
	var serr error
	if fi, err := o.f.Stat(); err == nil && fi.Mode().IsRegular() {
		serr = o.f.Sync()
	}
	if err := o.f.Close(); err != nil {
		return &OutputError{Path: o.path, Msg: "closing", Err: err}
	}
	if serr != nil {
		return &OutputError{Path: o.path, Msg: "syncing", Err: serr}
	}
	return nil
}
