package gemini

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/providers/internal/wire"
)

// build runs ChatRequest and decodes the body into a generic value.
func build(t *testing.T, req *llm.ChatRequest, o wire.BuildOptions) (*wire.Request, map[string]any) {
	t.Helper()
	r, err := Codec{}.ChatRequest(req, o)
	if err != nil {
		t.Fatalf("ChatRequest: %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, r.Body)
	}
	return r, body
}

// at walks a decoded JSON value: keys for objects, integer strings for arrays.
func at(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// js decodes a JSON literal for comparisons.
func js(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad literal %s: %v", s, err)
	}
	return v
}

func user(s string) []llm.Message { return []llm.Message{llm.UserText(s)} }

func TestChatRequestPathAndHeaders(t *testing.T) {
	cases := []struct {
		model  string
		stream bool
		path   string
		accept string
	}{
		{"gemini-2.5-flash", false, "/v1beta/models/gemini-2.5-flash:generateContent", "application/json"},
		{"gemini-2.5-flash", true, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "text/event-stream"},
		{"models/gemini-3-pro-preview", false, "/v1beta/models/gemini-3-pro-preview:generateContent", "application/json"},
		{"tuned/my model?x#y", false, "/v1beta/models/tuned%2Fmy%20model%3Fx%23y:generateContent", "application/json"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			req := &llm.ChatRequest{Model: c.model, Messages: user("hi"), Headers: map[string]string{"X-Trace": "abc"}}
			r, _ := build(t, req, wire.BuildOptions{Stream: c.stream})
			if r.Method != http.MethodPost || r.Path != c.path {
				t.Errorf("%s %s, want POST %s", r.Method, r.Path, c.path)
			}
			if r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Accept") != c.accept || r.Header.Get("X-Trace") != "abc" {
				t.Errorf("headers %v", r.Header)
			}
			if r.Header.Get("X-Goog-Api-Key") != "" {
				t.Error("the request carries a key before Authorize")
			}
		})
	}
	h := http.Header{}
	Codec{}.Authorize(h, "secret-key", wire.Quirks{})
	if h.Get("x-goog-api-key") != "secret-key" || len(h) != 1 {
		t.Errorf("Authorize set %v", h)
	}
}

