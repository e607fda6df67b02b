package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/chorusrt/chorus/console"
)

const sessionsUsage = `usage: chorus sessions <list|show|approve|reject|cancel> [flags] [args]

Reads and resolves the durable sessions of a running chorus serve or chorus
node, through its console API (/api/console/...).

  list [--state S]             the sessions; S: waiting_approval, running,
                               failed, idle
  show ID                      one session: state, pending approvals, tool
                               calls, timeline
  approve ID [INTERRUPT]       approve a pending call (INTERRUPT may be left
  reject ID [INTERRUPT]        out when the session has exactly one)
  cancel ID                    cancel the session's turn

Flags (before or after the arguments):
  --addr URL     the server (default $CHORUS_CONSOLE_ADDR, else
                 http://127.0.0.1:8080)
  --token T      the operator token (default $CHORUS_CONSOLE_TOKEN)
  --note TEXT    approve/reject: the note the model sees with a rejection
  --json         print the API's JSON instead of text

Exit status: 0 done; 1 refused (an already-resolved approval, an unknown
session, no token...); 2 usage error.
`

// consoleClient calls a console's API.
type consoleClient struct {
	base  string
	token string
	http  *http.Client
}

// apiError is a refusal of the console API.
type apiError struct {
	status int
	info   console.ErrorInfo
}

func (e *apiError) Error() string {
	s := e.info.Code
	if e.info.Code == "already_resolved" && e.info.Approved != nil {
		what := "rejected"
		if *e.info.Approved {
			what = "approved"
		}
		if e.info.Expired {
			what = "expired"
		}
		s = "already resolved (" + what
		if e.info.Reason != "" {
			s += ": " + e.info.Reason
		}
		return s + ")"
	}
	if e.info.Message != "" {
		s += ": " + e.info.Message
	}
	return s
}

func (c *consoleClient) do(ctx context.Context, method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+console.APIPrefix+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 300 {
		var eb console.ErrorBody
		if json.Unmarshal(raw, &eb) != nil || eb.Error.Code == "" {
			return nil, &apiError{status: res.StatusCode, info: console.ErrorInfo{Code: fmt.Sprintf("http_%d", res.StatusCode), Message: strings.TrimSpace(string(raw))}}
		}
		return nil, &apiError{status: res.StatusCode, info: eb.Error}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return nil, fmt.Errorf("decoding the answer of %s: %w", path, err)
		}
	}
	return raw, nil
}

func cmdSessions(ctx context.Context, e env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(e.stderr, sessionsUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sub := args[0]
	fs := flag.NewFlagSet("chorus sessions "+sub, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, sessionsUsage) }
	addr := fs.String("addr", "", "")
	token := fs.String("token", "", "")
	note := fs.String("note", "", "")
	state := fs.String("state", "", "")
	asJSON := fs.Bool("json", false, "")
	// Flags may come before or after the arguments.
	pos, code, ok := parseInterspersed(fs, args[1:])
	if !ok {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(e.stderr, "chorus sessions %s: "+format+"\n", append([]any{sub}, a...)...)
		return code
	}
	c, err := newConsoleClient(e, *addr, *token)
	if err != nil {
		return fail(2, "%v", err)
	}
	defer c.http.CloseIdleConnections()
	want := map[string]int{"list": 0, "show": 1, "cancel": 1}
	switch sub {
	case "list", "show", "cancel":
		if len(pos) != want[sub] {
			return fail(2, "want %d argument(s), got %d (see chorus sessions -h)", want[sub], len(pos))
		}
	case "approve", "reject":
		if len(pos) < 1 || len(pos) > 2 {
			return fail(2, "want ID [INTERRUPT]")
		}
	default:
		fmt.Fprintf(e.stderr, "chorus sessions: unknown subcommand %q\n\n%s", sub, sessionsUsage)
		return 2
	}
	if *state != "" && sub != "list" {
		return fail(2, "--state is for list")
	}
	if *note != "" && sub != "approve" && sub != "reject" {
		return fail(2, "--note is for approve and reject")
	}
	err = nil
	switch sub {
	case "list":
		err = sessionsList(ctx, e, c, *state, *asJSON)
	case "show":
		err = sessionsShow(ctx, e, c, pos[0], *asJSON)
	case "approve", "reject":
		interrupt := ""
		if len(pos) == 2 {
			interrupt = pos[1]
		}
		err = sessionsResolve(ctx, e, c, pos[0], interrupt, sub == "approve", *note, *asJSON)
	case "cancel":
		var raw []byte
		raw, err = c.do(ctx, http.MethodPost, "sessions/"+url.PathEscape(pos[0])+"/cancel", struct{}{}, nil)
		if err == nil {
			if *asJSON {
				e.stdout.Write(raw)
			} else {
				fmt.Fprintf(e.stdout, "%s: cancel requested\n", pos[0])
			}
		}
	}
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return fail(1, "%v", ae)
		}
		return fail(1, "%v", err)
	}
	return 0
}

