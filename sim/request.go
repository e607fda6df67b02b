package sim

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/chorusrt/chorus/llmtest"
)

// request is a chat request of any format, reduced to what the simulator
// answers from.
type request struct {
	format   llmtest.Format
	model    string
	messages []message
	tools    []toolDef
	choice   choice
	// maxTokens is the output cap the request set; zero when none.
	maxTokens int
}

// message is one turn: its role ("system", "user", "assistant", "tool"),
// its text, and for a tool result the tool's name when known.
type message struct {
	role     string
	text     string
	toolName string
}

type toolDef struct {
	name   string
	schema json.RawMessage
}

// choice is the request's tool choice: mode "auto" (or empty), "none",
// "required" (some tool) or "tool" (the named one).
type choice struct {
	mode string
	name string
}

// parseRequest reads a chat request of r's format; ok is false for
// anything that is not a chat request it understands.
func parseRequest(r llmtest.Recorded) (*request, bool) {
	switch {
	case r.Format == llmtest.FormatOpenAI && strings.HasSuffix(r.Path, "/chat/completions"):
		return parseOpenAI(r)
	case r.Format == llmtest.FormatOpenAI && strings.HasSuffix(r.Path, "/responses"):
		return parseResponses(r)
	case r.Format == llmtest.FormatAnthropic:
		return parseAnthropic(r)
	case r.Format == llmtest.FormatGemini:
		return parseGemini(r)
	}
	return nil, false
}

// textOf reads content that is a string or a list of parts with "text"
// fields (OpenAI, Responses and Anthropic content; Anthropic tool_result
// content).
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.Text)
	}
	return b.String()
}

func parseOpenAI(r llmtest.Recorded) (*request, bool) {
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
			Name       string `json:"name"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		ToolChoice          json.RawMessage `json:"tool_choice"`
		MaxTokens           int             `json:"max_tokens"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil, false
	}
	req := &request{format: r.Format, model: body.Model, maxTokens: max(body.MaxTokens, body.MaxCompletionTokens)}
	names := map[string]string{} // tool call id -> tool name
	for _, m := range body.Messages {
		msg := message{role: m.Role, text: textOf(m.Content)}
		switch m.Role {
		case "developer":
			msg.role = "system"
		case "assistant":
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Function.Name
			}
		case "tool":
			msg.toolName = names[m.ToolCallID]
			if msg.toolName == "" {
				msg.toolName = m.Name
			}
		}
		req.messages = append(req.messages, msg)
	}
	for _, t := range body.Tools {
		req.tools = append(req.tools, toolDef{name: t.Function.Name, schema: t.Function.Parameters})
	}
	req.choice = openAIChoice(body.ToolChoice)
	return req, true
}

// openAIChoice reads "auto" | "none" | "required" | {"type":"function",
// "function":{"name":...}} (Chat) or {"type":"function","name":...}
// (Responses).
func openAIChoice(raw json.RawMessage) choice {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return choice{}
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return choice{mode: s}
	}
	var o struct {
		Type     string `json:"type"`
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &o) != nil {
		return choice{}
	}
	name := o.Function.Name
	if name == "" {
		name = o.Name
	}
	if name != "" {
		return choice{mode: "tool", name: name}
	}
	return choice{mode: o.Type}
}

