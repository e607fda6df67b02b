// Package pgtest gives tests a PostgreSQL server: the one CHORUS_PG_DSN
// names when it is set, otherwise a throwaway cluster this test binary
// starts on first use (initdb and pg_ctl from CHORUS_PG_BINDIR,
// /usr/lib/postgresql/*/bin, pg_config --bindir or PATH) and that the
// package's TestMain stops with Stop. Without a server the tests skip, or
// fail when CI is set, so that CI cannot skip them silently.
//
// It is test support only: it imports package testing and is imported by
// the _test.go files of store and cluster, which share one
// implementation through it. A test binary that re-executes itself as a
// child process passes the child the DSN it got here; the child never
// calls Base, so it never starts a server of its own.
package pgtest
