package llmtest_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestGeminiBuffered(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	srv.Push(llmtest.Respond(llmtest.Reply{
		Reasoning: "pondering", Signature: "sig-text", Text: "Hi",
		ToolCalls: []llm.ToolCall{{Name: "weather", Arguments: `{"city":"Rome"}`, Signature: "sig-call"}},
	}))
	body := geminiEP.body(false)
	r := post(t, newClient(t), geminiEP.url(srv, false), body)
	if r.resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", r.resp.StatusCode, r.body)
	}
	m := obj(t, string(r.body))
	parts := asSlice(get(m, "candidates", 0, "content", "parts"))
	if len(parts) != 3 || str(get(m, "candidates", 0, "content", "role")) != "model" {
		t.Fatalf("parts %v", parts)
	}
	if get(parts[0], "thought") != true || str(get(parts[0], "text")) != "pondering" {
		t.Errorf("thought part %v", parts[0])
	}
	if str(get(parts[1], "text")) != "Hi" || str(get(parts[1], "thoughtSignature")) != "sig-text" {
		t.Errorf("text part %v", parts[1])
	}
	if str(get(parts[2], "functionCall", "name")) != "weather" || str(get(parts[2], "functionCall", "args", "city")) != "Rome" ||
		str(get(parts[2], "thoughtSignature")) != "sig-call" {
		t.Errorf("functionCall part %v", parts[2])
	}
	if str(get(m, "candidates", 0, "finishReason")) != "STOP" || str(m["modelVersion"]) != model || str(m["responseId"]) == "" {
		t.Errorf("envelope %v", m)
	}
	u := m["usageMetadata"].(map[string]any)
	// 9 bytes of reasoning = 3 deltas; text 1; args 15 bytes = 4 fragments.
	if num(u["promptTokenCount"]) != len(body)/4 || num(u["thoughtsTokenCount"]) != 3 || num(u["candidatesTokenCount"]) != 5 ||
		num(u["totalTokenCount"]) != len(body)/4+8 {
		t.Errorf("usageMetadata %v", u)
	}
}

// gmStream is a Gemini stream put back together.
type gmStream struct {
	chunks     []map[string]any
	thought    string
	text       string
	calls      []map[string]any
	signatures []string
	finish     string
	usage      map[string]any
}

func decodeGMChunks(t *testing.T, datas []string) gmStream {
	t.Helper()
	var s gmStream
	for _, d := range datas {
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			continue
		}
		s.chunks = append(s.chunks, m)
		for _, p := range asSlice(get(m, "candidates", 0, "content", "parts")) {
			pm := p.(map[string]any)
			if pm["thought"] == true {
				s.thought += str(pm["text"])
			} else {
				s.text += str(pm["text"])
			}
			if fc, ok := pm["functionCall"].(map[string]any); ok {
				s.calls = append(s.calls, fc)
			}
			if sig := str(pm["thoughtSignature"]); sig != "" {
				s.signatures = append(s.signatures, sig)
			}
		}
		if f := str(get(m, "candidates", 0, "finishReason")); f != "" {
			s.finish = f
		}
		if u, ok := m["usageMetadata"].(map[string]any); ok {
			s.usage = u
		}
	}
	return s
}

func TestGeminiStream(t *testing.T) {
	reply := llmtest.Reply{
		Reasoning: "thinking...", Signature: "sig-final", Text: "The answer",
		ToolCalls: []llm.ToolCall{{Name: "lookup", Arguments: `{"q":"x"}`, Signature: "sig-call"}},
	}
	for _, sse := range []bool{true, false} {
		name := "alt=sse"
		if !sse {
			name = "json array"
		}
		t.Run(name, func(t *testing.T) {
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(llmtest.Respond(reply))
			url := srv.GeminiBaseURL() + "/v1beta/models/gemini-x:streamGenerateContent"
			if sse {
				url += "?alt=sse"
			}
			r := post(t, newClient(t), url, geminiEP.body(true))
			if r.readErr != nil || r.resp.StatusCode != 200 {
				t.Fatalf("status %d err %v", r.resp.StatusCode, r.readErr)
			}
			var datas []string
			ct := r.resp.Header.Get("Content-Type")
			if sse {
				if !strings.HasPrefix(ct, "text/event-stream") {
					t.Errorf("content-type %q", ct)
				}
				if bytes.Contains(bytes.ReplaceAll(r.body, []byte("\r\n\r\n"), nil), []byte("\n\n")) || !bytes.HasSuffix(r.body, []byte("\r\n\r\n")) {
					t.Error("events are not separated by \\r\\n\\r\\n")
				}
				events, complete := parseSSE(r.body)
				if !complete {
					t.Error("incomplete SSE body")
				}
				for _, ev := range events {
					datas = append(datas, ev.Data)
				}
			} else {
				if !strings.HasPrefix(ct, "application/json") {
					t.Errorf("content-type %q", ct)
				}
				if !bytes.HasPrefix(r.body, []byte("[{")) || !bytes.Contains(r.body, []byte("}\n,\r\n{")) || !bytes.HasSuffix(r.body, []byte("]")) {
					t.Errorf("not a JSON array in pieces: %.200q", r.body)
				}
				var arr []json.RawMessage
				if err := json.Unmarshal(r.body, &arr); err != nil {
					t.Fatalf("array body: %v", err)
				}
				for _, a := range arr {
					datas = append(datas, string(a))
				}
			}
			s := decodeGMChunks(t, datas)
			if s.thought != reply.Reasoning || s.text != reply.Text {
				t.Errorf("thought %q text %q", s.thought, s.text)
			}
			if len(s.calls) != 1 || str(s.calls[0]["name"]) != "lookup" || str(get(s.calls[0], "args", "q")) != "x" {
				t.Errorf("calls %v", s.calls)
			}
			if strings.Join(s.signatures, ",") != "sig-call,sig-final" {
				t.Errorf("signatures %v", s.signatures)
			}
			if s.finish != "STOP" {
				t.Errorf("finish %q", s.finish)
			}
			last := s.chunks[len(s.chunks)-1]
			if str(get(last, "candidates", 0, "finishReason")) == "" {
				t.Error("finishReason is not on the last chunk")
			}
			for _, c := range s.chunks[:len(s.chunks)-1] {
				if get(c, "candidates", 0, "finishReason") != nil {
					t.Error("finishReason before the last chunk")
				}
				if str(c["modelVersion"]) != "gemini-x" {
					t.Errorf("modelVersion %v", c["modelVersion"])
				}
			}
			if num(s.usage["thoughtsTokenCount"]) != 3 || num(s.usage["candidatesTokenCount"]) != 3+3 {
				t.Errorf("final usage %v", s.usage)
			}
		})
	}
}
