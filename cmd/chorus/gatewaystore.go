package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chorusrt/chorus/keystore"
)

// openKeyStore opens the gateway's key store for chorus serve: flag is
// --store ("" for the config's gateway.store: or the default, "memory"
// for none, a SQLite path or a postgres:// DSN). Without a flag or a
// configured store it is opened only when keys are configured: in
// gateway.db in --files-dir, else in a temporary directory that cleanup
// removes (spend is then forgotten at exit). A nil store: keys, limits
// and spend in memory.
func openKeyStore(ctx context.Context, flag, filesDir, configured string, haveKeys bool) (st *keystore.Store, where string, cleanup func(), err error) {
	cleanup = func() {}
	p := flag
	if p == "" {
		p = configured
	}
	switch {
	case p == "memory":
		return nil, "", cleanup, nil
	case p == "" && !haveKeys:
		return nil, "", cleanup, nil
	case strings.HasPrefix(p, "postgres://"), strings.HasPrefix(p, "postgresql://"):
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if st, err = keystore.OpenPostgres(octx, p); err != nil {
			return nil, "", cleanup, fmt.Errorf("--store: %w", err)
		}
		return st, "postgres", func() { st.Close() }, nil
	}
	if p == "" && filesDir != "" {
		if err := os.MkdirAll(filesDir, 0o700); err != nil {
			return nil, "", cleanup, fmt.Errorf("--store: %w", err)
		}
		p = filepath.Join(filesDir, "gateway.db")
	}
	var tmp string
	if p == "" {
		if tmp, err = os.MkdirTemp("", "chorus-serve-gateway-"); err != nil {
			return nil, "", cleanup, err
		}
		p = filepath.Join(tmp, "gateway.db")
	}
	if st, err = keystore.OpenSQLite(p); err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, "", cleanup, fmt.Errorf("--store: %w", err)
	}
	where = p
	if tmp != "" {
		where = p + " (temporary: give --store or --files-dir to keep spend across restarts)"
	}
	return st, where, func() {
		st.Close()
		if tmp != "" {
			os.RemoveAll(tmp)
		}
	}, nil
}
