package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/console"
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

// announceConsole prints where the console is, and the token when the run
// made it.
func announceConsole(e env, cmd, base, token string, made bool) {
	fmt.Fprintf(e.stdout, "%s: console at %s%s\n", cmd, base, console.PagePrefix)
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
	announceConsole(e, cmd, "http://"+ln.Addr().String(), opt.Token, made)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}, nil
}
