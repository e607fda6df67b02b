package llmtest

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// openAIResponses renders the OpenAI Responses API (POST /v1/responses) from
// the same Replies and Faults as the other formats. Requests are recorded
// with Format FormatOpenAI and Path "/v1/responses", and carry the OpenAI
// request id and rate-limit headers.
//
// The buffered answer is a response object: one reasoning item per
// reasoning block (summary_text = its text; encrypted_content = its
// Signature, or "llmtest-encrypted-<request>-<i>" without one; a redacted
// block is an item with its Data as encrypted content and no summary), one
// message item with the refusal and output_text parts, then one
// function_call item per tool call (ids "rs_llmtest_<n>_<i>",
// "msg_llmtest_<n>", "fc_llmtest_<n>_<i>", call ids as on Chat
// Completions). The finish becomes the status: stop and tool_calls are
// completed; length is incomplete with reason max_output_tokens,
// content_filter incomplete with reason content_filter; Reply.RawFinish is
// sent as the reason of an incomplete response. Usage is input_tokens
// (uncached + cache reads + writes) with input_tokens_details.cached_tokens,
// output_tokens with output_tokens_details.reasoning_tokens.
//
// The stream is the real event sequence: response.created,
// response.in_progress, then per item output_item.added, its deltas
// (reasoning_summary_text, refusal, output_text, function_call_arguments;
// these count toward Fault.After), its done events and output_item.done,
// and finally response.completed or response.incomplete with the whole
// response. Every event has an event: line naming its type; it follows the
// data: line inside the event, which the SSE format allows. An in-stream
// error is an error event followed by response.failed, as OpenAI sends an
// exhausted quota.
type openAIResponses struct{}

type rsUsage struct {
	InputTokens  int `json:"input_tokens"`
	InputDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens  int `json:"output_tokens"`
	OutputDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

type rsIncomplete struct {
	Reason string `json:"reason"`
}

type rsFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type rsResponse struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	CreatedAt         int64         `json:"created_at"`
	Status            string        `json:"status"`
	Error             *rsFailure    `json:"error"`
	IncompleteDetails *rsIncomplete `json:"incomplete_details"`
	Model             string        `json:"model"`
	Output            []any         `json:"output"`
	ParallelToolCalls bool          `json:"parallel_tool_calls"`
	Store             bool          `json:"store"`
	Usage             *rsUsage      `json:"usage"`
}

type rsSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type rsReasoning struct {
	ID               string      `json:"id"`
	Type             string      `json:"type"`
	Summary          []rsSummary `json:"summary"`
	EncryptedContent string      `json:"encrypted_content,omitempty"`
}

type rsPart struct {
	Type        string    `json:"type"`
	Text        *string   `json:"text,omitempty"`
	Refusal     *string   `json:"refusal,omitempty"`
	Annotations *[]string `json:"annotations,omitempty"`
}

type rsMessage struct {
	ID      string   `json:"id"`
	Type    string   `json:"type"`
	Status  string   `json:"status"`
	Role    string   `json:"role"`
	Content []rsPart `json:"content"`
}

type rsFunctionCall struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// rsEvent is every stream event's shape; unused members are left out.
type rsEvent struct {
	Type           string      `json:"type"`
	SequenceNumber int         `json:"sequence_number"`
	Response       *rsResponse `json:"response,omitempty"`
	OutputIndex    *int        `json:"output_index,omitempty"`
	ItemID         string      `json:"item_id,omitempty"`
	ContentIndex   *int        `json:"content_index,omitempty"`
	SummaryIndex   *int        `json:"summary_index,omitempty"`
	Item           any         `json:"item,omitempty"`
	Part           any         `json:"part,omitempty"`
	Delta          *string     `json:"delta,omitempty"`
	Text           *string     `json:"text,omitempty"`
	Refusal        *string     `json:"refusal,omitempty"`
	Arguments      *string     `json:"arguments,omitempty"`
	Error          *oaError    `json:"error,omitempty"`
	Obfuscation    string      `json:"obfuscation,omitempty"`
}

func intp(i int) *int { return &i }

func (p *plan) rsID() string { return fmt.Sprintf("resp_llmtest_%d", p.seq) }

// rsStatus maps the plan's finish to a response status and, for an
// incomplete response, its reason.
func rsStatus(p *plan) (string, *rsIncomplete) {
	if p.rawFinish != "" {
		return "incomplete", &rsIncomplete{Reason: p.rawFinish}
	}
	switch p.finish {
	case llm.FinishLength:
		return "incomplete", &rsIncomplete{Reason: "max_output_tokens"}
	case llm.FinishContentFilter:
		return "incomplete", &rsIncomplete{Reason: "content_filter"}
	}
	return "completed", nil
}

