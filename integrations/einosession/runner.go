package einosession

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
)

func init() {
	schema.RegisterName[*CallInfo]("chorus_einosession_call_info")
}

// Runner runs an eino adk agent tree as the RunModel steps of Chorus
// sessions (a session.ModelStep). Build the tree's tools with Tool, the
// tree itself, then the session options with Options.
type Runner struct {
	// running serializes RunModel: eino v0.7.36 agents race when one
	// agent value runs twice at once (ChatModelAgent compiles its graph
	// lazily, unguarded, on each Run and Resume).
	running sync.Mutex
	mu      sync.Mutex
	agent   adk.Agent
	tools   map[string]*wrapped
	order   []string
	errs    []error
}

// New returns a Runner with no tools and no agent yet.
func New() *Runner { return &Runner{tools: map[string]*wrapped{}} }

// ToolOption declares something about a tool.
type ToolOption func(*wrapped)

// Effect declares the tool's own effect: a session.ToolPolicy for it
// overrides it, Options.DefaultEffect applies without either.
func Effect(e session.Effect) ToolOption { return func(w *wrapped) { w.declared = e } }

// RequireApproval makes every call of the tool wait for approval, whatever
// its effect and policy (session.Tool.RequireApproval).
func RequireApproval() ToolOption { return func(w *wrapped) { w.approval = true } }

// Tool wraps t for the agents of the tree. Inside the runner's RunModel a
// call of it interrupts the run (eino's compose.StatefulInterrupt) and
// becomes a CallTool step of the session; the step runs t, and the next
// RunModel resumes the run with the recorded result. Called elsewhere
// (inside another tool's step, as an agent tool's inner agent does, or
// outside a session) it runs t directly. The same t may be wrapped for
// several agents; two different tools under one name make Options fail.
func (r *Runner) Tool(t tool.InvokableTool, opts ...ToolOption) tool.InvokableTool {
	w := &wrapped{r: r, inner: t}
	for _, o := range opts {
		o(w)
	}
	info, err := t.Info(context.Background())
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil || info == nil || info.Name == "" {
		r.errs = append(r.errs, fmt.Errorf("einosession: a tool without a name (Info: %v)", err))
		return w
	}
	w.info, w.name = info, info.Name
	if prev, ok := r.tools[w.name]; ok {
		if !sameTool(prev.inner, t) || prev.declared != w.declared || prev.approval != w.approval {
			r.errs = append(r.errs, fmt.Errorf("einosession: two different tools are named %q: a session step finds its tool by name, so the tools of a tree need distinct names", w.name))
		}
		return prev
	}
	r.tools[w.name] = w
	r.order = append(r.order, w.name)
	return w
}

// SessionTool wraps a Chorus session.Tool for the agents of the tree, such
// as one of mcptools.Set.SessionTools, whose effect comes from a trusted
// MCP server's annotations: its Def is what eino shows the model, its
// Effect and RequireApproval are the tool's own declaration (a
// session.ToolPolicy still overrides the effect), and its CallTool step
// runs its Handler with the session's Call (attempt, idempotency key).
func (r *Runner) SessionTool(t session.Tool) tool.InvokableTool {
	r.mu.Lock()
	prev, ok := r.tools[t.Def.Name]
	r.mu.Unlock()
	if ok {
		if _, same := prev.inner.(*sessionTool); same && prev.declared == t.Effect && prev.approval == t.RequireApproval {
			return prev // the same session tool, for another agent
		}
	}
	st := &sessionTool{t: t}
	opts := []ToolOption{func(w *wrapped) { w.handler, w.timeout = t.Handler, t.Timeout }}
	if t.Effect != "" {
		opts = append(opts, Effect(t.Effect))
	}
	if t.RequireApproval {
		opts = append(opts, RequireApproval())
	}
	return r.Tool(st, opts...)
}

// sessionTool is a session.Tool as an eino tool (outside a session step
// its handler runs with a bare Call).
type sessionTool struct{ t session.Tool }