func sessionsList(ctx context.Context, e env, c *consoleClient, state string, asJSON bool) error {
	q := ""
	if state != "" {
		q = "?state=" + url.QueryEscape(state)
	}
	var v console.SessionsView
	raw, err := c.do(ctx, http.MethodGet, "sessions"+q, nil, &v)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = e.stdout.Write(raw)
		return err
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tSTATE\tSTEP\tTURN\tPENDING\tLAST TURN\tMODEL CALLS")
	for _, s := range v.Sessions {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%d\n", oneLine(s.ID), s.State, s.Step, s.Turn, s.Pending, orDash(s.LastStatus), s.ModelCalls)
	}
	return tw.Flush()
}

func sessionsShow(ctx context.Context, e env, c *consoleClient, id string, asJSON bool) error {
	var v console.SessionView
	raw, err := c.do(ctx, http.MethodGet, "sessions/"+url.PathEscape(id), nil, &v)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = e.stdout.Write(raw)
		return err
	}
	w := e.stdout
	fmt.Fprintf(w, "session %s: %s (step %s, turn %d, last turn %s, %d model calls, tokens %d in / %d out)\n",
		oneLine(v.ID), v.State, v.Step, v.Turn, orDash(v.LastStatus), v.ModelCalls, v.Usage.PromptTokens, v.Usage.CompletionTokens)
	if v.Answer != "" {
		fmt.Fprintf(w, "answer: %s\n", oneLine(v.Answer))
	}
	if len(v.Approvals) > 0 {
		fmt.Fprintln(w, "\npending approvals:")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  INTERRUPT\tTOOL\tEFFECT\tDEADLINE\tARGUMENTS")
		for _, a := range v.Approvals {
			dl := "-"
			if a.Deadline != nil {
				dl = a.Deadline.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", oneLine(a.Interrupt), oneLine(a.Tool), a.Effect, dl, oneLine(a.Arguments))
		}
		tw.Flush()
	}
	if len(v.Tools) > 0 {
		fmt.Fprintln(w, "\ntool calls:")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  TURN\tCALL\tTOOL\tEFFECT\tATTEMPTS\tSTATUS\tRESULT")
		for _, r := range v.Tools {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Turn, oneLine(r.ID), oneLine(r.Name), r.Effect, r.Attempts, orDash(r.Status), clipLine(r.Result+r.Error, 80))
		}
		tw.Flush()
	}
	if len(v.Timeline) > 0 {
		fmt.Fprintln(w, "\ntimeline:")
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  SEQ\tAT\tRECORD\tTURN\tSTEP\tTOOL\tSTATUS\tCONTENT")
		for _, t := range v.Timeline {
			status := t.Status
			if t.Approved != nil {
				status = map[bool]string{true: "approved", false: "rejected"}[*t.Approved]
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", t.Seq, t.At.Format("15:04:05.000"), t.Kind, t.Turn, t.Step, oneLine(t.Tool), orDash(status), clipLine(t.Text, 80))
		}
		tw.Flush()
	}
	return nil
}

func sessionsResolve(ctx context.Context, e env, c *consoleClient, id, interrupt string, approve bool, note string, asJSON bool) error {
	if interrupt == "" {
		var v console.SessionView
		if _, err := c.do(ctx, http.MethodGet, "sessions/"+url.PathEscape(id), nil, &v); err != nil {
			return err
		}
		switch len(v.Approvals) {
		case 0:
			return fmt.Errorf("session %s has no pending approval", id)
		case 1:
			interrupt = v.Approvals[0].Interrupt
		default:
			ids := make([]string, len(v.Approvals))
			for i, a := range v.Approvals {
				ids[i] = a.Interrupt + " (" + a.Tool + ")"
			}
			return fmt.Errorf("session %s has %d pending approvals: name one of %s", id, len(ids), strings.Join(ids, ", "))
		}
	}
	verb := "approve"
	if !approve {
		verb = "reject"
	}
	raw, err := c.do(ctx, http.MethodPost, "sessions/"+url.PathEscape(id)+"/"+verb, console.ResolveRequest{Interrupt: interrupt, Note: note}, nil)
	if err != nil {
		return err
	}
	if asJSON {
		_, err = e.stdout.Write(raw)
		return err
	}
	fmt.Fprintf(e.stdout, "%s %s: %sd\n", id, interrupt, verb)
	return nil
}

// oneLine keeps a value on one line of a table (content from models and
// tools may hold newlines and control characters).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func clipLine(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parseInterspersed parses fs's flags before, between and after the
// positional arguments of args, which it returns. When !ok the command
// returns code: 0 for -h, 2 for a bad flag.
func parseInterspersed(fs *flag.FlagSet, args []string) (pos []string, code int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, 0, false
			}
			return nil, 2, false
		}
		if fs.NArg() == 0 {
			return pos, 0, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// newConsoleClient is the client of the console at addr ($CHORUS_CONSOLE_ADDR,
// else http://127.0.0.1:8080, when empty) with token ($CHORUS_CONSOLE_TOKEN
// when empty), for chorus sessions and chorus keys.
func newConsoleClient(e env, addr, token string) (*consoleClient, error) {
	if addr == "" {
		addr = e.getenv("CHORUS_CONSOLE_ADDR")
	}
	if addr == "" {
		addr = "http://127.0.0.1:8080"
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--addr %q: want http://HOST:PORT", addr)
	}
	if token == "" {
		token = e.getenv("CHORUS_CONSOLE_TOKEN")
	}
	return &consoleClient{base: strings.TrimRight(u.String(), "/"), token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}
