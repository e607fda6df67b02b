package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/gateway"
	"github.com/chorusrt/chorus/requestlog"
)

// requestLogConfig is the request_log: section of chorus.yaml:
//
//	request_log:
//	  store: sqlite            # or postgres
//	  path: /var/lib/chorus/requests.db   # sqlite (default: requests.db in --files-dir)
//	  dsn: postgres://...      # postgres
//	  retain: 720h             # delete records older than this (default 720h; 0 keeps them)
//	  max_rows: 10000000       # keep at most this many, the newest (default: no bound)
//	  enabled: false           # no request log
//	  content: true            # keep each request's body and answer's text (default false: no content)
//	  content_bytes: 16384     # cut each to this many bytes (default 16384)
type requestLogConfig struct {
	store, path, dsn string
	retain           time.Duration
	retainSet        bool
	maxRows          int64
	disabled         bool
	content          bool
	contentBytes     int
}

// defaultRetain is how long the request log keeps a record by default.
const defaultRetain = 720 * time.Hour

func (p *configParser) requestLog(n *yaml.Node, cfg *fileConfig) error {
	c := &cfg.requestLog
	return p.mapping(n, "request_log", func(key string, k, v *yaml.Node) error {
		var err error
		switch key {
		case "store":
			if c.store, err = p.str(v, "request_log.store"); err == nil && c.store != "sqlite" && c.store != "postgres" {
				err = p.errf(v, "request_log.store: want sqlite or postgres, got %q", c.store)
			}
		case "path":
			c.path, err = p.str(v, "request_log.path")
		case "dsn":
			c.dsn, err = p.str(v, "request_log.dsn")
		case "retain":
			c.retain, err = time.ParseDuration(strings.TrimSpace(v.Value))
			if err != nil || c.retain < 0 {
				err = p.errf(v, "request_log.retain: want a duration like 720h, got %q", v.Value)
			}
			c.retainSet = true
		case "max_rows":
			var m int
			m, err = p.nonNegInt(v, "request_log.max_rows")
			c.maxRows = int64(m)
		case "enabled":
			var on bool
			on, err = p.boolean(v, "request_log.enabled")
			c.disabled = !on
		case "content":
			c.content, err = p.boolean(v, "request_log.content")
		case "content_bytes":
			c.contentBytes, err = p.nonNegInt(v, "request_log.content_bytes")
		default:
			err = p.errf(k, "request_log: unknown key %q (known: store, path, dsn, retain, max_rows, enabled, content, content_bytes)", key)
		}
		return err
	})
}