func (s *sessionTool) Info(context.Context) (*schema.ToolInfo, error) {
	info := &schema.ToolInfo{Name: s.t.Def.Name, Desc: s.t.Def.Description}
	if len(s.t.Def.Parameters) > 0 {
		js := &jsonschema.Schema{}
		if err := json.Unmarshal(s.t.Def.Parameters, js); err != nil {
			return nil, fmt.Errorf("einosession: %s's parameters: %w", s.t.Def.Name, err)
		}
		info.ParamsOneOf = schema.NewParamsOneOfByJSONSchema(js)
	}
	return info, nil
}

func (s *sessionTool) InvokableRun(ctx context.Context, args string, _ ...tool.Option) (string, error) {
	res, err := s.t.Handler(ctx, session.Call{Name: s.t.Def.Name, Arguments: json.RawMessage(args), Effect: s.t.Effect, Attempt: 1})
	return res.Content, err
}

func sameTool(a, b tool.InvokableTool) bool {
	if a == b {
		return true
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer && va.Pointer() == vb.Pointer()
}

// Options returns opt with the runner as its ModelStep running agent and
// the wrapped tools as its Tools. It fails when two different tools share
// a name, or when the tree has none of the runner's tools.
func (r *Runner) Options(agent adk.Agent, opt session.Options) (session.Options, error) {
	if agent == nil {
		return opt, errors.New("einosession: the agent is nil")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := errors.Join(r.errs...); err != nil {
		return opt, err
	}
	r.agent = agent
	def := opt.DefaultEffect
	if def == "" {
		def = session.EffectUnclassified
	}
	for _, name := range r.order {
		w := r.tools[name]
		w.effect = def
		if w.declared != "" {
			w.effect = w.declared
		}
		if p, ok := opt.Policy[name]; ok && p.Effect != "" {
			w.effect = p.Effect
		}
		def := llm.Tool{Name: name, Description: w.info.Desc}
		if w.info.ParamsOneOf != nil {
			if js, err := w.info.ParamsOneOf.ToJSONSchema(); err == nil && js != nil {
				if b, err := json.Marshal(js); err == nil {
					def.Parameters = b
				}
			}
		}
		if st, ok := w.inner.(*sessionTool); ok && len(st.t.Def.Parameters) > 0 {
			def.Parameters = st.t.Def.Parameters
		}
		opt.Tools = append(opt.Tools, session.Tool{Def: def, Effect: w.declared, RequireApproval: w.approval, Handler: w.handle, Timeout: w.timeout})
	}
	opt.ModelStep = r
	return opt, nil
}

// CallInfo is the interrupt info of a tool call that paused the run.
type CallInfo struct {
	Name      string
	Arguments string
	CallID    string
}

// recorded is the resume data of a paused call: its recorded result.
type recorded struct {
	Name   string
	Output string
}

type (
	inStepKey struct{}
	callKey   struct{}
)

// stepCall is what a tool step's context carries for the tools it calls.
type stepCall struct {
	effect session.Effect
	mu     sync.Mutex
	bad    []string // non-read tools an agent tool declared read called
}

// wrapped is a tool of the tree, as Tool returns it.
type wrapped struct {
	r        *Runner
	inner    tool.InvokableTool
	info     *schema.ToolInfo
	name     string
	declared session.Effect
	effect   session.Effect // resolved by Options
	approval bool
	handler  session.Handler // a SessionTool's
	timeout  time.Duration   // a SessionTool's
}

func (w *wrapped) Info(ctx context.Context) (*schema.ToolInfo, error) { return w.inner.Info(ctx) }

func (w *wrapped) InvokableRun(ctx context.Context, args string, opts ...tool.Option) (string, error) {
	if ctx.Value(inStepKey{}) == nil {
		if sc, ok := ctx.Value(callKey{}).(*stepCall); ok && sc.effect == session.EffectRead && w.effect != session.EffectRead {
			// Inside a read step (an agent tool's inner agent): a read
			// step may run again, and would repeat this write.
			sc.mu.Lock()
			sc.bad = append(sc.bad, w.name)
			sc.mu.Unlock()
			return "", fmt.Errorf("einosession: %s (%s) called inside a read step", w.name, w.effect)
		}
		return w.inner.InvokableRun(ctx, args, opts...)
	}
	isResume, hasData, data := compose.GetResumeContext[*recorded](ctx)
	if isResume {
		if !hasData || data == nil || data.Name != w.name {
			return "", fmt.Errorf("%w: the run resumed %s without its recorded result", session.ErrStepFailed, w.name)
		}
		return data.Output, nil
	}
	return "", compose.StatefulInterrupt(ctx, &CallInfo{Name: w.name, Arguments: args, CallID: compose.GetToolCallID(ctx)}, nil)
}

// handle runs one attempt of a call in its CallTool step.
func (w *wrapped) handle(ctx context.Context, c session.Call) (session.Result, error) {
	sc := &stepCall{effect: c.Effect}
	ctx = context.WithValue(ctx, callKey{}, sc)
	if w.handler != nil {
		return w.handler(ctx, c)
	}
	out, err := w.inner.InvokableRun(ctx, string(c.Arguments))
	sc.mu.Lock()
	bad := sc.bad
	sc.mu.Unlock()
	if len(bad) > 0 {
		return session.Result{}, session.ToolErrorf("%s is declared read, but its agent called %s, which is not read: a read step may run again and repeat it; give %s a write effect",
			w.name, strings.Join(bad, ", "), w.name)
	}
	if err != nil {
		var sig *adk.InterruptSignal
		if _, ok := compose.IsInterruptRerunError(err); ok || errors.As(err, &sig) {
			return session.Result{}, session.ToolErrorf("%s asked for a confirmation of its own inside its step (an eino interrupt); use the session's approvals (session.ToolPolicy.RequireApproval) instead", w.name)
		}
		return session.Result{}, err
	}
	return session.Result{Content: out}, nil
}

// runState is the StepOutput.State of a step that paused: eino's
// checkpoint and, by tool call id, the interrupt each call resumes.
type runState struct {
	Checkpoint []byte            `json:"checkpoint"`
	Interrupts map[string]string `json:"interrupts"`
}

// memStore is eino's checkpoint store for one RunModel attempt.
type memStore struct {
	mu   sync.Mutex
	id   string
	data []byte
}

func (s *memStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.id || s.data == nil {
		return nil, false, nil
	}
	return s.data, true, nil
}

func (s *memStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.data = id, append([]byte(nil), b...)
	return nil
}

// control tools steer the run itself: they run inside RunModel.
var controlTools = map[string]bool{adk.TransferToAgentToolName: true, adk.ToolInfoExit.Name: true}

// RunModel runs the tree until every tool call it makes has paused it, or
// it ends: a turn's first step starts a run (checkpoint id: the session
// id) with the session's messages, later steps resume it with the
// recorded results of the calls it paused on.
func (r *Runner) RunModel(ctx context.Context, in session.StepInput) (*session.StepOutput, error) {
	r.mu.Lock()
	agent := r.agent
	r.mu.Unlock()
	if agent == nil {
		return nil, fmt.Errorf("%w: einosession: Options was not called", session.ErrStepFailed)
	}
	r.running.Lock()
	defer r.running.Unlock()
	ctx = context.WithValue(ctx, inStepKey{}, true)
	store := &memStore{}
	runner := adk.NewRunner(ctx, adk.RunnerConfig{Agent: agent, CheckPointStore: store})
	var it *adk.AsyncIterator[*adk.AgentEvent]
	if in.State == nil {
		msgs, err := toSchema(in.Messages)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", session.ErrStepFailed, err)
		}
		it = runner.Run(ctx, msgs, adk.WithCheckPointID(in.Session))
	} else {
		var prev runState
		if err := json.Unmarshal(in.State, &prev); err != nil {
			return nil, fmt.Errorf("%w: einosession: the step's state: %v", session.ErrStepFailed, err)
		}
		_ = store.Set(ctx, in.Session, prev.Checkpoint)
		targets := map[string]any{}
		for _, rec := range in.Results {
			id, ok := prev.Interrupts[rec.ModelCallID]
			if !ok {
				return nil, fmt.Errorf("%w: einosession: call %s (%s) paused no interrupt of the run", session.ErrStepFailed, rec.ModelCallID, rec.Name)
			}
			targets[id] = &recorded{Name: rec.Name, Output: session.FunctionResponse(rec).Content}
		}
		var err error
		it, err = runner.ResumeWithParams(ctx, in.Session, &adk.ResumeParams{Targets: targets})
		if err != nil {
			return nil, err
		}
	}
	return r.drain(in, it, store)
}

// drain reads a run's events up to its end or its pause.
func (r *Runner) drain(in session.StepInput, it *adk.AsyncIterator[*adk.AgentEvent], store *memStore) (*session.StepOutput, error) {
	var (
		usage      llm.Usage
		lastText   string
		texts      []string
		interrupts []*adk.InterruptCtx
		order      = map[string]int{} // tool call id -> its position among the responses' calls
		err        error
	)
	for {
		ev, ok := it.Next()
		if !ok {
			break
		}
		if ev.Err != nil {
			if err == nil {
				err = ev.Err
			}
			continue
		}
		if ev.Output != nil && ev.Output.MessageOutput != nil && err == nil {
			msg, gerr := ev.Output.MessageOutput.GetMessage()
			if gerr != nil {
				err = gerr
				continue
			}
			if msg.Role == schema.Assistant {
				if u := msg.ResponseMeta; u != nil && u.Usage != nil {
					usage = usage.Add(llm.Usage{PromptTokens: u.Usage.PromptTokens, CompletionTokens: u.Usage.CompletionTokens})
				}
				if cerr := checkControl(ev.AgentName, msg); cerr != nil {
					err = cerr
				}
				for _, tc := range msg.ToolCalls {
					if _, seen := order[tc.ID]; !seen {
						order[tc.ID] = len(order)
					}
				}
				if msg.Content != "" {
					lastText = msg.Content
					texts = append(texts, msg.Content)
					if in.Delta != nil {
						in.Delta(llm.Event{Type: llm.EventText, Text: msg.Content})
					}
				}
			}
		}
		if ev.Action != nil && ev.Action.Interrupted != nil {
			for _, ic := range ev.Action.Interrupted.InterruptContexts {
				if ic.IsRootCause {
					interrupts = append(interrupts, ic)
				}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if len(interrupts) == 0 {
		return &session.StepOutput{Result: &llm.ChatResult{Content: lastText, Usage: usage, FinishReason: llm.FinishStop}}, nil
	}
	// The calls in the model's order: eino's tools node pauses them in
	// whatever order its goroutines ran.
	pos := func(ic *adk.InterruptCtx) int {
		if ci, ok := ic.Info.(*CallInfo); ok {
			if n, ok := order[ci.CallID]; ok {
				return n
			}
		}
		return len(order)
	}
	slices.SortStableFunc(interrupts, func(a, b *adk.InterruptCtx) int { return pos(a) - pos(b) })
	if paused := pausedAgents(interrupts); len(paused) > 1 {
		return nil, fmt.Errorf("%w: einosession: the calls of one step pause %d agents at once (%s): eino v0.7.36 resumes parallel branches with a data race of its own (internal/core.PopulateInterruptState), which can crash the process, so only one branch of a parallel agent may call tools in a step",
			session.ErrStepFailed, len(paused), strings.Join(paused, ", "))
	}
	res := &llm.ChatResult{Content: strings.Join(texts, "\n\n"), Usage: usage, FinishReason: llm.FinishToolCalls}
	st := runState{Interrupts: map[string]string{}}
	agents := map[string]string{}
	for i, ic := range interrupts {
		ci, ok := ic.Info.(*CallInfo)
		if !ok {
			return nil, fmt.Errorf("%w: einosession: the run paused for something other than a tool call (%T at %s)", session.ErrStepFailed, ic.Info, ic.ID)
		}
		id := ci.CallID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", in.Step, i)
		}
		for n := 2; st.Interrupts[id] != ""; n++ {
			id = fmt.Sprintf("%s#%d", ci.CallID, n)
		}
		st.Interrupts[id] = ic.ID
		agents[id] = agentOf(ic.Address)
		res.ToolCalls = append(res.ToolCalls, llm.ToolCall{ID: id, Name: ci.Name, Arguments: ci.Arguments})
	}
	store.mu.Lock()
	st.Checkpoint = store.data
	store.mu.Unlock()
	if st.Checkpoint == nil {
		return nil, errors.New("einosession: the run paused without a checkpoint")
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	return &session.StepOutput{Result: res, State: b, Agents: agents}, nil
}

// checkControl fails a response that calls a control tool (transfer,
// exit) together with other tools: eino applies the control tool before
// the other results exist.
func checkControl(agent string, msg *schema.Message) error {
	if len(msg.ToolCalls) < 2 {
		return nil
	}
	var ctl, other []string
	for _, tc := range msg.ToolCalls {
		if controlTools[tc.Function.Name] {
			ctl = append(ctl, tc.Function.Name)
		} else {
			other = append(other, tc.Function.Name)
		}
	}
	if len(ctl) == 0 || len(other) == 0 {
		return nil
	}
	return fmt.Errorf("%w: einosession: agent %s called %s together with %s in one response; a control tool must be called alone",
		session.ErrStepFailed, agent, strings.Join(ctl, ", "), strings.Join(other, ", "))
}

// pausedAgents are the distinct agents whose calls paused the run.
func pausedAgents(ics []*adk.InterruptCtx) []string {
	var out []string
	for _, ic := range ics {
		if a := agentOf(ic.Address); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// agentOf is the innermost agent of an interrupt's address.
func agentOf(addr adk.Address) string {
	name := ""
	for _, s := range addr {
		if s.Type == adk.AddressSegmentAgent {
			name = s.ID
		}
	}
	return name
}

// toSchema converts the session's messages to eino's, leaving out system
// messages (the agents carry their own instructions).
func toSchema(msgs []llm.Message) ([]*schema.Message, error) {
	var out []*schema.Message
	for _, m := range msgs {
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			continue
		case llm.RoleUser:
			out = append(out, userMessage(m))
		case llm.RoleAssistant:
			am := &schema.Message{Role: schema.Assistant, Content: m.Content}
			for _, tc := range m.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, schema.ToolCall{ID: tc.ID, Type: "function", Function: schema.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
			}
			out = append(out, am)
		case llm.RoleTool:
			out = append(out, schema.ToolMessage(m.Content, m.ToolCallID, schema.WithToolName(m.ToolName)))
		default:
			return nil, fmt.Errorf("einosession: a %s message", m.Role)
		}
	}
	return out, nil
}

// userMessage is a user message for eino: its text, and its images and
// documents as parts; media references stay references (WithMedia loads
// them for the model), so eino's checkpoint holds no bytes.
func userMessage(m llm.Message) *schema.Message {
	if !hasMedia(m.Parts) {
		return schema.UserMessage(textOf(m))
	}
	um := &schema.Message{Role: schema.User}
	if m.Content != "" {
		um.UserInputMultiContent = append(um.UserInputMultiContent, schema.MessageInputPart{Type: schema.ChatMessagePartTypeText, Text: m.Content})
	}
	for _, p := range m.Parts {
		c := schema.MessagePartCommon{MIMEType: p.MIMEType}
		if len(p.Data) > 0 {
			b64 := base64.StdEncoding.EncodeToString(p.Data)
			c.Base64Data = &b64
		} else {
			u := p.URL
			c.URL = &u
		}
		switch p.Type {
		case llm.PartText:
			um.UserInputMultiContent = append(um.UserInputMultiContent, schema.MessageInputPart{Type: schema.ChatMessagePartTypeText, Text: p.Text})
		case llm.PartImage:
			um.UserInputMultiContent = append(um.UserInputMultiContent, schema.MessageInputPart{Type: schema.ChatMessagePartTypeImageURL, Image: &schema.MessageInputImage{MessagePartCommon: c}})
		case llm.PartDocument:
			um.UserInputMultiContent = append(um.UserInputMultiContent, schema.MessageInputPart{Type: schema.ChatMessagePartTypeFileURL, File: &schema.MessageInputFile{MessagePartCommon: c}})
		}
	}
	return um
}

func hasMedia(parts []llm.Part) bool {
	for _, p := range parts {
		if p.Type == llm.PartImage || p.Type == llm.PartDocument {
			return true
		}
	}
	return false
}

func textOf(m llm.Message) string {
	s := m.Content
	for _, p := range m.Parts {
		if p.Type == llm.PartText {
			s += p.Text
		}
	}
	return s
}
