package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chorusrt/chorus/batch"
	"github.com/chorusrt/chorus/cluster"
	"github.com/chorusrt/chorus/console"
	"github.com/chorusrt/chorus/keystore"
	"github.com/chorusrt/chorus/requestlog"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// The console's token, for chorus serve and chorus node: --token, else
// $CHORUS_CONSOLE_TOKEN, else one made for the run and printed once on
// stderr (like a notebook server's), so that the console can always act.
func consoleToken(e env, flagValue string) (token string, made bool) {
	if t := strings.TrimSpace(flagValue); t != "" {
		return t, false
	}
	if t := strings.TrimSpace(e.getenv("CHORUS_CONSOLE_TOKEN")); t != "" {
		return t, false
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b), true
}

// announceConsole prints where the console is on w, and the token on
// stderr when the run made it.
func announceConsole(e env, w io.Writer, cmd, base, token string, made bool) {
	fmt.Fprintf(w, "%s: console at %s%s\n", cmd, base, console.PagePrefix)
	if made {
		fmt.Fprintf(e.stderr, "%s: console operator token (made for this run; set --token or CHORUS_CONSOLE_TOKEN to choose it): %s\n", cmd, token)
	}
}

// serveConsole serves a console on its own address (chorus node
// --console-addr) until stop.
func serveConsole(e env, cmd, addr string, opt console.Options, made bool) (stop func(), err error) {
	opt.Loopback = loopbackAddr(addr)
	opt.Logger = slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h, err := console.New(opt)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--console-addr: %w", err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	mux.Handle("/{$}", http.RedirectHandler(console.PagePrefix, http.StatusSeeOther))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(e.stderr, "%s: console: %v\n", cmd, err)
		}
	}()
	announceConsole(e, e.stdout, cmd, "http://"+ln.Addr().String(), opt.Token, made)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}

// serveConsoleMux builds chorus serve's handler: the console (under
// /console/ and /api/console/) beside the gateway (everything else), over
// a session manager journaled in journalPath (SQLite; empty: a journal in
// a temporary directory, removed by closeAll) whose model is model
// (empty: the default model). announce prints where the console is once
// the server listens.
func serveConsoleMux(e env, st *stack, node *cluster.Node, gw http.Handler, batches *batch.Registry, rlog *requestlog.Logger, keys *keystore.Store, addr, journalPath, model, tokenFlag string) (h http.Handler, announce func(base string), closeAll func(), err error) {
	var closers []func()
	closeEach := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closeAll = closeEach
	defer func() {
		if err != nil { // closeAll is nil then: a failed return sets it so
			closeEach()
		}
	}()
	var media session.MediaStore
	if journalPath == "" {
		dir, err := os.MkdirTemp("", "chorus-serve-sessions-")
		if err != nil {
			return nil, nil, nil, err
		}
		closers = append(closers, func() { os.RemoveAll(dir) })
		journalPath, media = filepath.Join(dir, "journal.db"), session.NewLocalMedia(filepath.Join(dir, "media"))
	}
	j, err := store.OpenSQLite(journalPath)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--journal: %w", err)
	}
	closers = append(closers, func() { _ = j.Close() })
	if model == "" {
		if model, _, err = st.defaultModel(false); err != nil {
			return nil, nil, nil, err
		}
	}
	m, err := session.New(session.Options{Journal: j, Model: st.rt, ModelName: model, Media: media,
		Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return nil, nil, nil, err
	}
	closers = append(closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Close(ctx)
	})
	rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.Recover(rctx); err != nil {
		return nil, nil, nil, fmt.Errorf("recovering the sessions of %s: %w", journalPath, err)
	}
	token, made := consoleToken(e, tokenFlag)
	copt := console.Options{Runtime: st.rt, Sessions: m, Batches: batches, RequestLog: rlog, KeyStore: keys, Token: token, Loopback: loopbackAddr(addr),
		Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if node != nil { // the Cluster page
		copt.Cluster, copt.BudgetOwners = node, budgetOwners(node)
	}
	ch, err := console.New(copt)
	if err != nil {
		return nil, nil, nil, err
	}
	mux := http.NewServeMux()
	ch.Register(mux)
	mux.Handle("/", gw)
	return mux, func(base string) { announceConsole(e, e.stderr, "chorus serve", base, token, made) }, closeAll, nil
}
