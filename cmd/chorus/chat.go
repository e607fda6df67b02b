package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/pipeline"
)

const chatUsage = `usage: chorus chat [-m provider/model]... [flags] PROMPT

Streams PROMPT to every model at once. Output is grouped by model: the first
model to answer streams live, the others are held and printed, in the order
they started answering, as soon as the one before them ends.

  -m, --model M         a model to ask: provider/model or an alias (repeat
                        for several). Default: defaults.chat in chorus.yaml,
                        else sim/echo when no provider key is set, else the
                        default model of every provider with a key
      --system TEXT     a system message
      --max-tokens N    output cap per model
      --json            print the event stream as JSON lines instead
      --config FILE     chorus.yaml: aliases, providers, limits, defaults, sim,
                        mcp_servers
      --mcp SERVER      offer the tools of an MCP server and run a tool loop:
                        a name under mcp_servers in chorus.yaml, or a command
                        line ("mcp-server-filesystem /tmp"; not trusted).
                        Repeat for several. Prints each tool call and result,
                        then the answer (not streamed)

PROMPT is the remaining arguments joined by spaces; "-" reads it from stdin.
Exit status: 0 every model answered, 1 some model failed, 2 usage error.
`

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

type chatOpts struct {
	models    stringList
	system    string
	maxTokens int
	json      bool
	config    string
	mcp       stringList
	prompt    string
}