func rsUsageOf(u llm.Usage) *rsUsage {
	o := &rsUsage{InputTokens: u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens, OutputTokens: u.CompletionTokens}
	o.InputDetails.CachedTokens = u.CacheReadTokens
	o.OutputDetails.ReasoningTokens = u.ReasoningTokens
	o.TotalTokens = o.InputTokens + o.OutputTokens
	return o
}

// rsItems are the finished output items of a plan.
func rsItems(p *plan) []any {
	var out []any
	for i, t := range p.thoughts {
		out = append(out, rsReasoningItem(p, i, t))
	}
	if m := rsMessageItem(p, "completed"); m != nil {
		out = append(out, *m)
	}
	for i, t := range p.tools {
		out = append(out, rsFunctionCall{ID: fmt.Sprintf("fc_llmtest_%d_%d", p.seq, i), Type: "function_call", Status: "completed",
			Arguments: t.args, CallID: p.toolID(i, "call_llmtest_"), Name: t.name})
	}
	return out
}

func rsReasoningItem(p *plan, i int, t thought) rsReasoning {
	it := rsReasoning{ID: fmt.Sprintf("rs_llmtest_%d_%d", p.seq, i), Type: "reasoning", Summary: []rsSummary{}}
	switch {
	case t.redacted:
		it.EncryptedContent = t.data
		return it
	case t.signature != "":
		it.EncryptedContent = t.signature
	default:
		it.EncryptedContent = fmt.Sprintf("llmtest-encrypted-%d-%d", p.seq, i)
	}
	if t.text != "" {
		it.Summary = []rsSummary{{Type: "summary_text", Text: t.text}}
	}
	return it
}

func rsMessageItem(p *plan, status string) *rsMessage {
	if len(p.refusal)+len(p.text) == 0 {
		return nil
	}
	m := &rsMessage{ID: fmt.Sprintf("msg_llmtest_%d", p.seq), Type: "message", Status: status, Role: "assistant", Content: []rsPart{}}
	if status != "completed" {
		return m
	}
	if len(p.refusal) > 0 {
		m.Content = append(m.Content, rsRefusalPart(join(p.refusal)))
	}
	if len(p.text) > 0 {
		m.Content = append(m.Content, rsTextPart(p.textString()))
	}
	return m
}

func rsTextPart(s string) rsPart {
	return rsPart{Type: "output_text", Text: &s, Annotations: &[]string{}}
}

func rsRefusalPart(s string) rsPart { return rsPart{Type: "refusal", Refusal: &s} }

func (p *plan) rsResponse(created int64, final bool) *rsResponse {
	r := &rsResponse{ID: p.rsID(), Object: "response", CreatedAt: created, Status: "in_progress", Model: p.model,
		Output: []any{}, ParallelToolCalls: true}
	if final {
		r.Status, r.IncompleteDetails = rsStatus(p)
		r.Output = rsItems(p)
		r.Usage = rsUsageOf(p.usage)
	}
	return r
}

func (openAIResponses) contentType() string { return "text/event-stream; charset=utf-8" }

func (openAIResponses) buffered(p *plan) []byte {
	return marshal(p.rsResponse(time.Now().Unix(), true))
}

// rsFrame renders one event: its JSON, then the event: line naming it.
func rsFrame(kind frameKind, ev rsEvent) frame {
	data := marshal(ev)
	data = append(data, "\nevent: "...)
	data = append(data, ev.Type...)
	return frame{kind: kind, event: ev.Type, data: data}
}

