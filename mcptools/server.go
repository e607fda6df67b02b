package mcptools

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// Server describes one MCP server: a command to start (stdio) or a URL to
// connect to (Streamable HTTP), exactly one of the two.
type Server struct {
	// Name identifies the server in errors, logs and collisions. It is
	// required and unique within a Set: letters, digits, '-' or '_'.
	Name string
	// Command is the program and its arguments of a stdio server. The Set
	// starts it as its child, restarts it when it dies and stops it in Close.
	Command []string
	// Env adds variables to the command's environment (which is otherwise
	// this process's). Values are secrets: they never appear in an error or
	// a log line.
	Env map[string]string
	// Dir is the command's working directory; empty means this process's.
	Dir string
	// URL is the endpoint of a Streamable HTTP server (http or https).
	URL string
	// Headers are sent with every HTTP request to URL, for authorization.
	// Their values never appear in an error or a log line.
	Headers map[string]string
	// Trusted lets the server's tool annotations set effects: readOnlyHint
	// makes a tool read, idempotentHint an idempotent_write. The annotations
	// of a server that is not trusted are hints only (the MCP specification
	// says so) and never lower an effect: its tools take the policy's effect,
	// else the default (unclassified: one attempt, approval).
	Trusted bool
	// Prefix is prepended to each of the server's tool names as the model
	// sees them ("fs_" makes read_file fs_read_file). Without one, two
	// servers offering the same name is a *CollisionError.
	Prefix string
	// Timeout bounds one tool call, waiting for a restarting server
	// included; zero means Options.CallTimeout.
	Timeout time.Duration
}

var serverNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// toolNamePattern is what every provider accepts as a function name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// field names a field of server i for a *llm.ConfigError.
func field(i int, s *Server, f string) string {
	if s.Name != "" {
		return fmt.Sprintf("servers[%s].%s", s.Name, f)
	}
	return fmt.Sprintf("servers[%d].%s", i, f)
}

// validate checks one server's configuration; errors never quote a value
// that may be a secret (Env, Headers, the URL's user info and query).
func (s *Server) validate(i int) error {
	switch {
	case s.Name == "":
		return &llm.ConfigError{Field: field(i, s, "name"), Msg: "is required"}
	case !serverNamePattern.MatchString(s.Name):
		return &llm.ConfigError{Field: field(i, s, "name"), Msg: fmt.Sprintf("%q must be letters, digits, '-' or '_'", s.Name)}
	case len(s.Command) == 0 && s.URL == "":
		return &llm.ConfigError{Field: field(i, s, "command"), Msg: "a server needs a command or a url"}
	case len(s.Command) > 0 && s.URL != "":
		return &llm.ConfigError{Field: field(i, s, "url"), Msg: "a server has a command or a url, not both"}
	case len(s.Command) > 0 && strings.TrimSpace(s.Command[0]) == "":
		return &llm.ConfigError{Field: field(i, s, "command"), Msg: "the program is empty"}
	case s.URL == "" && len(s.Headers) > 0:
		return &llm.ConfigError{Field: field(i, s, "headers"), Msg: "headers go with a url, not a command"}
	case s.URL != "" && len(s.Env) > 0:
		return &llm.ConfigError{Field: field(i, s, "env"), Msg: "env goes with a command, not a url"}
	case s.Prefix != "" && !toolNamePattern.MatchString(s.Prefix):
		return &llm.ConfigError{Field: field(i, s, "prefix"), Msg: fmt.Sprintf("%q must be letters, digits, '-' or '_'", s.Prefix)}
	case s.Timeout < 0:
		return &llm.ConfigError{Field: field(i, s, "timeout"), Msg: "must not be negative"}
	}
	if s.URL != "" {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return &llm.ConfigError{Field: field(i, s, "url"), Msg: "is not an http(s) URL"}
		}
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return &llm.ConfigError{Field: field(i, s, "env"), Msg: fmt.Sprintf("%q is not a variable name", k)}
		}
	}
	for k := range s.Headers {
		if k == "" || strings.ContainsAny(k, ": \r\n") {
			return &llm.ConfigError{Field: field(i, s, "headers"), Msg: fmt.Sprintf("%q is not a header name", k)}
		}
	}
	return nil
}

// secrets are the strings of s that must never reach an error or a log
// line: env and header values, the URL's password and query values.
func (s *Server) secrets() []string {
	var out []string
	add := func(v string) {
		if len(v) >= 4 {
			out = append(out, v)
		}
	}
	for _, v := range s.Env {
		add(v)
	}
	for _, v := range s.Headers {
		add(v)
		// "Bearer abc": the token alone may be echoed too.
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(tok)
		}
	}
	if u, err := url.Parse(s.URL); err == nil && s.URL != "" {
		if p, ok := u.User.Password(); ok {
			add(p)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	return out
}

// where is how errors and logs name the server's endpoint: the program or
// the URL without user info and query.
func (s *Server) where() string {
	if len(s.Command) > 0 {
		return s.Command[0]
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		return "(url)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// redact replaces every secret in msg.
func redact(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "[redacted]")
	}
	return msg
}
