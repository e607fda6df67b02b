package llm

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Size caps enforced by Validate. They are variables so that an application
// with different provider limits can change them at start-up.
var (
	// MaxPartBytes caps one inline image or document.
	MaxPartBytes = 20 << 20
	// MaxRequestInlineBytes caps all inline bytes of one request.
	MaxRequestInlineBytes = 50 << 20
)

// reservedHeaders are set by the transport and may not be overridden per call.
var reservedHeaders = map[string]bool{
	"Authorization":     true,
	"X-Api-Key":         true,
	"X-Goog-Api-Key":    true,
	"Api-Key":           true,
	"Content-Type":      true,
	"Content-Length":    true,
	"Host":              true,
	"Transfer-Encoding": true,
	"Accept":            true,
	"Connection":        true,
	"Anthropic-Version": true,
}

// Validate checks the request at the boundary and returns a *ConfigError
// naming the first field at fault. A provider never sees a request that
// fails it.
func (r *ChatRequest) Validate() error {
	if r == nil {
		return &ConfigError{Field: "request", Msg: "is nil"}
	}
	if strings.TrimSpace(r.Model) == "" {
		return &ConfigError{Field: "model", Msg: "is empty"}
	}
	if len(r.Messages) == 0 {
		return &ConfigError{Field: "messages", Msg: "is empty"}
	}
	if err := r.validateCache(); err != nil {
		return err
	}
	inline := 0
	for i := range r.Messages {
		m := &r.Messages[i]
		f := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool:
		default:
			return &ConfigError{Field: f + ".role", Msg: fmt.Sprintf("unknown role %q (system, developer, user, assistant, tool)", m.Role)}
		}
		if m.Role == RoleTool && m.ToolCallID == "" {
			return &ConfigError{Field: f + ".tool_call_id", Msg: "a tool message needs the id of the call it answers"}
		}
		if m.Role != RoleAssistant && len(m.ToolCalls) > 0 {
			return &ConfigError{Field: f + ".tool_calls", Msg: "only assistant messages carry tool calls"}
		}
		if m.Content == "" && len(m.Parts) == 0 && len(m.ToolCalls) == 0 && m.Role != RoleAssistant && m.Role != RoleTool {
			return &ConfigError{Field: f + ".content", Msg: "is empty"}
		}
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			if tc.Name == "" {
				return &ConfigError{Field: fmt.Sprintf("%s.tool_calls[%d].name", f, j), Msg: "is empty"}
			}
			if tc.Arguments != "" && !json.Valid([]byte(tc.Arguments)) {
				return &ConfigError{Field: fmt.Sprintf("%s.tool_calls[%d].arguments", f, j), Msg: "is not valid JSON"}
			}
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			pf := fmt.Sprintf("%s.parts[%d]", f, j)
			switch p.Type {
			case PartText:
			case PartImage:
				if len(p.Data) == 0 && p.URL == "" {
					return &ConfigError{Field: pf, Msg: "image needs data or a URL"}
				}
				if len(p.Data) > 0 && !strings.HasPrefix(strings.ToLower(p.MIMEType), "image/") {
					return &ConfigError{Field: pf + ".mime_type", Msg: fmt.Sprintf("%q is not an image type", p.MIMEType)}
				}
			case PartDocument:
				if len(p.Data) == 0 {
					return &ConfigError{Field: pf, Msg: "document needs inline data"}
				}
				if !strings.EqualFold(p.MIMEType, "application/pdf") {
					return &ConfigError{Field: pf + ".mime_type", Msg: fmt.Sprintf("%q is not supported; documents are application/pdf", p.MIMEType)}
				}
			default:
				return &ConfigError{Field: pf + ".type", Msg: fmt.Sprintf("unknown part type %q", p.Type)}
			}
			if len(p.Data) > MaxPartBytes {
				return &ConfigError{Field: pf, Msg: fmt.Sprintf("%d bytes exceeds the %d-byte part cap", len(p.Data), MaxPartBytes)}
			}
			inline += len(p.Data)
		}
	}
	if inline > MaxRequestInlineBytes {
		return &ConfigError{Field: "messages", Msg: fmt.Sprintf("%d inline bytes exceeds the %d-byte request cap", inline, MaxRequestInlineBytes)}
	}
	names := make(map[string]bool, len(r.Tools))
	for i := range r.Tools {
		t := &r.Tools[i]
		f := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			return &ConfigError{Field: f + ".name", Msg: "is empty"}
		}
		if names[t.Name] {
			return &ConfigError{Field: f + ".name", Msg: fmt.Sprintf("duplicate tool %q", t.Name)}
		}
		names[t.Name] = true
		if len(t.Parameters) > 0 {
			var schema map[string]any
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return &ConfigError{Field: f + ".parameters", Msg: "is not a JSON object: " + err.Error()}
			}
			if ty, ok := schema["type"]; ok && ty != "object" {
				return &ConfigError{Field: f + ".parameters.type", Msg: fmt.Sprintf("must be \"object\", got %v", ty)}
			}
		}
	}
	switch r.ToolChoice.Mode {
	case "", ToolChoiceAuto, ToolChoiceNone:
	case ToolChoiceRequired:
		if len(r.Tools) == 0 {
			return &ConfigError{Field: "tool_choice", Msg: "required with no tools"}
		}
	case ToolChoiceTool:
		if !names[r.ToolChoice.Name] {
			return &ConfigError{Field: "tool_choice.name", Msg: fmt.Sprintf("no tool named %q", r.ToolChoice.Name)}
		}
	default:
		return &ConfigError{Field: "tool_choice.mode", Msg: fmt.Sprintf("unknown mode %q", r.ToolChoice.Mode)}
	}
	if rf := r.ResponseFormat; rf != nil {
		switch rf.Type {
		case ResponseText, ResponseJSONObject:
		case ResponseJSONSchema:
			if len(rf.Schema) == 0 || !json.Valid(rf.Schema) {
				return &ConfigError{Field: "response_format.schema", Msg: "json_schema needs a valid JSON Schema"}
			}
		default:
			return &ConfigError{Field: "response_format.type", Msg: fmt.Sprintf("unknown type %q", rf.Type)}
		}
	}
	if rs := r.Reasoning; rs != nil {
		switch rs.Effort {
		case "", EffortNone, EffortLow, EffortMedium, EffortHigh, EffortMax:
		default:
			return &ConfigError{Field: "reasoning.effort", Msg: fmt.Sprintf("unknown effort %q", rs.Effort)}
		}
		if rs.BudgetTokens < 0 {
			return &ConfigError{Field: "reasoning.budget_tokens", Msg: "is negative"}
		}
	}
	if r.MaxTokens < 0 {
		return &ConfigError{Field: "max_tokens", Msg: "is negative"}
	}
	if t := r.Temperature; t != nil && (*t < 0 || *t > 2) {
		return &ConfigError{Field: "temperature", Msg: fmt.Sprintf("%v is outside [0, 2]", *t)}
	}
	if p := r.TopP; p != nil && (*p < 0 || *p > 1) {
		return &ConfigError{Field: "top_p", Msg: fmt.Sprintf("%v is outside [0, 1]", *p)}
	}
	if err := validateHeaders(r.Headers); err != nil {
		return err
	}
	return nil
}
