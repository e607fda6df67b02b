package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

func TestCountTokensRequest(t *testing.T) {
	req := &llm.ChatRequest{
		Model:     "claude-sonnet-4-5",
		Messages:  []llm.Message{llm.SystemText("be brief"), llm.UserText("What is 2 + 2?")},
		Tools:     []llm.Tool{{Name: "calc", Parameters: json.RawMessage(`{"type":"object"}`)}},
		MaxTokens: 2048, Temperature: llm.Ptr(0.5), Stop: []string{"END"},
		ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired},
		Reasoning:  &llm.Reasoning{BudgetTokens: 1024},
		Headers:    map[string]string{"Anthropic-Beta": "x"},
	}
	wreq, err := CountTokensRequest(req, wire.BuildOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	if wreq.Method != "POST" || wreq.Path != "/v1/messages/count_tokens" || wreq.Header.Get("Anthropic-Beta") != "x" || wreq.Header.Get("Accept") != "application/json" {
		t.Fatalf("%+v", wreq)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"model", "messages", "system", "tools", "tool_choice", "thinking"} {
		if _, ok := body[k]; !ok {
			t.Errorf("%s missing from %s", k, wreq.Body)
		}
	}
	for _, k := range []string{"max_tokens", "stream", "temperature", "stop_sequences"} {
		if _, ok := body[k]; ok {
			t.Errorf("%s sent to count_tokens: %s", k, wreq.Body)
		}
	}
	var ce *llm.ConfigError
	if _, err := CountTokensRequest(&llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "bot", Content: "x"}}}, wire.BuildOptions{}); !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
}

func TestParseCountTokens(t *testing.T) {
	res, err := ParseCountTokens([]byte(`{"input_tokens":1114}`))
	if err != nil || res.InputTokens != 1114 {
		t.Fatalf("%+v %v", res, err)
	}
	if res, err := ParseCountTokens([]byte(`{"input_tokens":0}`)); err != nil || res.InputTokens != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	var api *llm.APIError
	_, err = ParseCountTokens([]byte(`{"error":{"message":"model: claude-does-not-exist","type":"not_found_error"},"request_id":"req_1","type":"error"}`))
	if !errors.As(err, &api) || api.Type != "not_found_error" || api.RequestID != "req_1" {
		t.Fatalf("got %v", err)
	}
	var de *llm.DecodeError
	for _, b := range []string{`{"tokens":3}`, `{"input_tokens":"x"}`, `nope`} {
		if _, err := ParseCountTokens([]byte(b)); !errors.As(err, &de) {
			t.Errorf("%s: got %v", b, err)
		}
	}
}

func TestModelsRequestAndParse(t *testing.T) {
	if r := ModelsRequest("", wire.BuildOptions{}); r.Method != "GET" || r.Path != "/v1/models?limit=100" {
		t.Fatalf("%+v", r)
	}
	if r := ModelsRequest("claude-3-haiku-20240307", wire.BuildOptions{}); r.Path != "/v1/models?after_id=claude-3-haiku-20240307&limit=100" {
		t.Fatal(r.Path)
	}
	body := `{"data":[
		{"type":"model","id":"claude-sonnet-4-5-20250929","display_name":"Claude Sonnet 4.5","created_at":"2025-09-29T00:00:00Z"},
		{"type":"model","id":"claude-x","display_name":"X","created_at":"not a date","max_input_tokens":200000,"max_tokens":64000}
	],"has_more":true,"first_id":"claude-sonnet-4-5-20250929","last_id":"claude-x"}`
	models, next, err := ParseModels([]byte(body))
	if err != nil || next != "claude-x" || len(models) != 2 {
		t.Fatalf("%+v %q %v", models, next, err)
	}
	m := models[0]
	if m.ID != "claude-sonnet-4-5-20250929" || m.DisplayName != "Claude Sonnet 4.5" || !m.Created.Equal(time.Date(2025, 9, 29, 0, 0, 0, 0, time.UTC)) ||
		m.ContextWindow != 0 || m.MaxOutputTokens != 0 || m.Capabilities != nil {
		t.Fatalf("unreported data must stay zero: %+v", m)
	}
	if m := models[1]; !m.Created.IsZero() || m.ContextWindow != 200000 || m.MaxOutputTokens != 64000 {
		t.Fatalf("%+v", m)
	}
	if _, next, _ := ParseModels([]byte(`{"data":[],"has_more":false,"last_id":null}`)); next != "" {
		t.Fatalf("next %q on the last page", next)
	}
	var api *llm.APIError
	if _, _, err := ParseModels([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)); !errors.As(err, &api) || api.Type != "authentication_error" {
		t.Fatalf("got %v", err)
	}
}

// TestToolResultImageBlocks: a tool result with images is a tool_result
// whose content is blocks, images as base64 or url sources.
func TestToolResultImageBlocks(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	req := &llm.ChatRequest{Model: "claude-sonnet-4-5", Messages: []llm.Message{
		llm.UserText("look"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "shot", Arguments: "{}"}}},
		{Role: llm.RoleTool, ToolCallID: "toolu_1", Parts: []llm.Part{llm.ImagePart("image/png", png), llm.ImageURLPart("https://x.test/b.jpg")}},
	}}
	wreq, err := Codec{}.ChatRequest(req, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Messages []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(wreq.Body, &body); err != nil {
		t.Fatal(err)
	}
	last := body.Messages[len(body.Messages)-1]
	want := `{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(png) + `"}},{"type":"image","source":{"type":"url","url":"https://x.test/b.jpg"}}]}`
	if last.Role != "user" || len(last.Content) != 1 || string(last.Content[0]) != want {
		t.Fatalf("got %s\nwant %s", wreq.Body, want)
	}
}