func TestChatRequestMinimalBody(t *testing.T) {
	r, err := Codec{}.ChatRequest(&llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.SystemText("be <brief>"), llm.UserText("hi & bye")}}, wire.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"systemInstruction":{"parts":[{"text":"be <brief>"}]},"contents":[{"role":"user","parts":[{"text":"hi & bye"}]}]}`
	if string(r.Body) != want {
		t.Errorf("body\n%s\nwant\n%s", r.Body, want)
	}
}

func TestChatRequestMapping(t *testing.T) {
	png := []byte{0x89, 'P', 'N', 'G'}
	pdf := []byte("%PDF-1.7")
	cases := []struct {
		name string
		req  llm.ChatRequest
		opt  wire.BuildOptions
		path []string
		want string // JSON; "absent" for a missing value
	}{
		{"system messages stay separate parts",
			llm.ChatRequest{Messages: []llm.Message{llm.SystemText("a"), llm.SystemText("b"), llm.UserText("u")}}, wire.BuildOptions{},
			[]string{"systemInstruction"}, `{"parts":[{"text":"a"},{"text":"b"}]}`},
		{"inline image, image URL and PDF",
			llm.ChatRequest{Messages: []llm.Message{{Role: llm.RoleUser, Content: "look", Parts: []llm.Part{
				llm.ImagePart("image/png", png), {Type: llm.PartImage, URL: "https://x.test/a.jpg", MIMEType: "image/jpeg"}, llm.DocumentPart(pdf), llm.TextPart("and this")}}}}, wire.BuildOptions{},
			[]string{"contents", "0"}, `{"role":"user","parts":[{"text":"look"},{"inlineData":{"mimeType":"image/png","data":"iVBORw=="}},{"fileData":{"mimeType":"image/jpeg","fileUri":"https://x.test/a.jpg"}},{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0xLjc="}},{"text":"and this"}]}`},
		{"tools as parametersJsonSchema",
			llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{
				{Name: "get", Description: "Get it", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
				{Name: "ping"}}}, wire.BuildOptions{},
			[]string{"tools"}, `[{"functionDeclarations":[{"name":"get","description":"Get it","parametersJsonSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},{"name":"ping","parametersJsonSchema":{"type":"object"}}]}]`},
		{"tool choice auto", llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceAuto}}, wire.BuildOptions{},
			[]string{"toolConfig"}, `{"functionCallingConfig":{"mode":"AUTO"}}`},
		{"tool choice none", llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceNone}}, wire.BuildOptions{},
			[]string{"toolConfig"}, `{"functionCallingConfig":{"mode":"NONE"}}`},
		{"tool choice required", llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{{Name: "f"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceRequired}}, wire.BuildOptions{},
			[]string{"toolConfig"}, `{"functionCallingConfig":{"mode":"ANY"}}`},
		{"tool choice named", llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{{Name: "f"}, {Name: "g"}}, ToolChoice: llm.ToolChoice{Mode: llm.ToolChoiceTool, Name: "g"}}, wire.BuildOptions{},
			[]string{"toolConfig"}, `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["g"]}}`},
		{"no tool choice, no toolConfig", llm.ChatRequest{Messages: user("u"), Tools: []llm.Tool{{Name: "f"}}}, wire.BuildOptions{},
			[]string{"toolConfig"}, "absent"},
		{"sampling and output", llm.ChatRequest{Messages: user("u"), MaxTokens: 300, Temperature: llm.Ptr(0.0), TopP: llm.Ptr(0.9), Stop: []string{"END"}, Seed: llm.Ptr(int64(42))}, wire.BuildOptions{},
			[]string{"generationConfig"}, `{"maxOutputTokens":300,"temperature":0,"topP":0.9,"stopSequences":["END"],"seed":42}`},
		{"learned rejections drop parameters", llm.ChatRequest{Messages: user("u"), Temperature: llm.Ptr(0.5), TopP: llm.Ptr(0.9), Seed: llm.Ptr(int64(1)), MaxTokens: 10},
			wire.BuildOptions{Learned: wire.Learned{NoTemperature: true, NoTopP: true, NoSeed: true}},
			[]string{"generationConfig"}, `{"maxOutputTokens":10}`},
		{"nothing set, no generationConfig", llm.ChatRequest{Messages: user("u")}, wire.BuildOptions{},
			[]string{"generationConfig"}, "absent"},
		{"json_schema", llm.ChatRequest{Messages: user("u"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema, Name: "x", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"}}}`)}}, wire.BuildOptions{},
			[]string{"generationConfig"}, `{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}}}}`},
		{"json_object", llm.ChatRequest{Messages: user("u"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONObject}}, wire.BuildOptions{},
			[]string{"generationConfig"}, `{"responseMimeType":"application/json"}`},
		{"text format sends nothing", llm.ChatRequest{Messages: user("u"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseText}}, wire.BuildOptions{},
			[]string{"generationConfig"}, "absent"},
		{"budget wins over effort", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortLow, BudgetTokens: 3000, IncludeThoughts: true}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":3000,"includeThoughts":true}`},
		{"effort none is budget 0", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortNone}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":0}`},
		{"effort low", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortLow}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":1024}`},
		{"effort medium", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortMedium}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":8192}`},
		{"effort high", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortHigh}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":24576}`},
		{"effort max", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{Effort: llm.EffortMax}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"thinkingBudget":24576}`},
		{"thoughts only keeps the dynamic budget", llm.ChatRequest{Messages: user("u"), Reasoning: &llm.Reasoning{IncludeThoughts: true}}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, `{"includeThoughts":true}`},
		{"no reasoning, no thinkingConfig", llm.ChatRequest{Messages: user("u"), MaxTokens: 5}, wire.BuildOptions{},
			[]string{"generationConfig", "thinkingConfig"}, "absent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.req.Model = "gemini-2.5-flash"
			_, body := build(t, &c.req, c.opt)
			got := at(body, c.path...)
			if c.want == "absent" {
				if got != nil {
					t.Errorf("%v = %v, want absent", c.path, got)
				}
				return
			}
			if want := js(t, c.want); !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Errorf("%v =\n%s\nwant\n%s", c.path, g, c.want)
			}
		})
	}
}

func TestChatRequestAssistantReplay(t *testing.T) {
	msgs := []llm.Message{
		llm.UserText("q"),
		{
			Role:    llm.RoleAssistant,
			Content: "answer",
			ThinkingBlocks: []llm.ThinkingBlock{
				{Format: "gemini", Text: "thought one", Signature: "SIG-T1"},
				{Format: "anthropic", Text: "foreign", Signature: "ANTHROPIC"},
				{Format: "gemini", Text: "thought two"},
				{Format: "gemini", Signature: "SIG-TEXT"},
				{Format: "gemini", Signature: "SIG-EXTRA"},
			},
			ToolCalls: []llm.ToolCall{
				{ID: "c1", Name: "add", Arguments: `{"a":1}`, Signature: "SIG-C1"},
				{ID: "c2", Name: "ping"},
			},
		},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: `{"sum": 3}`},
		{Role: llm.RoleTool, ToolCallID: "c2", Content: "pong", Parts: []llm.Part{llm.ImagePart("image/png", []byte{1, 2})}},
		{Role: llm.RoleTool, ToolCallID: "x9", ToolName: "lookup", Content: "[1,2]"},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "boom", IsError: true},
		llm.UserText("next"),
	}
	_, body := build(t, &llm.ChatRequest{Model: "m", Messages: msgs}, wire.BuildOptions{})
	want := js(t, `[
		{"role":"user","parts":[{"text":"q"}]},
		{"role":"model","parts":[
			{"text":"thought one","thought":true,"thoughtSignature":"SIG-T1"},
			{"text":"thought two","thought":true},
			{"text":"answer","thoughtSignature":"SIG-TEXT"},
			{"text":"","thoughtSignature":"SIG-EXTRA"},
			{"functionCall":{"id":"c1","name":"add","args":{"a":1}},"thoughtSignature":"SIG-C1"},
			{"functionCall":{"id":"c2","name":"ping","args":{}}}
		]},
		{"role":"user","parts":[
			{"functionResponse":{"id":"c1","name":"add","response":{"sum":3}}},
			{"functionResponse":{"id":"c2","name":"ping","response":{"result":"pong"}}},
			{"functionResponse":{"id":"x9","name":"lookup","response":{"result":[1,2]}}},
			{"functionResponse":{"id":"c1","name":"add","response":{"error":"boom"}}},
			{"inlineData":{"mimeType":"image/png","data":"AQI="}}
		]},
		{"role":"user","parts":[{"text":"next"}]}
	]`)
	if got := body["contents"]; !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		t.Errorf("contents =\n%s", g)
	}
}

func TestChatRequestToolResultWrapping(t *testing.T) {
	cases := []struct {
		content string
		isError bool
		want    string
	}{
		{`{"temp": 40}`, false, `{"temp":40}`},
		{`  {"nested":{"a":[1]}}  `, false, `{"nested":{"a":[1]}}`},
		{`40 C`, false, `{"result":"40 C"}`},
		{`42`, false, `{"result":42}`},
		{`"quoted"`, false, `{"result":"quoted"}`},
		{`[{"a":1}]`, false, `{"result":[{"a":1}]}`},
		{`{"broken": `, false, `{"result":"{\"broken\": "}`},
		{``, false, `{"result":""}`},
		{"line\n\"two\"", false, `{"result":"line\n\"two\""}`},
		{`{"code": 7}`, true, `{"error":{"code":7}}`},
		{`not found`, true, `{"error":"not found"}`},
	}
	for _, c := range cases {
		msgs := []llm.Message{
			llm.UserText("q"),
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "f", Arguments: "{}"}}},
			{Role: llm.RoleTool, ToolCallID: "c", Content: c.content, IsError: c.isError},
		}
		_, body := build(t, &llm.ChatRequest{Model: "m", Messages: msgs}, wire.BuildOptions{})
		got := at(body, "contents", "2", "parts", "0", "functionResponse", "response")
		if !reflect.DeepEqual(got, js(t, c.want)) {
			t.Errorf("content %q error %v: response %v, want %s", c.content, c.isError, got, c.want)
		}
	}
}

func TestChatRequestErrors(t *testing.T) {
	call := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "f", Arguments: "{}"}}}
	cases := []struct {
		name  string
		req   llm.ChatRequest
		field string
	}{
		{"unknown tool call id", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), call, llm.ToolResult("c2", "x", false)}}, "messages[2].tool_call_id"},
		{"tool result before its call", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), llm.ToolResult("c1", "x", false), call}}, "messages[1].tool_call_id"},
		{"second of consecutive tool results", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), call, llm.ToolResult("c1", "x", false), llm.ToolResult("zz", "y", false)}}, "messages[3].tool_call_id"},
		{"arguments not JSON", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "f", Arguments: "{oops"}}}}}, "messages[1].tool_calls[0].arguments"},
		{"arguments not an object", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.UserText("q"), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "a", Name: "f", Arguments: "[1]"}}}}}, "messages[1].tool_calls[0].arguments"},
		{"system image", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleSystem, Parts: []llm.Part{llm.ImagePart("image/png", []byte{1})}}, llm.UserText("q")}}, "messages[0].parts[0]"},
		{"unknown role", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: "robot", Content: "x"}}}, "messages[0].role"},
		{"empty model", llm.ChatRequest{Messages: user("q")}, "model"},
		{"only system", llm.ChatRequest{Model: "m", Messages: []llm.Message{llm.SystemText("s")}}, "messages"},
		{"empty user", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser}}}, "messages[0].content"},
		{"image without data", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: llm.PartImage}}}}}, "messages[0].parts[0]"},
		{"unknown part", llm.ChatRequest{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{{Type: "audio"}}}}}, "messages[0].parts[0].type"},
		{"tool parameters", llm.ChatRequest{Model: "m", Messages: user("q"), Tools: []llm.Tool{{Name: "f", Parameters: json.RawMessage(`[1]`)}}}, "tools[0].parameters"},
		{"schema", llm.ChatRequest{Model: "m", Messages: user("q"), ResponseFormat: &llm.ResponseFormat{Type: llm.ResponseJSONSchema}}, "response_format.schema"},
		{"seed range", llm.ChatRequest{Model: "m", Messages: user("q"), Seed: llm.Ptr(int64(1) << 40)}, "seed"},
		{"effort", llm.ChatRequest{Model: "m", Messages: user("q"), Reasoning: &llm.Reasoning{Effort: "extreme"}}, "reasoning.effort"},
		{"tool choice mode", llm.ChatRequest{Model: "m", Messages: user("q"), ToolChoice: llm.ToolChoice{Mode: "sometimes"}}, "tool_choice.mode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Codec{}.ChatRequest(&c.req, wire.BuildOptions{})
			var ce *llm.ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field {
				t.Fatalf("error = %v, want ConfigError on %s", err, c.field)
			}
		})
	}
	if _, err := (Codec{}).ChatRequest(nil, wire.BuildOptions{}); err == nil {
		t.Error("nil request accepted")
	}
}

func TestChatRequestToolNameRecovery(t *testing.T) {
	msgs := []llm.Message{
		llm.UserText("q"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "weather", Arguments: `{"city":"Rome"}`}}},
		llm.ToolResult("call_0", "sunny", false),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "time"}}}, // ids restart per answer
		llm.ToolResult("call_0", "noon", false),
	}
	_, body := build(t, &llm.ChatRequest{Model: "m", Messages: msgs}, wire.BuildOptions{})
	if n := at(body, "contents", "2", "parts", "0", "functionResponse", "name"); n != "weather" {
		t.Errorf("first result name %v", n)
	}
	if n := at(body, "contents", "4", "parts", "0", "functionResponse", "name"); n != "time" {
		t.Errorf("second result name %v: the latest call with the id must win", n)
	}
}

// TestThoughtSignatureRoundTrip parses recorded answers that carry
// signatures, builds the next request from result.Message(), and checks that
// every signature goes back on the same part it came on, as the recorded
// follow-up request (where there is one) sent it.
func TestThoughtSignatureRoundTrip(t *testing.T) {
	type partSig struct{ kind, sig string }
	// responseSigs lists the signed parts of a recorded answer, in order.
	responseSigs := func(t *testing.T, chunks ...[]byte) []partSig {
		var out []partSig
		for _, c := range chunks {
			var r struct {
				Candidates []struct {
					Content struct{ Parts []map[string]any }
				}
			}
			if err := json.Unmarshal(c, &r); err != nil {
				t.Fatal(err)
			}
			for _, cand := range r.Candidates[:1] {
				for _, p := range cand.Content.Parts {
					sig, _ := p["thoughtSignature"].(string)
					if sig == "" {
						continue
					}
					kind := "text"
					if p["functionCall"] != nil {
						kind = "call"
					} else if p["thought"] == true {
						kind = "thought"
					}
					out = append(out, partSig{kind, sig})
				}
			}
		}
		return out
	}
	// requestSigs lists the signed parts of the model turn of a request body.
	requestSigs := func(t *testing.T, body []byte, turn int) []partSig {
		var r struct {
			Contents []struct {
				Role  string
				Parts []map[string]any
			}
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		if turn >= len(r.Contents) || r.Contents[turn].Role != "model" {
			t.Fatalf("turn %d is not a model turn: %s", turn, body)
		}
		var out []partSig
		for _, p := range r.Contents[turn].Parts {
			sig, _ := p["thoughtSignature"].(string)
			if sig == "" {
				continue
			}
			kind := "text"
			if p["functionCall"] != nil {
				kind = "call"
			} else if p["thought"] == true {
				kind = "thought"
			}
			out = append(out, partSig{kind, sig})
		}
		return out
	}
	nextRequest := func(t *testing.T, res *llm.ChatResult) []byte {
		msgs := []llm.Message{llm.UserText("What's the weather in Florence, Italy?"), res.Message()}
		for _, tc := range res.ToolCalls {
			msgs = append(msgs, llm.ToolResult(tc.ID, "40 C", false))
		}
		if len(res.ToolCalls) == 0 {
			msgs = append(msgs, llm.UserText("thanks"))
		}
		r, err := Codec{}.ChatRequest(&llm.ChatRequest{Model: "gemini-3-pro-preview", Messages: msgs}, wire.BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Body
	}

	buffered := []struct {
		file string
		idx  int
		// recorded follow-up request whose model turn 1 must match, or -1
		next int
	}{
		{"TestGoogleThinking/gemini-3-pro-preview/thinking.yaml", 0, 1},
		{"TestGoogleThinking/gemini-2.5-pro/thinking.yaml", 0, 1},
		{"TestGoogleCommon/gemini-2.5-flash/multi_tool.yaml", 0, 1},
		{"TestGoogleThinking/gemini-3-pro-preview/thinking.yaml", 1, -1},
		{"google-reasoning-gemini3.json", 0, -1},
		{"google-tool-call-gemini3.json", 0, -1},
	}
	for _, c := range buffered {
		t.Run(c.file+"#"+strconv.Itoa(c.idx), func(t *testing.T) {
			x := findExchange(t, c.file, c.idx)
			res, err := Codec{}.ParseChat(x.Response.Body)
			if err != nil {
				t.Fatal(err)
			}
			want := responseSigs(t, x.Response.Body)
			if len(want) == 0 {
				t.Fatal("fixture carries no signature")
			}
			body := nextRequest(t, res)
			if got := requestSigs(t, body, 1); !reflect.DeepEqual(got, want) {
				t.Errorf("replayed signatures %.30q\nwant %.30q", got, want)
			}
			if c.next >= 0 {
				rec := findExchange(t, c.file, c.next).Request.Body
				if got, recorded := requestSigs(t, body, 1), requestSigs(t, rec, 1); !reflect.DeepEqual(got, recorded) {
					t.Errorf("replayed %.30q, the recorded follow-up sent %.30q", got, recorded)
				}
			}
		})
	}

	// Streams: the text signature arrives on a trailing empty part and goes
	// back on the merged text part.
	streamed := []string{
		"TestGoogleThinking/gemini-3-pro-preview/thinking-streaming.yaml",
		"google-text.chunks.txt",
		"test_google_streaming_tool_call_thought_signature.yaml",
	}
	for _, f := range streamed {
		t.Run(f, func(t *testing.T) {
			run := runSSE(t, findExchange(t, f, 0).Response.Body)
			want := responseSigs(t, run.chunks...)
			body := nextRequest(t, run.dec.Result())
			got := requestSigs(t, body, 1)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("replayed %.30q, want %.30q", got, want)
			}
			if strings.Contains(f, "google-text") {
				var r map[string]any
				_ = json.Unmarshal(body, &r)
				p := at(r, "contents", "1", "parts", "0")
				if at(p, "text") != run.dec.Result().Content || at(p, "thoughtSignature") != want[0].sig {
					t.Errorf("signature not on the text part: %v", p)
				}
			}
		})
	}
}
