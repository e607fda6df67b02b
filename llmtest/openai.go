package llmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/chorusrt/chorus/llm"
)

// openAI renders the OpenAI Chat Completions format.
type openAI struct{}

type oaUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	PromptDetails    struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

type oaFunc struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type oaToolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id,omitempty"`
	Type     string `json:"type,omitempty"`
	Function oaFunc `json:"function"`
}

type oaMessage struct {
	Role             string       `json:"role"`
	Content          *string      `json:"content"`
	ReasoningContent string       `json:"reasoning_content,omitempty"`
	Refusal          *string      `json:"refusal"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
}

type oaChoice struct {
	Index        int         `json:"index"`
	Message      *oaMessage  `json:"message,omitempty"`
	Delta        *oaDelta    `json:"delta,omitempty"`
	Logprobs     *oaLogprobs `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type oaLogprobs struct {
	Content []oaTokenLogprob `json:"content"`
}

type oaTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []oaTokenLogprob `json:"top_logprobs,omitempty"`
}

func oaLogprobsOf(l []llm.TokenLogprob) *oaLogprobs {
	if len(l) == 0 {
		return nil
	}
	out := &oaLogprobs{}
	for _, t := range l {
		w := oaTokenLogprob{Token: t.Token, Logprob: t.Logprob, Bytes: t.Bytes, TopLogprobs: []oaTokenLogprob{}}
		for _, a := range t.Top {
			w.TopLogprobs = append(w.TopLogprobs, oaTokenLogprob{Token: a.Token, Logprob: a.Logprob, Bytes: a.Bytes})
		}
		out.Content = append(out.Content, w)
	}
	return out
}

type oaDelta struct {
	Role             string       `json:"role,omitempty"`
	Content          *string      `json:"content,omitempty"`
	ReasoningContent *string      `json:"reasoning_content,omitempty"`
	Refusal          *string      `json:"refusal,omitempty"`
	ToolCalls        []oaToolCall `json:"tool_calls,omitempty"`
}

type oaCompletion struct {
	ID                string     `json:"id"`
	Object            string     `json:"object"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	Choices           []oaChoice `json:"choices"`
	Usage             any        `json:"usage,omitempty"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Obfuscation       string     `json:"obfuscation,omitempty"`
}

type oaError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func oaUsageOf(u llm.Usage) *oaUsage {
	o := &oaUsage{
		PromptTokens:     u.PromptTokens + u.CacheReadTokens + u.CacheWriteTokens,
		CompletionTokens: u.CompletionTokens,
	}
	o.TotalTokens = o.PromptTokens + o.CompletionTokens
	o.PromptDetails.CachedTokens = u.CacheReadTokens
	o.CompletionDetails.ReasoningTokens = u.ReasoningTokens
	return o
}

func oaFinish(p *plan) string {
	if p.rawFinish != "" {
		return p.rawFinish
	}
	return string(p.finish)
}

func strp(s string) *string { return &s }

func (openAI) contentType() string { return "text/event-stream; charset=utf-8" }

func (openAI) buffered(p *plan) []byte {
	msg := &oaMessage{Role: "assistant", ReasoningContent: p.reasoningString()}
	if t := p.textString(); t != "" || len(p.tools) == 0 {
		msg.Content = &t
	}
	if len(p.refusal) > 0 {
		msg.Refusal = strp(join(p.refusal))
	}
	for i, t := range p.tools {
		msg.ToolCalls = append(msg.ToolCalls, oaToolCall{ID: p.toolID(i, "call_llmtest_"), Type: "function", Function: oaFunc{Name: t.name, Arguments: t.args}})
	}
	return marshal(oaCompletion{
		ID: p.oaID(), Object: "chat.completion", Created: time.Now().Unix(), Model: p.model,
		Choices:           []oaChoice{{Message: msg, FinishReason: strp(oaFinish(p)), Logprobs: oaLogprobsOf(p.logprobs)}},
		Usage:             oaUsageOf(p.usage),
		SystemFingerprint: "fp_llmtest",
	})
}

func (p *plan) oaID() string { return fmt.Sprintf("chatcmpl-llmtest-%d", p.seq) }

