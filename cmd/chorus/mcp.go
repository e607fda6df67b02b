package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/mcptools"
	"github.com/chorusrt/chorus/pipeline"
)

// mcpServers parses mcp_servers: in chorus.yaml:
//
//	mcp_servers:
//	  - name: fs                       # required, unique
//	    command: [mcp-server-filesystem, /srv/data]   # or one string, split on spaces
//	    env: {LOG_LEVEL: warn}         # command servers; values may be ${VAR}
//	    trusted: true                  # annotations may set effects
//	  - name: tracker
//	    url: https://mcp.example.com/mcp
//	    headers: {Authorization: "Bearer ${TRACKER_TOKEN}"}   # url servers
//	    prefix: tr_                    # prepended to its tool names
//	    timeout: 30s                   # per call
func (p *configParser) mcpServers(n *yaml.Node, cfg *fileConfig) error {
	if n.Kind != yaml.SequenceNode {
		return p.errf(n, "mcp_servers: want a list of {name, command or url, env, headers, trusted, prefix, timeout}")
	}
	seen := map[string]bool{}
	for i, item := range n.Content {
		what := fmt.Sprintf("mcp_servers[%d]", i)
		var sv mcptools.Server
		strMap := func(v *yaml.Node, key string) (map[string]string, error) {
			out := map[string]string{}
			err := p.mapping(v, what+"."+key, func(k string, kn, vn *yaml.Node) error {
				if vn.Kind != yaml.ScalarNode {
					return p.errf(vn, "%s.%s.%s: want a string", what, key, k)
				}
				out[k] = vn.Value
				return nil
			})
			return out, err
		}
		err := p.mapping(item, what, func(key string, k, v *yaml.Node) error {
			var err error
			switch key {
			case "name":
				sv.Name, err = p.str(v, what+".name")
				if err == nil && !mcpNamePattern.MatchString(sv.Name) {
					err = p.errf(v, "%s.name: %q must be letters, digits, '-' or '_'", what, sv.Name)
				}
			case "command":
				switch v.Kind {
				case yaml.ScalarNode:
					sv.Command = strings.Fields(v.Value)
				case yaml.SequenceNode:
					for j, a := range v.Content {
						if a.Kind != yaml.ScalarNode {
							return p.errf(a, "%s.command[%d]: want a string", what, j)
						}
						sv.Command = append(sv.Command, a.Value)
					}
				}
				if len(sv.Command) == 0 || sv.Command[0] == "" {
					err = p.errf(v, "%s.command: want a program and its arguments", what)
				}
			case "url":
				sv.URL, err = p.str(v, what+".url")
			case "env":
				sv.Env, err = strMap(v, "env")
			case "headers":
				sv.Headers, err = strMap(v, "headers")
			case "trusted":
				if v.Kind != yaml.ScalarNode || (v.Value != "true" && v.Value != "false") {
					return p.errf(v, "%s.trusted: want true or false", what)
				}
				sv.Trusted = v.Value == "true"
			case "prefix":
				sv.Prefix, err = p.str(v, what+".prefix")
			case "timeout":
				d, perr := time.ParseDuration(strings.TrimSpace(v.Value))
				if v.Kind != yaml.ScalarNode || perr != nil || d <= 0 {
					return p.errf(v, "%s.timeout: want a duration like 30s, got %q", what, v.Value)
				}
				sv.Timeout = d
			default:
				err = p.errf(k, "%s: unknown key %q (known: name, command, url, env, headers, trusted, prefix, timeout)", what, key)
			}
			return err
		})
		if err != nil {
			return err
		}
		switch {
		case sv.Name == "":
			return p.errf(item, "%s: name is missing", what)
		case seen[sv.Name]:
			return p.errf(item, "%s: name %q appears twice", what, sv.Name)
		case len(sv.Command) == 0 && sv.URL == "":
			return p.errf(item, "%s (%s): give a command or a url", what, sv.Name)
		case len(sv.Command) > 0 && sv.URL != "":
			return p.errf(item, "%s (%s): give a command or a url, not both", what, sv.Name)
		}
		seen[sv.Name] = true
		cfg.mcp = append(cfg.mcp, mcpServerDef{Server: sv, line: item.Line})
	}
	return nil
}

// mcpServerDef is one server of mcp_servers and its line.
type mcpServerDef struct {
	mcptools.Server
	line int
}

var (
	adHocName      = regexp.MustCompile(`[^A-Za-z0-9_-]+`)
	mcpNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
)

