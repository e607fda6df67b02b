package langchaingo

import (
	"encoding/base64"
	"strconv"

	"github.com/tmc/langchaingo/llms"

	"github.com/chorusrt/chorus/llm"
)

// Replay is a content part that carries what an assistant answer needs to
// be replayed to the provider on the next turn: its reasoning, its signed
// thinking blocks (Anthropic signatures, OpenAI Responses encrypted
// reasoning) and its tool calls' signatures (Gemini thought signatures),
// by position. Every ContentChoice this package returns has one under
// GenerationInfo[GenerationReplay]; append it to the assistant message's
// parts, after its tool calls, to keep multi-turn reasoning valid.
//
// It embeds llms.TextContent only to be a llms.ContentPart (LangChainGo's
// part interface is sealed); its Text is always empty. Other LangChainGo
// models do not know the type: leave it out of a history sent to them.
type Replay struct {
	llms.TextContent
	Reasoning  string
	Thinking   []llm.ThinkingBlock
	Signatures []string
}

// GenerationInfo keys this package sets beyond LangChainGo's usual ones.
const (
	// GenerationReplay holds the answer's Replay part.
	GenerationReplay = "ChorusReplay"
	// GenerationRefusal holds a safety refusal's text (also the choice's
	// Content, since LangChainGo has no refusal field).
	GenerationRefusal = "Refusal"
)

// response is a Chorus answer as LangChainGo's one-choice response. The
// usage keys are those of LangChainGo's OpenAI plugin (PromptTokens is all
// input, cached included) and of its Anthropic plugin (InputTokens is
// uncached input, cache reads and writes apart), so code written for
// either finds its numbers.
func response(res *llm.ChatResult) *llms.ContentResponse {
	u := res.Usage
	info := map[string]any{
		"PromptTokens":              u.InputTokens(),
		"CompletionTokens":          u.CompletionTokens,
		"TotalTokens":               u.TotalTokens(),
		"ReasoningTokens":           u.ReasoningTokens,
		"CompletionReasoningTokens": u.ReasoningTokens,
		"ThinkingTokens":            u.ReasoningTokens,
		"PromptCachedTokens":        u.CacheReadTokens,
		"InputTokens":               u.PromptTokens,
		"OutputTokens":              u.CompletionTokens,
		"CacheReadInputTokens":      u.CacheReadTokens,
		"CacheCreationInputTokens":  u.CacheWriteTokens,
		"ThinkingContent":           res.Reasoning,
		"Model":                     res.Model,
		"Provider":                  res.Meta.Provider,
	}
	rp := Replay{Reasoning: res.Reasoning, Thinking: res.ThinkingBlocks}
	for i, tc := range res.ToolCalls {
		if tc.Signature != "" {
			if rp.Signatures == nil {
				rp.Signatures = make([]string, len(res.ToolCalls))
			}
			rp.Signatures[i] = tc.Signature
		}
	}
	info[GenerationReplay] = rp
	if len(res.ThinkingBlocks) > 0 {
		info["ThinkingSignature"] = res.ThinkingBlocks[0].Signature
	}
	if res.Refusal != "" {
		info[GenerationRefusal] = res.Refusal
	}
	for i, img := range res.Images {
		if len(img.Data) > 0 {
			info["Image"+strconv.Itoa(i)] = "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
		} else {
			info["Image"+strconv.Itoa(i)] = img.URL
		}
	}
	c := &llms.ContentChoice{
		Content:          res.Content + res.Refusal,
		StopReason:       string(res.FinishReason),
		ReasoningContent: res.Reasoning,
		GenerationInfo:   info,
	}
	for _, tc := range res.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, llms.ToolCall{ID: tc.ID, Type: "function",
			FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{c}}
}