func (openAI) frames(p *plan, x *exchange) []frame {
	created := time.Now().Unix()
	n := 0
	var lp *oaLogprobs // the next chunk's logprobs
	chunk := func(d *oaDelta, finish *string) []byte {
		n++
		c := oaCompletion{
			ID: p.oaID(), Object: "chat.completion.chunk", Created: created, Model: p.model,
			Choices:           []oaChoice{{Delta: d, FinishReason: finish, Logprobs: lp}},
			SystemFingerprint: "fp_llmtest",
			Obfuscation:       strings.Repeat("x", n%7+1),
		}
		if x.includeUsage {
			c.Usage = json.RawMessage("null")
		}
		return marshal(c)
	}
	var out []frame
	out = append(out, frame{kind: fHead, data: chunk(&oaDelta{Role: "assistant", Content: strp("")}, nil)})
	for _, t := range p.thoughts {
		for _, d := range t.deltas {
			out = append(out, frame{kind: fDelta, data: chunk(&oaDelta{ReasoningContent: strp(d)}, nil)})
		}
	}
	for _, d := range p.refusal {
		out = append(out, frame{kind: fDelta, data: chunk(&oaDelta{Refusal: strp(d)}, nil)})
	}
	for i, d := range p.text {
		switch {
		case i < len(p.logprobs) && i == len(p.text)-1:
			lp = oaLogprobsOf(p.logprobs[i:])
		case i < len(p.logprobs):
			lp = oaLogprobsOf(p.logprobs[i : i+1])
		}
		out = append(out, frame{kind: fDelta, data: chunk(&oaDelta{Content: strp(d)}, nil)})
		lp = nil
	}
	for i, t := range p.tools {
		idx := i
		out = append(out, frame{kind: fMid, data: chunk(&oaDelta{ToolCalls: []oaToolCall{{
			Index: &idx, ID: p.toolID(i, "call_llmtest_"), Type: "function", Function: oaFunc{Name: t.name},
		}}}, nil)})
		for _, f := range t.frags {
			out = append(out, frame{kind: fDelta, data: chunk(&oaDelta{ToolCalls: []oaToolCall{{
				Index: &idx, Function: oaFunc{Arguments: f},
			}}}, nil)})
		}
	}
	out = append(out, frame{kind: fTail, data: chunk(&oaDelta{}, strp(oaFinish(p)))})
	if x.includeUsage {
		out = append(out, frame{kind: fTail, data: marshal(oaCompletion{
			ID: p.oaID(), Object: "chat.completion.chunk", Created: created, Model: p.model,
			Choices: []oaChoice{}, Usage: oaUsageOf(p.usage), SystemFingerprint: "fp_llmtest",
			Obfuscation: "x",
		})})
	}
	out = append(out, frame{kind: fTail, data: []byte("[DONE]")})
	return out
}

// oaErrorFields fills an OpenAI error from f with the usual defaults for
// status.
func oaErrorFields(status int, f *Fault) oaError {
	msg, typ, code := f.Message, f.Type, f.Code
	def := func(m, t, c string) {
		if msg == "" {
			msg = m
		}
		if typ == "" {
			typ = t
		}
		if code == "" {
			code = c
		}
	}
	switch {
	case code == "insufficient_quota":
		def("You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
			"insufficient_quota", "insufficient_quota")
	case status == http.StatusTooManyRequests:
		def("Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded")
	case status == http.StatusUnauthorized:
		def("Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
	case status == http.StatusNotFound:
		def("The model does not exist or you do not have access to it.", "invalid_request_error", "model_not_found")
	case status >= 400 && status < 500:
		def("Invalid request.", "invalid_request_error", "")
	default:
		def("The server had an error while processing your request. Sorry about that!", "server_error", "")
	}
	e := oaError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	return e
}

func (openAI) errorBody(status int, f *Fault) []byte {
	return marshal(struct {
		Error oaError `json:"error"`
	}{oaErrorFields(status, f)})
}

func (openAI) streamError(f *Fault) frame {
	status := f.Status
	if status == 0 {
		status = http.StatusInternalServerError
	}
	e := oaErrorFields(status, f)
	if e.Code == nil {
		e.Code = strp(e.Type)
	}
	return frame{kind: fTail, data: marshal(struct {
		Error oaError `json:"error"`
	}{e})}
}

func (openAI) malformed() frame { return frame{data: []byte("{not json")} }

func (openAI) oversize(p *plan, pad string) frame {
	return frame{data: marshal(oaCompletion{
		ID: p.oaID(), Object: "chat.completion.chunk", Created: time.Now().Unix(), Model: p.model,
		Choices: []oaChoice{}, SystemFingerprint: "fp_llmtest", Obfuscation: pad,
	})}
}

func (openAI) rateHeaders(h http.Header, st *rlState) {
	if st.cfg.Requests > 0 {
		h.Set("x-ratelimit-limit-requests", itoa(st.req.limit))
		h.Set("x-ratelimit-remaining-requests", itoa(st.req.remaining))
		h.Set("x-ratelimit-reset-requests", goDuration(st.req.untilFull))
	}
	if st.cfg.Tokens > 0 {
		h.Set("x-ratelimit-limit-tokens", itoa(st.tok.limit))
		h.Set("x-ratelimit-remaining-tokens", itoa(st.tok.remaining))
		h.Set("x-ratelimit-reset-tokens", goDuration(st.tok.untilFull))
	}
}
