package store_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chorusrt/chorus/store"
)

const (
	crashSession   = "crash"
	contendSession = "contend"
)

// crashRecord is the payload of the crash and multi-process tests: round (or
// writer) R, batch B, record I of N in the batch, plus padding P.
type crashRecord struct {
	R int    `json:"r"`
	B int    `json:"b"`
	I int    `json:"i"`
	N int    `json:"n"`
	P string `json:"p,omitempty"`
}

func (c crashRecord) record() store.Record {
	b, _ := json.Marshal(c)
	return store.Record{Kind: "crash", Data: b}
}

// crashBatch is batch b of a crash round: 1 to 3 records, every fifth batch
// carrying 64 KiB of padding so that some commits span many pages.
func crashBatch(round, b int) []store.Record {
	n := 1 + b%3
	recs := make([]store.Record, n)
	for i := range recs {
		c := crashRecord{R: round, B: b, I: i, N: n}
		if b%5 == 4 {
			c.P = strings.Repeat("p", 64<<10)
		}
		recs[i] = c.record()
	}
	return recs
}

// checkCrashJournal checks what a crash left: seqs 1..n without a gap, whole
// batches only, in the order each round wrote them, and every acknowledged
// seq present and ending a batch. It returns the number of records.
func checkCrashJournal(t *testing.T, j store.Journal, acked []int64) int64 {
	t.Helper()
	recs, err := j.Read(t.Context(), crashSession, 0)
	if err != nil {
		t.Fatalf("Read after crash: %v", err)
	}
	last, err := j.LastSeq(t.Context(), crashSession)
	if err != nil {
		t.Fatalf("LastSeq after crash: %v", err)
	}
	if last != int64(len(recs)) {
		t.Fatalf("LastSeq %d but %d records", last, len(recs))
	}
	endsBatch := map[int64]bool{}
	prev := crashRecord{R: -1}
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d: gap or duplicate", i, r.Seq)
		}
		var c crashRecord
		if err := json.Unmarshal(r.Data, &c); err != nil {
			t.Fatalf("record %d: torn payload (%d bytes): %v", r.Seq, len(r.Data), err)
		}
		switch {
		case c.I > 0: // continues the batch of the record before
			if c.R != prev.R || c.B != prev.B || c.I != prev.I+1 || c.N != prev.N {
				t.Fatalf("record %d = {r%d b%d %d/%d} after {r%d b%d %d/%d}: batch torn", r.Seq, c.R, c.B, c.I, c.N, prev.R, prev.B, prev.I, prev.N)
			}
		case prev.R >= 0 && prev.I != prev.N-1:
			t.Fatalf("record %d starts a batch before batch r%d b%d was complete (%d/%d)", r.Seq, prev.R, prev.B, prev.I+1, prev.N)
		case c.R == prev.R && c.B != prev.B+1:
			t.Fatalf("record %d is batch r%d b%d after b%d: a batch is missing", r.Seq, c.R, c.B, prev.B)
		case c.R != prev.R && c.B != 0:
			t.Fatalf("record %d is batch r%d b%d, want b0 first", r.Seq, c.R, c.B)
		}
		if c.I == c.N-1 {
			endsBatch[r.Seq] = true
		}
		prev = c
	}
	if prev.R >= 0 && prev.I != prev.N-1 {
		t.Fatalf("last batch r%d b%d is incomplete (%d/%d records)", prev.R, prev.B, prev.I+1, prev.N)
	}
	for _, a := range acked {
		if a > last || !endsBatch[a] {
			t.Fatalf("acknowledged append up to seq %d is missing (journal ends at %d)", a, last)
		}
	}
	return last
}

// child prepares a re-execution of the test binary in the given mode.
func child(t *testing.T, mode, backend, target string, writer, count int) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envChild+"="+mode,
		envBackend+"="+backend,
		envTarget+"="+target,
		envWriter+"="+strconv.Itoa(writer),
		envCount+"="+strconv.Itoa(count),
	)
	return cmd
}

// runCrashTest runs rounds of a child appending to the journal at target
// and killed with SIGKILL after a number of acknowledged appends, reopening
// and checking the journal after each round.
func runCrashTest(t *testing.T, backend, target string) {
	var acked []int64
	var total int64
	for round := range 3 {
		cmd := child(t, "crash", backend, target, round, 0)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan int64, 1024)
		var readErr error
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(acks)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				v, ok := strings.CutPrefix(sc.Text(), "ack ")
				n, err := strconv.ParseInt(v, 10, 64)
				if !ok || err != nil {
					readErr = fmt.Errorf("child printed %q", sc.Text())
					return
				}
				acks <- n
			}
			readErr = sc.Err()
		})
		// Kill after a varying number of acknowledged appends so that the
		// kill lands at different points of a write.
		killAfter := 15 + 7*round
		deadline := time.After(2 * time.Minute)
		got := 0
	wait:
		for got < killAfter {
			select {
			case n, ok := <-acks:
				if !ok {
					break wait
				}
				acked = append(acked, n)
				got++
			case <-deadline:
				break wait
			}
		}
		if got < killAfter {
			cmd.Process.Kill()
			cmd.Wait()
			wg.Wait()
			t.Fatalf("round %d: child acknowledged %d appends, want %d (stderr: %s, read: %v)", round, got, killAfter, stderr.String(), readErr)
		}
		time.Sleep(time.Duration(round) * 700 * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for n := range acks { // acknowledged before the kill, still in the pipe
			acked = append(acked, n)
		}
		wg.Wait()
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: child ended with %v, not by SIGKILL (stderr: %s)", round, err, stderr.String())
		}
		if readErr != nil {
			t.Fatalf("round %d: %v", round, readErr)
		}

		j, err := openBackend(t.Context(), backend, target)
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		last := checkCrashJournal(t, j, acked)
		t.Logf("round %d: %d appends acknowledged in all, journal at seq %d (%d records committed but not acknowledged in this round)",
			round, len(acked), last, last-acked[len(acked)-1])
		if last < total {
			t.Fatalf("round %d: journal shrank from %d to %d records", round, total, last)
		}
		total = last
		j.Close()
	}
}

// runContendTest runs writers child processes, each appending count records
// one at a time to one session with retry on conflict, and checks that all
// of them landed exactly once, in each writer's order, without a gap.
func runContendTest(t *testing.T, backend, target string, writers, count int) {
	cmds := make([]*exec.Cmd, writers)
	errs := make([]bytes.Buffer, writers)
	for w := range cmds {
		cmds[w] = child(t, "contend", backend, target, w, count)
		cmds[w].Stderr = &errs[w]
		if err := cmds[w].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for w, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("writer %d: %v: %s", w, err, errs[w].String())
		}
	}
	j, err := openBackend(t.Context(), backend, target)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	recs, err := j.Read(t.Context(), contendSession, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != writers*count {
		t.Fatalf("%d records, want %d", len(recs), writers*count)
	}
	next := make([]int, writers)
	for i, r := range recs {
		if r.Seq != int64(i+1) {
			t.Fatalf("record %d has seq %d: gap or duplicate", i, r.Seq)
		}
		var c crashRecord
		if err := json.Unmarshal(r.Data, &c); err != nil {
			t.Fatal(err)
		}
		if c.R < 0 || c.R >= writers || c.I != next[c.R] {
			t.Fatalf("record %d = writer %d #%d: duplicate or out of order", r.Seq, c.R, c.I)
		}
		next[c.R]++
	}
}

// ctxTimeout is a context for test setup steps.
func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
