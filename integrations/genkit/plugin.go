package genkit

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/core"
	"github.com/firebase/genkit/go/core/api"
	"github.com/firebase/genkit/go/genkit"

	"github.com/chorusrt/chorus/llm"
)

// Provider is the plugin's name, the prefix of every model it defines:
// "chorus/openai/gpt-4.1", "chorus/smart".
const Provider = "chorus"

// Client is what the plugin's models call: *runtime.Runtime and
// *providers.Client both satisfy it.
type Client interface {
	Chat(ctx context.Context, req *llm.ChatRequest) (*llm.ChatResult, error)
	Stream(ctx context.Context, req *llm.ChatRequest) (*llm.Stream, error)
}

// aliaser is the part of *runtime.Runtime that lists its aliases.
type aliaser interface {
	Aliases() map[string][]string
}

// Plugin is a Genkit plugin serving Chorus models. Init defines a model
// for each of Models and for each alias the Client serves (a
// *runtime.Runtime's aliases); any other "provider/model" the Client
// serves is resolved on first use (the plugin is a Genkit DynamicPlugin).
type Plugin struct {
	// Client makes the calls. Required.
	Client Client
	// Models are "provider/model" names (or, over a plain providers.Client,
	// bare model names) to define at Init, beside the aliases.
	Models []string
	// Supports, when set, replaces what the models declare to Genkit. The
	// default declares multi-turn, system role, media, tools, tool choice
	// and constrained (native) structured output.
	Supports *ai.ModelSupports

	mu      sync.Mutex
	defined map[string]api.Action
}

var _ api.DynamicPlugin = (*Plugin)(nil)

// Name returns "chorus".
func (p *Plugin) Name() string { return Provider }

// Init defines the configured models and the Client's aliases. A nil
// Client panics, as Genkit's own plugins do for a missing configuration:
// genkit.Init has no error to return.
func (p *Plugin) Init(ctx context.Context) []api.Action {
	if p.Client == nil {
		panic(errors.New("genkit: Plugin.Client is nil"))
	}
	var actions []api.Action
	for _, name := range p.names() {
		actions = append(actions, p.model(name))
	}
	return actions
}

// names are the models defined at Init: Models and the aliases, sorted,
// without duplicates.
func (p *Plugin) names() []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	for _, m := range p.Models {
		add(m)
	}
	if a, ok := p.Client.(aliaser); ok {
		var names []string
		for n := range a.Aliases() {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			add(n)
		}
	}
	return out
}

// ListActions describes the models defined at Init.
func (p *Plugin) ListActions(ctx context.Context) []api.ActionDesc {
	var out []api.ActionDesc
	for _, name := range p.names() {
		out = append(out, p.model(name).Desc())
	}
	return out
}

// ResolveAction defines the model named name ("provider/model" or an
// alias) on first use.
func (p *Plugin) ResolveAction(atype api.ActionType, name string) api.Action {
	if atype != api.ActionTypeModel || name == "" {
		return nil
	}
	return p.model(name)
}

// Model returns the Chorus model named name ("provider/model" or an alias)
// from g, defining it if needed.
func Model(g *genkit.Genkit, name string) ai.Model {
	return genkit.LookupModel(g, api.NewName(Provider, name))
}

func (p *Plugin) model(name string) api.Action {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, ok := p.defined[name]; ok {
		return a
	}
	supports := p.Supports
	if supports == nil {
		supports = &ai.ModelSupports{
			Multiturn:   true,
			SystemRole:  true,
			Media:       true,
			Tools:       true,
			ToolChoice:  true,
			Constrained: ai.ConstrainedSupportAll,
			Output:      []string{"text", "json"},
		}
	}
	label := "Chorus " + name
	if a, ok := p.Client.(aliaser); ok {
		if targets, ok := a.Aliases()[name]; ok {
			label = fmt.Sprintf("Chorus %s (%s)", name, strings.Join(targets, ", "))
		}
	}
	client := p.Client
	m := ai.NewModel(api.NewName(Provider, name), &ai.ModelOptions{Label: label, Supports: supports, Stage: ai.ModelStageStable, ConfigSchema: configSchema},
		func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
			return generate(ctx, client, name, req, cb)
		})
	a := m.(api.Action)
	if p.defined == nil {
		p.defined = map[string]api.Action{}
	}
	p.defined[name] = a
	return a
}

// configSchema is Config's JSON Schema, which the models declare to Genkit
// (its developer UI shows it).
var configSchema = core.InferSchemaMap(Config{})

// generate runs one model call: buffered without a callback, streamed with
// one.
func generate(ctx context.Context, c Client, name string, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
	lreq, err := request(name, req)
	if err != nil {
		return nil, err
	}
	if cb == nil {
		res, err := c.Chat(ctx, lreq)
		if err != nil {
			return nil, err
		}
		return response(req, res), nil
	}
	s, err := c.Stream(ctx, lreq)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for ev, err := range s.All() {
		if err != nil {
			return nil, err
		}
		if part := eventPart(ev); part != nil {
			if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: []*ai.Part{part}}); err != nil {
				return nil, fmt.Errorf("genkit: stream callback: %w", err)
			}
		}
	}
	res, err := s.Result()
	if err != nil {
		return nil, err
	}
	out := response(req, res)
	// Tool requests reach the stream whole, once the answer is complete.
	var calls []*ai.Part
	for _, p := range out.Message.Content {
		if p.IsToolRequest() {
			calls = append(calls, p)
		}
	}
	if len(calls) > 0 {
		if err := cb(ctx, &ai.ModelResponseChunk{Role: ai.RoleModel, Content: calls}); err != nil {
			return nil, fmt.Errorf("genkit: stream callback: %w", err)
		}
	}
	return out, nil
}

func eventPart(ev llm.Event) *ai.Part {
	switch ev.Type {
	case llm.EventText:
		return ai.NewTextPart(ev.Text)
	case llm.EventReasoning:
		return &ai.Part{Kind: ai.PartReasoning, ContentType: "plain/text", Text: ev.Text}
	}
	return nil
}
