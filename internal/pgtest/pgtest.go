package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL server the tests use: CHORUS_PG_DSN when set, otherwise a
// throwaway cluster started on first use and stopped by Stop.
var pg struct {
	once  sync.Once
	dsn   string   // base DSN; "" when unavailable
	skip  string   // why it is unavailable
	owned *Cluster // the throwaway cluster, nil with CHORUS_PG_DSN
}

// Base returns the base DSN of the test server, starting the throwaway
// cluster on first use when CHORUS_PG_DSN is not set, or skips t saying
// why there is none (fails it instead when CI is set, so that CI cannot
// skip the PostgreSQL tests silently).
func Base(t testing.TB) string {
	t.Helper()
	pg.once.Do(setup)
	if pg.dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL is required in CI (CI is set): %s", pg.skip)
		}
		t.Skip("PostgreSQL tests skipped: " + pg.skip)
	}
	return pg.dsn
}

func setup() {
	if dsn := os.Getenv("CHORUS_PG_DSN"); dsn != "" {
		pg.dsn = dsn
		return
	}
	bindir, err := findBin()
	if err != nil {
		pg.skip = err.Error() + "; install the server (Debian: apt-get install postgresql) or set CHORUS_PG_DSN"
		return
	}
	c, err := startCluster(bindir)
	if err != nil {
		pg.skip = "CHORUS_PG_DSN is not set and starting a throwaway cluster with " + bindir + " failed: " + err.Error()
		return
	}
	pg.owned = c
	pg.dsn = c.DSN()
}

// Stop stops and removes the throwaway cluster if this process started
// one; it does nothing otherwise. Call it from TestMain after m.Run.
func Stop() {
	if pg.owned != nil {
		if err := pg.owned.Destroy(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the throwaway PostgreSQL cluster:", err)
		}
		pg.owned = nil
	}
}

// SchemaDSN creates a schema of its own for t on the test server, dropped
// when t ends, and returns a DSN whose search_path puts tables there. It
// skips or fails t as Base does when there is no server.
func SchemaDSN(t testing.TB) string {
	t.Helper()
	return SchemaDSNOn(t, Base(t))
}

// SchemaDSNOn is SchemaDSN on the server at base.
func SchemaDSNOn(t testing.TB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "chorus_test_" + hex.EncodeToString(b)
	Exec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { Exec(t, base, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return WithParam(base, "search_path", schema)
}

// WithParam adds a connection parameter to a URL or key=value DSN.
func WithParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

// Exec runs one statement on a connection of its own to dsn, failing t
// when it cannot.
func Exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// FreePort returns a loopback TCP port nobody listened on a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