func (openAIResponses) frames(p *plan, _ *exchange) []frame {
	created := time.Now().Unix()
	var out []frame
	seq := 0
	add := func(kind frameKind, ev rsEvent) {
		ev.SequenceNumber = seq
		seq++
		out = append(out, rsFrame(kind, ev))
	}
	add(fHead, rsEvent{Type: "response.created", Response: p.rsResponse(created, false)})
	add(fMid, rsEvent{Type: "response.in_progress", Response: p.rsResponse(created, false)})
	idx := 0
	for i, t := range p.thoughts {
		done := rsReasoningItem(p, i, t)
		added := rsReasoning{ID: done.ID, Type: "reasoning", Summary: []rsSummary{}}
		add(fMid, rsEvent{Type: "response.output_item.added", OutputIndex: intp(idx), Item: added})
		if len(t.deltas) > 0 {
			add(fMid, rsEvent{Type: "response.reasoning_summary_part.added", ItemID: done.ID, OutputIndex: intp(idx), SummaryIndex: intp(0), Part: rsSummary{Type: "summary_text"}})
			for _, d := range t.deltas {
				add(fDelta, rsEvent{Type: "response.reasoning_summary_text.delta", ItemID: done.ID, OutputIndex: intp(idx), SummaryIndex: intp(0), Delta: strp(d), Obfuscation: "llmtest"})
			}
			add(fMid, rsEvent{Type: "response.reasoning_summary_text.done", ItemID: done.ID, OutputIndex: intp(idx), SummaryIndex: intp(0), Text: strp(t.text)})
			add(fMid, rsEvent{Type: "response.reasoning_summary_part.done", ItemID: done.ID, OutputIndex: intp(idx), SummaryIndex: intp(0), Part: rsSummary{Type: "summary_text", Text: t.text}})
		}
		add(fMid, rsEvent{Type: "response.output_item.done", OutputIndex: intp(idx), Item: done})
		idx++
	}
	if m := rsMessageItem(p, "in_progress"); m != nil {
		add(fMid, rsEvent{Type: "response.output_item.added", OutputIndex: intp(idx), Item: *m})
		part := 0
		if len(p.refusal) > 0 {
			add(fMid, rsEvent{Type: "response.content_part.added", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Part: rsRefusalPart("")})
			for _, d := range p.refusal {
				add(fDelta, rsEvent{Type: "response.refusal.delta", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Delta: strp(d)})
			}
			all := join(p.refusal)
			add(fMid, rsEvent{Type: "response.refusal.done", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Refusal: &all})
			add(fMid, rsEvent{Type: "response.content_part.done", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Part: rsRefusalPart(all)})
			part++
		}
		if len(p.text) > 0 {
			add(fMid, rsEvent{Type: "response.content_part.added", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Part: rsTextPart("")})
			for _, d := range p.text {
				add(fDelta, rsEvent{Type: "response.output_text.delta", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Delta: strp(d), Obfuscation: "llmtest"})
			}
			all := p.textString()
			add(fMid, rsEvent{Type: "response.output_text.done", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Text: &all})
			add(fMid, rsEvent{Type: "response.content_part.done", ItemID: m.ID, OutputIndex: intp(idx), ContentIndex: intp(part), Part: rsTextPart(all)})
		}
		add(fMid, rsEvent{Type: "response.output_item.done", OutputIndex: intp(idx), Item: *rsMessageItem(p, "completed")})
		idx++
	}
	for i, t := range p.tools {
		fc := rsFunctionCall{ID: fmt.Sprintf("fc_llmtest_%d_%d", p.seq, i), Type: "function_call", Status: "in_progress",
			CallID: p.toolID(i, "call_llmtest_"), Name: t.name}
		add(fMid, rsEvent{Type: "response.output_item.added", OutputIndex: intp(idx), Item: fc})
		for _, f := range t.frags {
			add(fDelta, rsEvent{Type: "response.function_call_arguments.delta", ItemID: fc.ID, OutputIndex: intp(idx), Delta: strp(f)})
		}
		args := t.args
		add(fMid, rsEvent{Type: "response.function_call_arguments.done", ItemID: fc.ID, OutputIndex: intp(idx), Arguments: &args})
		fc.Status, fc.Arguments = "completed", args
		add(fMid, rsEvent{Type: "response.output_item.done", OutputIndex: intp(idx), Item: fc})
		idx++
	}
	final := p.rsResponse(created, true)
	typ := "response.completed"
	if final.Status == "incomplete" {
		typ = "response.incomplete"
	}
	add(fTail, rsEvent{Type: typ, Response: final})
	return out
}

func (openAIResponses) errorBody(status int, f *Fault) []byte {
	return openAI{}.errorBody(status, f)
}

// streamError is OpenAI's failure inside a stream: an error event, then
// response.failed, written as one frame.
func (openAIResponses) streamError(f *Fault) frame {
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	e := oaErrorFields(status, f)
	if e.Code == nil {
		e.Code = strp(e.Type)
	}
	errEv := rsFrame(fTail, rsEvent{Type: "error", SequenceNumber: 1000, Error: &e})
	failed := rsFrame(fTail, rsEvent{Type: "response.failed", SequenceNumber: 1001, Response: &rsResponse{
		Object: "response", Status: "failed", Output: []any{}, Error: &rsFailure{Code: *e.Code, Message: e.Message},
	}})
	data := append(errEv.data, "\n\ndata: "...)
	data = append(data, failed.data...)
	return frame{kind: fTail, event: "error", data: data}
}

func (openAIResponses) malformed() frame { return frame{data: []byte("{not json")} }

func (openAIResponses) oversize(p *plan, pad string) frame {
	return rsFrame(fMid, rsEvent{Type: "response.in_progress", Response: p.rsResponse(time.Now().Unix(), false), Obfuscation: pad})
}

func (openAIResponses) rateHeaders(h http.Header, st *rlState) { openAI{}.rateHeaders(h, st) }

// isResponsesPath reports a POST /responses path (not /responses/{id} or
// /responses/input_tokens).
func isResponsesPath(p string) bool {
	return strings.HasSuffix(p, "/responses")
}
