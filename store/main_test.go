package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/internal/pgtest"
	"github.com/chorusrt/chorus/store"
)

// The crash and multi-process tests re-execute the test binary; these
// variables tell the child what to do.
const (
	envChild   = "CHORUS_STORE_CHILD"   // "crash" or "contend"
	envBackend = "CHORUS_STORE_BACKEND" // "sqlite" or "postgres"
	envTarget  = "CHORUS_STORE_TARGET"  // SQLite path or PostgreSQL DSN
	envWriter  = "CHORUS_STORE_WRITER"  // writer id / crash round
	envCount   = "CHORUS_STORE_COUNT"   // records per contending writer
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	pgtest.Stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// openBackend opens the journal a child process was pointed at.
func openBackend(ctx context.Context, backend, target string) (store.Journal, error) {
	switch backend {
	case "sqlite":
		return store.OpenSQLite(target)
	case "postgres":
		return store.OpenPostgres(ctx, target)
	}
	return nil, fmt.Errorf("unknown backend %q", backend)
}

// runChild is the body of a re-executed test binary. It returns the exit
// code.
func runChild(mode string) int {
	ctx := context.Background()
	j, err := openBackend(ctx, os.Getenv(envBackend), os.Getenv(envTarget))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		return 2
	}
	defer j.Close()
	writer, _ := strconv.Atoi(os.Getenv(envWriter))
	switch mode {
	case "crash":
		err = childCrash(ctx, j, writer)
	case "contend":
		n, _ := strconv.Atoi(os.Getenv(envCount))
		err = childContend(ctx, j, writer, n)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 3
	}
	return 0
}

// childCrash appends batches of 1 to 3 records to session "crash" until it
// is killed, printing "ack <last seq>" after each acknowledged append and
// before the next one starts. Stdout is unbuffered: a printed ack has left
// the process.
func childCrash(ctx context.Context, j store.Journal, round int) error {
	last, err := j.LastSeq(ctx, crashSession)
	if err != nil {
		return err
	}
	for b := 0; ; b++ {
		recs := crashBatch(round, b)
		n, err := j.Append(ctx, crashSession, last, recs...)
		if err != nil {
			return fmt.Errorf("append batch %d after seq %d: %w", b, last, err)
		}
		if _, err := fmt.Fprintf(os.Stdout, "ack %d\n", n); err != nil {
			return err
		}
		last = n
	}
}

// childContend appends n records, one at a time, to session "contend",
// retrying on conflict.
func childContend(ctx context.Context, j store.Journal, writer, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for i := 0; i < n; {
		last, err := j.LastSeq(ctx, contendSession)
		if err != nil {
			return err
		}
		_, err = j.Append(ctx, contendSession, last, crashRecord{R: writer, I: i}.record())
		switch {
		case err == nil:
			i++
		case errors.Is(err, store.ErrConflict):
		default:
			return err
		}
	}
	return nil
}