func parseResponses(r llmtest.Recorded) (*request, bool) {
	var body struct {
		Model        string          `json:"model"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"tools"`
		ToolChoice      json.RawMessage `json:"tool_choice"`
		MaxOutputTokens int             `json:"max_output_tokens"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil, false
	}
	req := &request{format: r.Format, model: body.Model, maxTokens: body.MaxOutputTokens}
	if body.Instructions != "" {
		req.messages = append(req.messages, message{role: "system", text: body.Instructions})
	}
	var s string
	if json.Unmarshal(body.Input, &s) == nil {
		req.messages = append(req.messages, message{role: "user", text: s})
	} else {
		var items []struct {
			Type    string          `json:"type"`
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
			CallID  string          `json:"call_id"`
			Name    string          `json:"name"`
			Output  json.RawMessage `json:"output"`
		}
		if json.Unmarshal(body.Input, &items) != nil {
			return nil, false
		}
		names := map[string]string{}
		for _, it := range items {
			switch {
			case it.Type == "function_call":
				names[it.CallID] = it.Name
				req.messages = append(req.messages, message{role: "assistant"})
			case it.Type == "function_call_output":
				req.messages = append(req.messages, message{role: "tool", text: textOf(it.Output), toolName: names[it.CallID]})
			case it.Role != "":
				role := it.Role
				if role == "developer" {
					role = "system"
				}
				req.messages = append(req.messages, message{role: role, text: textOf(it.Content)})
			}
		}
	}
	for _, t := range body.Tools {
		if t.Type == "function" || t.Type == "" {
			req.tools = append(req.tools, toolDef{name: t.Name, schema: t.Parameters})
		}
	}
	req.choice = openAIChoice(body.ToolChoice)
	return req, true
}

func parseAnthropic(r llmtest.Recorded) (*request, bool) {
	var body struct {
		Model    string          `json:"model"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
		ToolChoice *struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tool_choice"`
		MaxTokens int `json:"max_tokens"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil, false
	}
	req := &request{format: r.Format, model: body.Model, maxTokens: body.MaxTokens}
	if sys := textOf(body.System); sys != "" {
		req.messages = append(req.messages, message{role: "system", text: sys})
	}
	names := map[string]string{}
	for _, m := range body.Messages {
		var blocks []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			req.messages = append(req.messages, message{role: m.Role, text: textOf(m.Content)})
			continue
		}
		var text []string
		for _, b := range blocks {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				names[b.ID] = b.Name
			case "tool_result":
				req.messages = append(req.messages, message{role: "tool", text: textOf(b.Content), toolName: names[b.ToolUseID]})
			}
		}
		if len(text) > 0 || m.Role == "assistant" {
			req.messages = append(req.messages, message{role: m.Role, text: strings.Join(text, "\n")})
		}
	}
	for _, t := range body.Tools {
		req.tools = append(req.tools, toolDef{name: t.Name, schema: t.InputSchema})
	}
	if tc := body.ToolChoice; tc != nil {
		switch tc.Type {
		case "any":
			req.choice = choice{mode: "required"}
		case "tool":
			req.choice = choice{mode: "tool", name: tc.Name}
		default:
			req.choice = choice{mode: tc.Type}
		}
	}
	return req, true
}

func parseGemini(r llmtest.Recorded) (*request, bool) {
	type part struct {
		Text         string `json:"text"`
		Thought      bool   `json:"thought"`
		FunctionCall *struct {
			Name string `json:"name"`
		} `json:"functionCall"`
		FunctionResponse *struct {
			Name     string          `json:"name"`
			Response json.RawMessage `json:"response"`
		} `json:"functionResponse"`
	}
	type content struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	var body struct {
		Contents          []content `json:"contents"`
		SystemInstruction *content  `json:"systemInstruction"`
		Tools             []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		ToolConfig *struct {
			FunctionCallingConfig struct {
				Mode                 string   `json:"mode"`
				AllowedFunctionNames []string `json:"allowedFunctionNames"`
			} `json:"functionCallingConfig"`
		} `json:"toolConfig"`
		GenerationConfig struct {
			MaxOutputTokens int `json:"maxOutputTokens"`
		} `json:"generationConfig"`
	}
	if json.Unmarshal(r.Body, &body) != nil {
		return nil, false
	}
	req := &request{format: r.Format, model: r.Model, maxTokens: body.GenerationConfig.MaxOutputTokens}
	texts := func(c content) string {
		var out []string
		for _, p := range c.Parts {
			if p.Text != "" && !p.Thought {
				out = append(out, p.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	if si := body.SystemInstruction; si != nil {
		req.messages = append(req.messages, message{role: "system", text: texts(*si)})
	}
	for _, c := range body.Contents {
		role := "user"
		if c.Role == "model" {
			role = "assistant"
		}
		results := false
		for _, p := range c.Parts {
			if fr := p.FunctionResponse; fr != nil {
				results = true
				req.messages = append(req.messages, message{role: "tool", text: string(bytes.TrimSpace(fr.Response)), toolName: fr.Name})
			}
		}
		if t := texts(c); t != "" || (!results && role == "assistant") {
			req.messages = append(req.messages, message{role: role, text: t})
		}
	}
	for _, t := range body.Tools {
		for _, fd := range t.FunctionDeclarations {
			schema := fd.ParametersJSONSchema
			if len(schema) == 0 {
				schema = fd.Parameters
			}
			req.tools = append(req.tools, toolDef{name: fd.Name, schema: schema})
		}
	}
	if tc := body.ToolConfig; tc != nil {
		fc := tc.FunctionCallingConfig
		switch strings.ToUpper(fc.Mode) {
		case "NONE":
			req.choice = choice{mode: "none"}
		case "ANY":
			req.choice = choice{mode: "required"}
			if len(fc.AllowedFunctionNames) == 1 {
				req.choice = choice{mode: "tool", name: fc.AllowedFunctionNames[0]}
			}
		}
	}
	return req, true
}