// openRequestLog opens the request log chorus serve keeps: flag is
// --request-log ("" for the config's or the default, "off", a SQLite path
// or a postgres:// DSN). With neither a path nor --files-dir the SQLite
// file is in a temporary directory that cleanup removes. A nil Logger
// means no log.
func openRequestLog(ctx context.Context, e env, flag, filesDir string, c requestLogConfig) (lg *requestlog.Logger, where string, cleanup func(), err error) {
	cleanup = func() {}
	store, path, dsn := c.store, c.path, c.dsn
	switch {
	case flag == "off":
		return nil, "", cleanup, nil
	case strings.HasPrefix(flag, "postgres://"), strings.HasPrefix(flag, "postgresql://"):
		store, dsn = "postgres", flag
	case flag != "":
		store, path = "sqlite", flag
	case c.disabled:
		return nil, "", cleanup, nil
	}
	var st requestlog.Store
	if store == "postgres" {
		if dsn == "" {
			return nil, "", cleanup, fmt.Errorf("request_log: store postgres needs a dsn")
		}
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if st, err = requestlog.OpenPostgres(octx, dsn); err != nil {
			return nil, "", cleanup, fmt.Errorf("--request-log: %w", err)
		}
		where = "postgres"
	} else {
		if path == "" && filesDir != "" {
			if err := os.MkdirAll(filesDir, 0o700); err != nil {
				return nil, "", cleanup, fmt.Errorf("--request-log: %w", err)
			}
			path = filepath.Join(filesDir, "requests.db")
		}
		if path == "" {
			dir, err := os.MkdirTemp("", "chorus-serve-requests-")
			if err != nil {
				return nil, "", cleanup, err
			}
			cleanup = func() { os.RemoveAll(dir) }
			path = filepath.Join(dir, "requests.db")
		}
		if st, err = requestlog.OpenSQLite(path); err != nil {
			cleanup()
			return nil, "", func() {}, fmt.Errorf("--request-log: %w", err)
		}
		where = path
	}
	retain := defaultRetain
	if c.retainSet {
		retain = c.retain
	}
	lg = requestlog.New(st, requestlog.Options{Retain: retain, MaxRows: c.maxRows, Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	return lg, where, cleanup, nil
}

const usageUsage = `usage: chorus usage [flags]

Prints the request log's usage aggregates, as GET /api/console/usage
answers them, from the log chorus serve keeps.

      --request-log PATH|DSN  the log: a SQLite file or a postgres:// DSN
                              (default: requests.db in --files-dir)
      --files-dir DIR         chorus serve's --files-dir
      --group-by key|model|provider
      --bucket hour|day       (needs --from and --to)
      --from, --to TIME       RFC 3339 (from <= time < to)
      --key, --model, --provider, --status   filters
      --csv                   CSV instead of a table
`

// cmdUsage is "chorus usage": the usage API's figures on the command line.
func cmdUsage(ctx context.Context, e env, args []string) int {
	vals := map[string]*string{}
	var logFlag, filesDir string
	csvOut := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch a {
		case "-h", "-help", "--help":
			fmt.Fprint(e.stdout, usageUsage)
			return 0
		case "--csv":
			csvOut = true
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") {
			fmt.Fprintf(e.stderr, "chorus usage: unexpected argument %q\n", a)
			return 2
		}
		if !hasVal {
			if i+1 >= len(args) {
				fmt.Fprintf(e.stderr, "chorus usage: %s needs a value\n", a)
				return 2
			}
			i++
			val = args[i]
		}
		switch name {
		case "request-log":
			logFlag = val
		case "files-dir":
			filesDir = val
		default:
			v := val
			vals[strings.ReplaceAll(name, "-", "_")] = &v
		}
	}
	q := map[string][]string{}
	for k, v := range vals {
		q[k] = []string{*v}
	}
	uq, err := requestlog.ParseUsage(q)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus usage: %v\n", err)
		return 2
	}
	var st requestlog.Store
	switch {
	case strings.HasPrefix(logFlag, "postgres://"), strings.HasPrefix(logFlag, "postgresql://"):
		st, err = requestlog.OpenPostgres(ctx, logFlag)
	default:
		path := logFlag
		if path == "" {
			if filesDir == "" {
				fmt.Fprintln(e.stderr, "chorus usage: name the log with --request-log or --files-dir")
				return 2
			}
			path = filepath.Join(filesDir, "requests.db")
		}
		if _, serr := os.Stat(path); serr != nil {
			fmt.Fprintf(e.stderr, "chorus usage: %v\n", serr)
			return 2
		}
		st, err = requestlog.OpenSQLite(path)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus usage: %v\n", err)
		return 1
	}
	defer st.Close()
	rows, err := st.Usage(ctx, uq)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus usage: %v\n", err)
		return 1
	}
	printUsage(e, rows, csvOut)
	return 0
}

// printUsage prints rows with the columns of the usage API's CSV
// (console.UsageCSVRow): as CSV, or as an aligned table.
func printUsage(e env, rows []requestlog.UsageRow, csvOut bool) {
	if csvOut {
		cw := csv.NewWriter(e.stdout)
		_ = cw.Write(console.UsageCSVHeader)
		for _, r := range rows {
			_ = cw.Write(console.UsageCSVRow(r))
		}
		cw.Flush()
		return
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(console.UsageCSVHeader, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(console.UsageCSVRow(r), "\t"))
	}
	tw.Flush()
}

// serveRequestLog opens chorus serve's request log and sets it in gopts;
// closeLog flushes and closes it. rlog is nil with the log off.
func serveRequestLog(ctx context.Context, e env, flag, filesDir string, cfg *fileConfig, gopts *gateway.Options) (rlog *requestlog.Logger, closeLog func(), err error) {
	lg, where, cleanup, err := openRequestLog(ctx, e, flag, filesDir, cfg.requestLog)
	if err != nil {
		return nil, nil, err
	}
	if lg == nil {
		return nil, cleanup, nil
	}
	gopts.RequestLog = lg
	gopts.LogContent, gopts.LogContentBytes = cfg.requestLog.content, cfg.requestLog.contentBytes
	fmt.Fprintf(e.stderr, "chorus serve: request log in %s\n", where)
	if gopts.LogContent {
		fmt.Fprintf(e.stderr, "chorus serve: request log keeps each request's body and answer's text (request_log.content)\n")
	}
	return lg, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := lg.Close(cctx); err != nil {
			fmt.Fprintf(e.stderr, "chorus serve: request log: %v\n", err)
		}
		if s := lg.Stats(); s.Dropped > 0 {
			fmt.Fprintf(e.stderr, "chorus serve: request log: %d records could not be written\n", s.Dropped)
		}
		cleanup()
	}, nil
}
