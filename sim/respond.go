package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// Marker begins every simulated text answer.
const Marker = "[simulated"

// bytesPerToken is how llmtest cuts a text into deltas, each counted as
// one completion token.
const bytesPerToken = 4

var simHeader = map[string]string{Header: "true"}

// statusDirective is "[sim:status=NNN]" in a prompt.
var statusDirective = regexp.MustCompile(`\[sim:status=(\d{3})\]`)

// Responder returns the simulator's answer function for an llmtest server
// (llmtest.Server.SetResponder): the conventions of the package doc, with
// each answer's completion tokens spread at tokensPerSecond (zero: at once).
// It is safe for concurrent use, and deterministic: the same request gets
// the same answer.
func Responder(tokensPerSecond float64) func(llmtest.Recorded) llmtest.Step {
	return func(r llmtest.Recorded) llmtest.Step {
		req, ok := parseRequest(r)
		if !ok {
			// Embeddings, model lists, token counts, speech: llmtest's own
			// deterministic answers, marked as simulated.
			return llmtest.Respond(llmtest.Reply{Text: "[simulated transcript]", Header: simHeader})
		}
		last := lastUser(req)
		if m := statusDirective.FindStringSubmatch(last); m != nil {
			status, _ := strconv.Atoi(m[1])
			return llmtest.Fail(llmtest.Fault{Status: status, Header: simHeader,
				Message: fmt.Sprintf("simulated failure: the prompt asked for [sim:status=%d]", status)})
		}
		reply := answer(req, last)
		reply.Header = simHeader
		if tokensPerSecond > 0 {
			if d := drip(reply, tokensPerSecond); d > 0 {
				return llmtest.Step{Reply: &reply, Fault: &llmtest.Fault{Kind: llmtest.FaultSlowDrip, Stall: d, Reply: &reply}}
			}
		}
		return llmtest.Respond(reply)
	}
}

// drip is how long an answer takes at tps completion tokens per second.
func drip(r llmtest.Reply, tps float64) time.Duration {
	n := (len(r.Text) + bytesPerToken - 1) / bytesPerToken
	for _, tc := range r.ToolCalls {
		n += (len(tc.Arguments) + bytesPerToken - 1) / bytesPerToken
	}
	return time.Duration(float64(n) / tps * float64(time.Second))
}

// lastUser is the text of the last user message.
func lastUser(req *request) string {
	for i := len(req.messages) - 1; i >= 0; i-- {
		if req.messages[i].role == "user" {
			return req.messages[i].text
		}
	}
	return ""
}

// trailingToolResults are the tool results after the last assistant or
// user turn, when the conversation ends with them.
func trailingToolResults(req *request) []message {
	i := len(req.messages)
	for i > 0 && req.messages[i-1].role == "tool" {
		i--
	}
	return req.messages[i:]
}

// answer is the reply to a chat request.
func answer(req *request, last string) llmtest.Reply {
	if results := trailingToolResults(req); len(results) > 0 {
		parts := make([]string, len(results))
		for i, m := range results {
			name := m.toolName
			if name == "" {
				name = "tool"
			}
			parts[i] = name + " -> " + clip(oneLine(m.text), 200)
		}
		return capped(req, fmt.Sprintf("%s] received %d tool result(s): %s.", prefix(req.model), len(results), strings.Join(parts, "; ")))
	}
	if calls := toolCalls(req, last); len(calls) > 0 {
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c.Name
		}
		return llmtest.Reply{Text: prefix(req.model) + "] calling " + strings.Join(names, ", ") + ".", ToolCalls: calls}
	}
	if strings.EqualFold(req.model, "echo") {
		return capped(req, Marker+"] "+last)
	}
	return capped(req, prefix(req.model)+"] "+prose(req.model, last))
}

// prefix is the opening of a text answer, without its closing bracket:
// "[simulated" for echo, "[simulated <model>" otherwise.
func prefix(model string) string {
	if strings.EqualFold(model, "echo") || model == "" {
		return Marker
	}
	return Marker + " " + model
}

// capped applies the request's output cap: text beyond maxTokens tokens
// (about 4 bytes each) is cut, with finish reason length. The opening
// marker is always kept whole.
func capped(req *request, text string) llmtest.Reply {
	if req.maxTokens <= 0 || len(text) <= req.maxTokens*bytesPerToken {
		return llmtest.Reply{Text: text}
	}
	n := max(req.maxTokens*bytesPerToken, len(Marker)+1)
	for n > 0 && n < len(text) && !utf8.RuneStart(text[n]) {
		n--
	}
	return llmtest.Reply{Text: text[:n], Finish: llm.FinishLength}
}

// toolCalls are the calls the request asks for, by the convention of the
// package doc.
func toolCalls(req *request, last string) []llm.ToolCall {
	if len(req.tools) == 0 || req.choice.mode == "none" {
		return nil
	}
	type named struct {
		tool toolDef
		at   int
	}
	var picks []named
	for _, t := range req.tools {
		if t.name == "" {
			continue
		}
		if at := wordIndex(last, t.name); at >= 0 {
			picks = append(picks, named{t, at})
		}
	}
	slices.SortStableFunc(picks, func(a, b named) int { return a.at - b.at })
	switch req.choice.mode {
	case "tool":
		for _, t := range req.tools {
			if t.name == req.choice.name {
				at := wordIndex(last, t.name)
				picks = []named{{t, at}}
				break
			}
		}
	case "required":
		if len(picks) == 0 {
			picks = []named{{req.tools[0], -1}}
		}
	}
	calls := make([]llm.ToolCall, 0, len(picks))
	for i, p := range picks {
		args := ""
		if p.at >= 0 {
			args = objectAfter(last[p.at+len(p.tool.name):])
		}
		if args == "" {
			args = argsFromSchema(p.tool.schema)
		}
		idPrefix := "call_sim_"
		if req.format == llmtest.FormatAnthropic {
			idPrefix = "toolu_sim_"
		}
		calls = append(calls, llm.ToolCall{
			ID:        idPrefix + hashHex(req.model, last, p.tool.name, strconv.Itoa(i), strconv.Itoa(len(req.messages))),
			Name:      p.tool.name,
			Arguments: args,
		})
	}
	return calls
}