func parseChatFlags(e env, args []string) (*chatOpts, error) {
	o := &chatOpts{}
	fs := flag.NewFlagSet("chorus chat", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() { fmt.Fprint(e.stderr, chatUsage) }
	fs.Var(&o.models, "m", "")
	fs.Var(&o.models, "model", "")
	fs.StringVar(&o.system, "system", "", "")
	fs.IntVar(&o.maxTokens, "max-tokens", 0, "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.StringVar(&o.config, "config", "", "")
	fs.Var(&o.mcp, "mcp", "")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.maxTokens < 0 {
		return nil, fmt.Errorf("--max-tokens must not be negative, got %d", o.maxTokens)
	}
	o.prompt = strings.Join(fs.Args(), " ")
	if o.prompt == "-" {
		b, err := io.ReadAll(e.stdin)
		if err != nil {
			return nil, fmt.Errorf("reading the prompt from stdin: %w", err)
		}
		o.prompt = strings.TrimSpace(string(b))
	}
	if strings.TrimSpace(o.prompt) == "" {
		return nil, errors.New("a PROMPT is required (after the flags)")
	}
	return o, nil
}

func cmdChat(ctx context.Context, e env, args []string) int {
	o, err := parseChatFlags(e, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		if !isFlagPkgErr(err) {
			fmt.Fprintf(e.stderr, "chorus chat: %v\n", err)
		}
		return 2
	}
	st, err := openStack(e, o.config)
	if err != nil {
		fmt.Fprintf(e.stderr, "chorus chat: %v\n", err)
		return 2
	}
	defer st.close(2 * time.Second)
	models := []string(o.models)
	if len(models) == 0 {
		if models, err = st.defaultChatModels(); err != nil {
			fmt.Fprintf(e.stderr, "chorus chat: -m: %v\n", err)
			return 2
		}
	}
	for _, m := range models {
		if err := st.checkModel(m); err != nil {
			fmt.Fprintf(e.stderr, "chorus chat: -m %s: %v\n", m, err)
			return 2
		}
	}
	req := &llm.ChatRequest{MaxTokens: o.maxTokens}
	if o.system != "" {
		req.Messages = append(req.Messages, llm.SystemText(o.system))
	}
	req.Messages = append(req.Messages, llm.UserText(o.prompt))
	if len(o.mcp) > 0 {
		return chatWithTools(ctx, e, st, o, models, req) // mcp.go
	}
	fan := pipeline.FanOut(ctx, st.rt, req, models...)
	defer fan.Close()

	// One goroutine per branch keeps each model's events in order and
	// marks its end; the printer sees one channel.
	msgs := make(chan chatMsg)
	start := time.Now()
	for i := range models {
		go func() {
			for ev := range fan.Branch(i) {
				select {
				case msgs <- chatMsg{i: i, ev: ev, at: time.Now()}:
				case <-ctx.Done():
				}
			}
			res, err := fan.Result(i)
			select {
			case msgs <- chatMsg{i: i, end: true, res: res, err: err, at: time.Now()}:
			case <-ctx.Done():
			}
		}()
	}
	var p chatPrinter
	if o.json {
		p = &jsonPrinter{w: e.stdout, models: models, start: start}
	} else {
		p = newGroupPrinter(e.stdout, models, start)
	}
	failed := 0
	for ended := 0; ended < len(models); {
		select {
		case m := <-msgs:
			p.print(m)
			if m.end {
				ended++
				if m.err != nil {
					failed++
				}
			}
		case <-ctx.Done():
			fmt.Fprintln(e.stderr, "chorus chat: interrupted")
			return 130
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// defaultChatModels are the models chat asks when -m is not given:
// defaults.chat, else sim/echo with no key, else the default chat model of
// every provider with a key.
func (s *stack) defaultChatModels() ([]string, error) {
	if s.cfg.defaults.chat != "" || len(s.keyed) == 0 {
		m, _, err := s.defaultModel(false)
		return []string{m}, err
	}
	var out []string
	for _, id := range s.keyed {
		for _, d := range defaultModels {
			if d.provider == id && d.chat != "" {
				out = append(out, id+"/"+d.chat)
			}
		}
	}
	if len(out) == 0 {
		_, _, err := s.defaultModel(false)
		return nil, err
	}
	return out, nil
}

// chatMsg is one event of one model, or that model's end.
type chatMsg struct {
	i   int
	ev  llm.Event
	end bool
	res *llm.ChatResult
	err error
	at  time.Time
}

type chatPrinter interface{ print(chatMsg) }

// groupPrinter prints each model's answer as one group: the model that is
// live streams straight through; the others are held until it ends.
type groupPrinter struct {
	w       io.Writer
	models  []string
	start   time.Time
	live    int
	pending [][]chatMsg
	queue   []int // models with held output, in order of first output
	first   []time.Time
	printed int
}

func newGroupPrinter(w io.Writer, models []string, start time.Time) *groupPrinter {
	return &groupPrinter{w: w, models: models, start: start, live: -1,
		pending: make([][]chatMsg, len(models)), first: make([]time.Time, len(models))}
}

func (g *groupPrinter) print(m chatMsg) {
	if g.first[m.i].IsZero() {
		g.first[m.i] = m.at
	}
	if g.live == -1 {
		g.open(m.i)
	}
	if m.i != g.live {
		if len(g.pending[m.i]) == 0 {
			g.queue = append(g.queue, m.i)
		}
		g.pending[m.i] = append(g.pending[m.i], m)
		return
	}
	if g.emit(m) {
		g.next()
	}
}

// open starts model i's group.
func (g *groupPrinter) open(i int) {
	if g.printed > 0 {
		fmt.Fprintln(g.w)
	}
	g.printed++
	fmt.Fprintf(g.w, "== %s ==\n", g.models[i])
	g.live = i
}

// next hands the output on: first every held model that has already
// ended (whole groups, in the order they started answering), then the held
// model that started answering first, which becomes live.
func (g *groupPrinter) next() {
	g.live = -1
	for _, wantEnded := range []bool{true, false} {
		for k := 0; k < len(g.queue); {
			i := g.queue[k]
			held := g.pending[i]
			if ended := held[len(held)-1].end; ended != wantEnded {
				k++
				continue
			}
			g.queue = append(g.queue[:k], g.queue[k+1:]...)
			g.pending[i] = nil
			g.open(i)
			for _, m := range held {
				g.emit(m)
			}
			if !wantEnded {
				return // i is live now
			}
			g.live = -1
		}
	}
}

// emit prints one message of the live model; it reports the model's end.
func (g *groupPrinter) emit(m chatMsg) bool {
	if !m.end {
		switch m.ev.Type {
		case llm.EventText, llm.EventRefusal:
			fmt.Fprint(g.w, m.ev.Text)
		}
		return false
	}
	res := m.res
	if res == nil {
		var se *llm.StreamError
		if errors.As(m.err, &se) {
			res = se.Partial
		}
	}
	if res != nil && res.Content != "" && !strings.HasSuffix(res.Content, "\n") {
		fmt.Fprintln(g.w)
	}
	if res != nil {
		for _, tc := range res.ToolCalls {
			fmt.Fprintf(g.w, "tool call %s(%s)\n", tc.Name, tc.Arguments)
		}
	}
	elapsed := m.at.Sub(g.start).Round(time.Millisecond)
	if m.err != nil {
		fmt.Fprintf(g.w, "-- error after %v: %v\n", elapsed, m.err)
		return true
	}
	finish := string(res.FinishReason)
	if finish == "" {
		finish = "unknown finish"
	}
	ttft := ""
	if !g.first[m.i].IsZero() {
		ttft = fmt.Sprintf(", first output %v", g.first[m.i].Sub(g.start).Round(time.Millisecond))
	}
	fmt.Fprintf(g.w, "-- %s, %d in + %d out tokens, %v%s\n", finish, res.Usage.InputTokens(), res.Usage.CompletionTokens, elapsed, ttft)
	return true
}

// jsonPrinter prints every event as one JSON line, as it arrives.
type jsonPrinter struct {
	w      io.Writer
	models []string
	start  time.Time
}

type jsonEvent struct {
	Model      string     `json:"model"`
	Index      int        `json:"index"`
	Type       string     `json:"type"`
	Text       string     `json:"text,omitempty"`
	ToolIndex  *int       `json:"tool_index,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolName   string     `json:"tool_name,omitempty"`
	Usage      *jsonUsage `json:"usage,omitempty"`
	Finish     *string    `json:"finish_reason,omitempty"`
	Error      string     `json:"error,omitempty"`
	Content    *string    `json:"content,omitempty"`
	ElapsedMS  int64      `json:"elapsed_ms"`
}

type jsonUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens"`
	CacheWriteTokens int `json:"cache_write_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	ReasoningTokens  int `json:"reasoning_tokens"`
}

func usageJSON(u llm.Usage) *jsonUsage {
	return &jsonUsage{u.PromptTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CompletionTokens, u.ReasoningTokens}
}

func (j *jsonPrinter) print(m chatMsg) {
	ev := jsonEvent{Model: j.models[m.i], Index: m.i, ElapsedMS: m.at.Sub(j.start).Milliseconds()}
	if m.end {
		ev.Type = "done"
		if m.err != nil {
			ev.Error = m.err.Error()
		}
		if res := m.res; res != nil {
			f := string(res.FinishReason)
			ev.Finish, ev.Usage, ev.Content = &f, usageJSON(res.Usage), &res.Content
		}
	} else {
		ev.Type = m.ev.Type.String()
		ev.Text = m.ev.Text
		switch m.ev.Type {
		case llm.EventToolCallStart:
			ti := m.ev.ToolIndex
			ev.ToolIndex, ev.ToolCallID, ev.ToolName = &ti, m.ev.ToolCallID, m.ev.ToolName
		case llm.EventToolCallDelta:
			ti := m.ev.ToolIndex
			ev.ToolIndex = &ti
		case llm.EventUsage:
			if m.ev.Usage != nil {
				ev.Usage = usageJSON(*m.ev.Usage)
			}
		case llm.EventFinish:
			f := string(m.ev.Finish)
			ev.Finish = &f
		}
	}
	b, _ := json.Marshal(ev)
	fmt.Fprintf(j.w, "%s\n", b)
}
