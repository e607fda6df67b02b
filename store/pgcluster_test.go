package store_test

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL server the tests use: CHORUS_PG_DSN when set, otherwise a
// throwaway cluster started on first use and stopped by TestMain.
var pg struct {
	once  sync.Once
	dsn   string   // base DSN; "" when unavailable
	skip  string   // why it is unavailable
	owned *cluster // the throwaway cluster, nil with CHORUS_PG_DSN
}

// pgBase returns the base DSN, or skips t saying why there is none (fails
// it instead when CI is set, so that CI cannot skip the PostgreSQL tests
// silently).
func pgBase(t testing.TB) string {
	t.Helper()
	pg.once.Do(setupPG)
	if pg.dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL is required in CI (CI is set): %s", pg.skip)
		}
		t.Skip("PostgreSQL tests skipped: " + pg.skip)
	}
	return pg.dsn
}

func setupPG() {
	if dsn := os.Getenv("CHORUS_PG_DSN"); dsn != "" {
		pg.dsn = dsn
		return
	}
	bindir, err := findPGBin()
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
	pg.dsn = c.dsn()
}

func stopPG() {
	if pg.owned != nil {
		if err := pg.owned.destroy(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the throwaway PostgreSQL cluster:", err)
		}
	}
}

// findPGBin finds the directory of initdb and pg_ctl: Debian keeps them in
// /usr/lib/postgresql/<version>/bin, off PATH (and pg_config --bindir may
// name the client's directory instead).
func findPGBin() (string, error) {
	if d := os.Getenv("CHORUS_PG_BINDIR"); d != "" { // an explicit choice, e.g. a Homebrew install
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
		return "", fmt.Errorf("CHORUS_PG_DSN is not set and CHORUS_PG_BINDIR=%s holds no initdb and pg_ctl", d)
	}
	var dirs []string
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(matches, func(a, b string) int { // newest version first
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(a))))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(b))))
		return cmp.Compare(vb, va)
	})
	for _, m := range matches {
		dirs = append(dirs, filepath.Dir(m))
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("CHORUS_PG_DSN is not set and no PostgreSQL server binaries were found (no /usr/lib/postgresql/*/bin/initdb, none in pg_config --bindir or on PATH)")
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// cluster is a throwaway PostgreSQL cluster in a temp directory, listening
// on a loopback port and a socket in that directory.
type cluster struct {
	bindir, dir string
	port        int
	cred        *syscall.Credential // the postgres user's, when running as root
}

func (c *cluster) data() string { return filepath.Join(c.dir, "data") }

func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// run runs a server binary, as the postgres user when we are root (initdb and
// postgres refuse to run as root).
func (c *cluster) run(timeout time.Duration, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.bindir, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "HOME="+c.dir)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	// A file, not a pipe: the server pg_ctl starts must not hold our pipe open.
	out, err := os.CreateTemp("", "chorus-pg-cmd-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

func startCluster(bindir string) (*cluster, error) {
	c := &cluster{bindir: bindir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "chorus-store-pg-*")
	if err != nil {
		return nil, err
	}
	c.dir = dir
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.run(2*time.Minute, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err == nil {
			if err = c.start(); err == nil {
				return c, nil
			}
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// start starts the server and waits until it accepts connections.
func (c *cluster) start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on -c synchronous_commit=on -c max_connections=200", c.port, c.dir)
	return c.run(2*time.Minute, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "90", "-o", opts, "start")
}

// crash stops the server the way a crash would: no checkpoint, recovery
// from the WAL on the next start.
func (c *cluster) crash() error {
	return c.run(time.Minute, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
}

func (c *cluster) destroy() error {
	err := c.run(time.Minute, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// withParam adds a connection parameter to a URL or key=value DSN.
func withParam(dsn, key, value string) string {
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

// pgSchemaDSN creates a schema of its own for t, dropped when t ends, and
// returns a DSN whose search_path puts the journal tables there.
func pgSchemaDSN(t testing.TB) string {
	t.Helper()
	return pgSchemaDSNOn(t, pgBase(t))
}

// pgSchemaDSNOn is pgSchemaDSN on the server at base.
func pgSchemaDSNOn(t testing.TB, base string) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	schema := "chorus_test_" + hex.EncodeToString(b)
	adminExec(t, base, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { adminExec(t, base, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	return withParam(base, "search_path", schema)
}

// adminExec runs one statement on a connection of its own.
func adminExec(t testing.TB, dsn, sql string) {
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

// crashableCluster returns a server t may crash: the throwaway cluster of
// this test binary, or, when the tests use CHORUS_PG_DSN's server, a private
// cluster started for t (skipping t, or failing it when CI is set, when
// that is impossible).
func crashableCluster(t *testing.T) *cluster {
	t.Helper()
	pgBase(t)
	if pg.owned != nil {
		return pg.owned
	}
	bindir, err := findPGBin()
	if err == nil {
		var c *cluster
		if c, err = startCluster(bindir); err == nil {
			t.Cleanup(func() {
				if err := c.destroy(); err != nil {
					t.Errorf("stop the private cluster: %v", err)
				}
			})
			return c
		}
	}
	msg := "the tests use CHORUS_PG_DSN's server, which is not theirs to crash, and a private cluster is unavailable: " + err.Error()
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return nil
}
