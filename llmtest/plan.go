package llmtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/chorusrt/chorus/llm"
)

// chunkSize is the approximate size of a generated delta, in bytes.
const chunkSize = 4

// thought is one reasoning block of a plan.
type thought struct {
	deltas    []string
	text      string
	signature string
	redacted  bool
	data      string
}

// toolPlan is one tool call of a plan.
type toolPlan struct {
	id, name, args, signature string
	frags                     []string
}

// plan is a Reply resolved for one request: deltas split, ids and usage
// filled in. It is format-independent; each format renders it.
type plan struct {
	thoughts  []thought
	refusal   []string
	text      []string
	tools     []toolPlan
	finish    llm.FinishReason
	rawFinish string
	usage     llm.Usage
	model     string
	signature string // Gemini text-part signature
	header    map[string]string
	seq       int // request sequence number, for ids
	logprobs  []llm.TokenLogprob
}

// split cuts s into chunks of about n bytes, never inside a rune.
func split(s string, n int) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, len(s)/n+1)
	for len(s) > 0 {
		i := 0
		for i < len(s) && i < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// newPlan resolves r for a request whose body is bodyLen bytes long and
// names model (possibly empty). seq numbers the request.
func newPlan(r *Reply, bodyLen int, model string, seq int) *plan {
	p := &plan{model: r.Model, header: r.Header, seq: seq, rawFinish: r.RawFinish}
	if p.model == "" {
		p.model = model
	}
	if p.model == "" {
		p.model = "llmtest-model"
	}
	if len(r.Thinking) > 0 {
		for _, b := range r.Thinking {
			if b.Redacted {
				p.thoughts = append(p.thoughts, thought{redacted: true, data: b.Data})
				continue
			}
			p.thoughts = append(p.thoughts, thought{deltas: split(b.Text, chunkSize), text: b.Text, signature: b.Signature})
			p.signature = b.Signature
		}
	} else if r.Reasoning != "" || r.Signature != "" {
		p.thoughts = []thought{{deltas: split(r.Reasoning, chunkSize), text: r.Reasoning, signature: r.Signature}}
	}
	if r.Signature != "" {
		p.signature = r.Signature
	}
	p.refusal = split(r.Refusal, chunkSize)
	if len(r.Deltas) > 0 {
		for _, d := range r.Deltas {
			if d != "" {
				p.text = append(p.text, d)
			}
		}
	} else {
		p.text = split(r.Text, chunkSize)
	}
	for _, tc := range r.ToolCalls {
		t := toolPlan{id: tc.ID, name: tc.Name, args: tc.Arguments, signature: tc.Signature}
		t.frags = split(t.args, chunkSize)
		p.tools = append(p.tools, t)
	}
	p.finish = r.Finish
	p.logprobs = r.Logprobs
	if p.finish == "" {
		switch {
		case len(p.tools) > 0:
			p.finish = llm.FinishToolCalls
		case len(p.refusal) > 0:
			p.finish = llm.FinishContentFilter
		default:
			p.finish = llm.FinishStop
		}
	}
	if r.Usage != nil {
		p.usage = *r.Usage
	} else {
		reasoning := 0
		for _, t := range p.thoughts {
			reasoning += len(t.deltas)
		}
		completion := reasoning + len(p.refusal) + len(p.text)
		for _, t := range p.tools {
			completion += len(t.frags)
		}
		p.usage = llm.Usage{PromptTokens: bodyLen / 4, CompletionTokens: completion, ReasoningTokens: reasoning}
	}
	return p
}

// toolID is the id of call i, or a deterministic one with prefix.
func (p *plan) toolID(i int, prefix string) string {
	if p.tools[i].id != "" {
		return p.tools[i].id
	}
	return fmt.Sprintf("%s%d", prefix, i)
}

// textString is the whole text of the plan.
func (p *plan) textString() string { return join(p.text) }

// reasoningString is all visible reasoning, blocks concatenated.
func (p *plan) reasoningString() string {
	var b bytes.Buffer
	for _, t := range p.thoughts {
		b.WriteString(t.text)
	}
	return b.String()
}

func join(parts []string) string {
	var b bytes.Buffer
	for _, s := range parts {
		b.WriteString(s)
	}
	return b.String()
}

// argsObject returns a tool call's arguments as a JSON object for formats
// that carry them parsed (Anthropic buffered input, Gemini args).
func argsObject(args string) json.RawMessage {
	b := bytes.TrimSpace([]byte(args))
	if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(b)
}

// marshal encodes v without HTML escaping. The values marshalled here are
// plain structs, maps and validated raw messages, so an error cannot occur
// in practice; it still degrades to "{}" rather than panicking.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