// wordIndex is the position of name in s as a whole word (not inside a
// longer identifier), or -1.
func wordIndex(s, name string) int {
	for off := 0; off < len(s); {
		i := strings.Index(s[off:], name)
		if i < 0 {
			return -1
		}
		i += off
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+len(name):])
		if !identRune(before) && !identRune(after) {
			return i
		}
		off = i + 1
	}
	return -1
}

func identRune(r rune) bool {
	return r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

// objectAfter returns the JSON object that follows s's leading spaces and
// separators (":", "with", "args"), or "".
func objectAfter(s string) string {
	s = strings.TrimLeft(s, " \t\r\n:=(")
	for _, w := range []string{"with ", "args ", "arguments "} {
		if strings.HasPrefix(s, w) {
			s = strings.TrimLeft(s[len(w):], " \t\r\n:=")
		}
	}
	if !strings.HasPrefix(s, "{") {
		return ""
	}
	dec := json.NewDecoder(strings.NewReader(s))
	var obj map[string]json.RawMessage
	if dec.Decode(&obj) != nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s[:dec.InputOffset()])); err != nil {
		return ""
	}
	return b.String()
}

// argsFromSchema builds an arguments object with one value per property of
// a JSON Schema object, in property-name order.
func argsFromSchema(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type    any               `json:"type"`
			Enum    []json.RawMessage `json:"enum"`
			Minimum *float64          `json:"minimum"`
		} `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "{}"
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		p := s.Properties[k]
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		if len(p.Enum) > 0 {
			b.Write(p.Enum[0])
			continue
		}
		typ, _ := p.Type.(string)
		if list, ok := p.Type.([]any); ok && len(list) > 0 {
			typ, _ = list[0].(string)
		}
		switch typ {
		case "integer", "number":
			v := 1.0
			if p.Minimum != nil && *p.Minimum > v {
				v = *p.Minimum
			}
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		case "boolean":
			b.WriteString("true")
		case "array":
			b.WriteString("[]")
		case "object":
			b.WriteString("{}")
		case "null":
			b.WriteString("null")
		default:
			b.WriteString(`"simulated"`)
		}
	}
	b.WriteByte('}')
	return b.String()
}

// sentences are the material of prose answers.
var sentences = []string{
	"This answer comes from the Chorus simulator, not from a language model.",
	"No provider was called and no key was used.",
	"The same prompt always gets the same words, so tests can predict them.",
	"Each delta carries about four bytes, and each delta counts as one token.",
	"Latency, tokens per second and rate limits are configurable.",
	"Set a provider key in the environment to reach a real model instead.",
	"Streams, retries and pacing run through the real provider code.",
	"A tool named in the prompt is called when the request offers it.",
	"Rate-limit headers follow the OpenAI and Anthropic conventions.",
	"Usage is counted the same way on every wire format.",
	"Embeddings are hashes of the text: equal texts, equal vectors.",
	"The simulator speaks the OpenAI, Anthropic and Gemini formats.",
	"Nothing here was generated by a neural network.",
	"Ask for fewer tokens and the answer stops with finish reason length.",
	"Concurrency is paced by the runtime's credential actors.",
	"A status directive in the prompt makes the simulator fail on purpose.",
}

// prose is a deterministic answer to prompt from model: a nod to the
// prompt, then three to six sentences chosen by a hash of both.
func prose(model, prompt string) string {
	h := fnv.New64a()
	_, _ = io.WriteString(h, model)
	_, _ = io.WriteString(h, "\x00")
	_, _ = io.WriteString(h, prompt)
	x := h.Sum64() | 1
	next := func() uint64 {
		x ^= x >> 12
		x ^= x << 25
		x ^= x >> 27
		return x * 2685821657736338717
	}
	var b strings.Builder
	words := strings.Fields(prompt)
	switch {
	case len(words) == 0:
		b.WriteString("You sent an empty prompt.")
	default:
		fmt.Fprintf(&b, "You wrote %d word(s), starting %q.", len(words), clip(strings.Join(words[:min(len(words), 6)], " "), 60))
	}
	// Three to six different sentences: a partial Fisher-Yates shuffle.
	idx := make([]int, len(sentences))
	for i := range idx {
		idx[i] = i
	}
	n := 3 + int(next()%4)
	for k := range n {
		j := k + int(next()%uint64(len(idx)-k))
		idx[k], idx[j] = idx[j], idx[k]
		b.WriteByte(' ')
		b.WriteString(sentences[idx[k]])
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func hashHex(parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = io.WriteString(h, p)
		_, _ = io.WriteString(h, "\x00")
	}
	return strconv.FormatUint(h.Sum64(), 16)
}
