package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// outFile is a batch output file: append-only, one write per whole line.
//
// The crash guarantee: every line is built in memory, newline included,
// and handed to the kernel in a single write on an O_APPEND descriptor by
// a single writer. A process killed (even by SIGKILL) between two writes
// leaves only whole lines; a kill during a write can at worst leave the
// last line unterminated (the kernel may stop a large write between pages),
// and --resume cuts such a tail before appending. A custom_id is therefore
// either in the file on a whole line or absent, and --resume finishes
// exactly the absent ones.
type outFile struct {
	f    *os.File
	path string
}

// resumeState is what --resume found in an existing output file.
type resumeState struct {
	done map[string]bool // custom_ids already written
	// cut is the length of the unterminated tail that was removed.
	cut int64
}

// errOutputExists refuses to overwrite results without being asked.
var errOutputExists = errors.New("already holds results")

// openOutput opens path for a batch. With resume, it reads the custom_ids
// already written and cuts an unterminated last line; without it, a
// non-empty file is refused unless overwrite is set.
func openOutput(path string, resume, overwrite bool) (*outFile, *resumeState, error) {
	st := &resumeState{done: map[string]bool{}}
	if resume {
		if err := scanOutput(path, st); err != nil {
			return nil, nil, err
		}
	} else if fi, err := os.Stat(path); err == nil && fi.Size() > 0 && !overwrite {
		return nil, nil, fmt.Errorf("-o %s %w: pass --resume to finish it, or --overwrite to start again", path, errOutputExists)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !resume {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("-o: %w", err)
	}
	return &outFile{f: f, path: path}, st, nil
}

// scanOutput reads the custom_ids of an existing output file and truncates
// an unterminated last line. A missing file is an empty one.
func scanOutput(path string, st *resumeState) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("-o: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var whole int64 // bytes of whole lines
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			if len(line) > 0 {
				st.cut = int64(len(line))
			}
			break
		}
		if err != nil {
			return fmt.Errorf("-o %s: %w", path, err)
		}
		whole += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" {
			return fmt.Errorf("-o %s:%d: not a batch output line; refusing to resume into this file", path, n)
		}
		st.done[l.CustomID] = true
	}
	if st.cut > 0 {
		if err := f.Truncate(whole); err != nil {
			return fmt.Errorf("-o %s: cutting the unterminated last line: %w", path, err)
		}
	}
	return nil
}

// write appends one whole line (newline included) in a single write.
func (o *outFile) write(line []byte) error {
	if _, err := o.f.Write(line); err != nil {
		return fmt.Errorf("writing %s: %w", o.path, err)
	}
	return nil
}

// close flushes the file to disk and closes it.
func (o *outFile) close() error {
	var serr error
	if fi, err := o.f.Stat(); err == nil && fi.Mode().IsRegular() {
		serr = o.f.Sync()
	}
	cerr := o.f.Close()
	if cerr != nil {
		return fmt.Errorf("closing %s: %w", o.path, cerr)
	}
	if serr != nil {
		return fmt.Errorf("syncing %s: %w", o.path, serr)
	}
	return nil
}