// mcpServersFor resolves the --mcp values: a name of mcp_servers, else a
// command line (a server that is not trusted, named after its program).
// ${VAR} in env and header values of the file is expanded from getenv.
func (c *fileConfig) mcpServersFor(values []string, getenv func(string) string) ([]mcptools.Server, error) {
	var out []mcptools.Server
	used := map[string]bool{}
	for _, v := range values {
		var sv mcptools.Server
		found := false
		for _, d := range c.mcp {
			if d.Name == v {
				sv, found = d.Server, true
				break
			}
		}
		if !found {
			args := strings.Fields(v)
			if len(args) == 0 {
				return nil, fmt.Errorf("--mcp: empty value")
			}
			if _, lerr := exec.LookPath(args[0]); lerr != nil {
				names := make([]string, len(c.mcp))
				for i, d := range c.mcp {
					names[i] = d.Name
				}
				return nil, fmt.Errorf("--mcp %s: neither a server of %s (mcp_servers: %s) nor a command: %v", v, c.path, strings.Join(names, ", "), lerr)
			}
			sv = mcptools.Server{Name: strings.Trim(adHocName.ReplaceAllString(filepath.Base(args[0]), "_"), "_"), Command: args}
		}
		if sv.Name == "" {
			sv.Name = "mcp"
		}
		for base, k := sv.Name, 2; used[sv.Name]; k++ {
			sv.Name = fmt.Sprintf("%s_%d", base, k)
		}
		used[sv.Name] = true
		expand := func(m map[string]string) map[string]string {
			if m == nil {
				return nil
			}
			out := make(map[string]string, len(m))
			for k, val := range m {
				out[k] = os.Expand(val, getenv)
			}
			return out
		}
		sv.Env, sv.Headers = expand(sv.Env), expand(sv.Headers)
		out = append(out, sv)
	}
	return out, nil
}

// chatWithTools runs a tool loop per model with the tools of the --mcp
// servers and prints, per model, each tool call and its result, then the
// answer.
func chatWithTools(ctx context.Context, e env, st *stack, o *chatOpts, models []string, req *llm.ChatRequest) int {
	servers, err := st.cfg.mcpServersFor(o.mcp, e.getenv)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus chat: %v\n", err)
		return 2
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	set, err := mcptools.Start(sctx, mcptools.Options{Servers: servers,
		Logger: slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	cancel()
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus chat: --mcp: %v\n", err)
		return 2
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = set.Close(cctx)
	}()
	tools := set.ToolSet()
	failed := 0
	for i, model := range models {
		r := *req
		r.Model = model
		res, err := pipeline.ToolLoop(ctx, st.rt, &r, tools, pipeline.ToolLoopOptions{})
		if ctx.Err() != nil {
			fmt.Fprintln(e.stderr, "chorus chat: interrupted")
			return 130
		}
		if err != nil {
			failed++
		}
		if o.json {
			printToolLoopJSON(e.stdout, i, model, res, err)
			continue
		}
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		fmt.Fprintf(e.stdout, "== %s ==\n", model)
		printToolLoop(e.stdout, res, err)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

func printToolLoop(w io.Writer, res *pipeline.ToolLoopResult, err error) {
	if res != nil {
		calls := map[string]llm.ToolCall{}
		for _, m := range res.Messages {
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = tc
			}
			if m.Role != llm.RoleTool {
				continue
			}
			tc := calls[m.ToolCallID]
			status := "->"
			if m.IsError {
				status = "-> error:"
			}
			fmt.Fprintf(w, "tool %s(%s) %s %s", tc.Name, tc.Arguments, status, m.Content)
			for _, p := range m.Parts {
				if p.Type == llm.PartImage {
					fmt.Fprintf(w, " [image %s, %d bytes]", p.MIMEType, len(p.Data))
				}
			}
			fmt.Fprintln(w)
		}
		if res.Result != nil && err == nil {
			fmt.Fprint(w, res.Result.Content)
			if !strings.HasSuffix(res.Result.Content, "\n") {
				fmt.Fprintln(w)
			}
		}
	}
	if err != nil {
		fmt.Fprintf(w, "-- error: %v\n", err)
		return
	}
	fmt.Fprintf(w, "-- %s, %d model call(s), %d in + %d out tokens\n", res.Result.FinishReason, res.Turns, res.Usage.InputTokens(), res.Usage.CompletionTokens)
}

// toolLoopLine is one --json line of a chat with tools.
type toolLoopLine struct {
	Model     string `json:"model"`
	Index     int    `json:"index"`
	Type      string `json:"type"` // tool_result or done
	ToolName  string `json:"tool_name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
	Images    int    `json:"images,omitempty"`
	Turns     int    `json:"turns,omitempty"`
	Error     string `json:"error,omitempty"`
}

func printToolLoopJSON(w io.Writer, i int, model string, res *pipeline.ToolLoopResult, err error) {
	enc := json.NewEncoder(w)
	done := toolLoopLine{Model: model, Index: i, Type: "done"}
	if res != nil {
		calls := map[string]llm.ToolCall{}
		for _, m := range res.Messages {
			for _, tc := range m.ToolCalls {
				calls[tc.ID] = tc
			}
			if m.Role == llm.RoleTool {
				tc := calls[m.ToolCallID]
				_ = enc.Encode(toolLoopLine{Model: model, Index: i, Type: "tool_result", ToolName: tc.Name, Arguments: tc.Arguments,
					Content: m.Content, IsError: m.IsError, Images: len(m.Parts)})
			}
		}
		done.Turns = res.Turns
		if res.Result != nil {
			done.Content = res.Result.Content
		}
	}
	if err != nil {
		done.Error = err.Error()
	}
	_ = enc.Encode(done)
}
