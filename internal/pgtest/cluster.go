package pgtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// findBin finds the directory of initdb and pg_ctl: Debian keeps them in
// /usr/lib/postgresql/<version>/bin, off PATH (and pg_config --bindir may
// name the client's directory instead).
func findBin() (string, error) {
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

// Cluster is a throwaway PostgreSQL cluster in a temp directory, listening
// on a loopback port and a socket in that directory.
type Cluster struct {
	bindir, dir string
	port        int
	cred        *syscall.Credential // the postgres user's, when running as root
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// DSN is the cluster's base DSN: user postgres, database postgres, trust
// authentication over loopback TCP.
func (c *Cluster) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

// run runs a server binary, as the postgres user when we are root (initdb and
// postgres refuse to run as root).
func (c *Cluster) run(timeout time.Duration, name string, args ...string) error {
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

// startCluster initializes a cluster with the binaries in bindir and starts
// it on a free port (trying three ports).
func startCluster(bindir string) (*Cluster, error) {
	c := &Cluster{bindir: bindir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no postgres user to run it as: %w", err)
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "chorus-pgtest-*")
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
		if c.port, err = FreePort(); err == nil {
			if err = c.Start(); err == nil {
				return c, nil
			}
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// Start starts the server (again, after Crash) on the cluster's port and
// waits until it accepts connections.
func (c *Cluster) Start() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=on -c synchronous_commit=on -c max_connections=200", c.port, c.dir)
	return c.run(2*time.Minute, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "server.log"), "-w", "-t", "90", "-o", opts, "start")
}

// Crash stops the server the way a crash would: no checkpoint, recovery
// from the WAL on the next Start.
func (c *Cluster) Crash() error {
	return c.run(time.Minute, "pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
}

// Destroy stops the server and removes the cluster's directory.
func (c *Cluster) Destroy() error {
	err := c.run(time.Minute, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
	if rerr := os.RemoveAll(c.dir); err == nil {
		err = rerr
	}
	return err
}

// Crashable returns a server t may crash: the throwaway cluster of this
// test binary, or, when the tests use CHORUS_PG_DSN's server, a private
// cluster started for t and destroyed when t ends (skipping t, or failing
// it when CI is set, when that is impossible).
func Crashable(t *testing.T) *Cluster {
	t.Helper()
	Base(t)
	if pg.owned != nil {
		return pg.owned
	}
	bindir, err := findBin()
	if err == nil {
		var c *Cluster
		if c, err = startCluster(bindir); err == nil {
			t.Cleanup(func() {
				if err := c.Destroy(); err != nil {
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
