package llmtest_test

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/chorusrt/chorus/internal/testkit/fixture"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// keyPaths adds the key paths of v to set: "a.b", arrays as "a[]". The
// contents of tool arguments are user data and are not walked.
func keyPaths(v any, prefix string, set map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			set[p] = true
			if k == "args" || k == "input" {
				continue
			}
			keyPaths(e, p, set)
		}
	case []any:
		for _, e := range x {
			keyPaths(e, prefix+"[]", set)
		}
	}
}

// recordedPaths reads vercel-ai payload-only streams (one JSON object a
// line) in place and returns the union of their key paths, grouped by the
// object's "type" (Anthropic) or under "" (other formats).
func recordedPaths(t *testing.T, byType bool, files ...string) map[string]map[string]bool {
	t.Helper()
	dir := fixture.Require(t)
	quality := indexQuality(t, dir)
	out := map[string]map[string]bool{}
	used := 0
	for _, f := range files {
		if q, ok := quality[f]; !ok || strings.HasPrefix(q, "synthetic") {
			t.Logf("skipping %s (quality %q)", f, q)
			continue
		}
		fh, err := os.Open(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				continue
			}
			typ := ""
			if byType {
				typ = str(m["type"])
			}
			if out[typ] == nil {
				out[typ] = map[string]bool{}
			}
			keyPaths(m, "", out[typ])
		}
		fh.Close()
		used++
	}
	if used == 0 {
		t.Fatal("the corpus holds none of the recordings this test reads")
	}
	return out
}

func indexQuality(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "INDEX.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	q := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "\t")
		if len(cols) > 1 {
			q[cols[0]] = cols[1]
		}
	}
	return q
}

// TestStreamShapesMatchRecordings checks that every key the fake server
// sends in a streamed event also appears, at the same place, in real
// recorded streams of the same format, and that the keys clients rely on
// are all there.
func TestStreamShapesMatchRecordings(t *testing.T) {
	reply := llmtest.Reply{
		Reasoning: "Let me think about it.", Signature: "c2lnbmF0dXJl", Text: "It is sunny in Paris.",
		ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`, Signature: "c2ln"}},
	}
	tests := []struct {
		name     string
		ep       endpoint
		byType   bool
		files    []string
		required []string
	}{
		{
			name: "openai", ep: openaiEP,
			files: []string{
				"openai/vercel-ai/packages/openai/src/chat/__fixtures__/openai-text.chunks.txt",
				"deepseek/vercel-ai/packages/deepseek/src/chat/__fixtures__/deepseek-tool-call.chunks.txt",
				"deepseek/vercel-ai/packages/deepseek/src/chat/__fixtures__/deepseek-reasoning.chunks.txt",
			},
			required: []string{"id", "object", "created", "model", "choices[].index", "choices[].delta.content",
				"choices[].delta.role", "choices[].delta.reasoning_content", "choices[].finish_reason",
				"choices[].delta.tool_calls[].index", "choices[].delta.tool_calls[].id",
				"choices[].delta.tool_calls[].function.name", "choices[].delta.tool_calls[].function.arguments",
				"usage.prompt_tokens", "usage.completion_tokens", "usage.prompt_tokens_details.cached_tokens",
				"usage.completion_tokens_details.reasoning_tokens"},
		},
		{
			name: "anthropic", ep: anthropicEP, byType: true,
			files: []string{
				"anthropic/vercel-ai/packages/anthropic/src/__fixtures__/anthropic-clear-thinking.1.chunks.txt",
				"anthropic/vercel-ai/packages/anthropic/src/__fixtures__/anthropic-json-tool.1.chunks.txt",
				"anthropic/vercel-ai/packages/anthropic/src/__fixtures__/anthropic-text.chunks.txt",
			},
			required: []string{"message_start/message.id", "message_start/message.model", "message_start/message.usage.input_tokens",
				"content_block_start/content_block.type", "content_block_start/content_block.signature",
				"content_block_start/content_block.id", "content_block_start/content_block.name",
				"content_block_delta/delta.thinking", "content_block_delta/delta.signature", "content_block_delta/delta.text",
				"content_block_delta/delta.partial_json", "message_delta/delta.stop_reason", "message_delta/usage.output_tokens",
				"message_stop/type", "ping/type", "content_block_stop/index"},
		},
		{
			name: "gemini", ep: geminiEP,
			files: []string{
				"gemini/vercel-ai/packages/google/src/__fixtures__/google-text.chunks.txt",
				"gemini/vercel-ai/packages/google/src/__fixtures__/google-reasoning.chunks.txt",
				"gemini/vercel-ai/packages/google/src/__fixtures__/google-tool-call-gemini3.chunks.txt",
				"gemini/vercel-ai/packages/google/src/__fixtures__/google-stream-no-args-tool-call.chunks.txt",
			},
			required: []string{"candidates[].content.parts[].text", "candidates[].content.parts[].thought",
				"candidates[].content.parts[].thoughtSignature", "candidates[].content.parts[].functionCall.name",
				"candidates[].content.parts[].functionCall.args", "candidates[].content.role", "candidates[].finishReason",
				"usageMetadata.promptTokenCount", "usageMetadata.candidatesTokenCount", "usageMetadata.thoughtsTokenCount",
				"usageMetadata.totalTokenCount", "modelVersion", "responseId"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recorded := recordedPaths(t, tc.byType, tc.files...)
			srv := llmtest.NewServer()
			defer srv.Close()
			srv.Push(llmtest.Respond(reply))
			r := post(t, newClient(t), tc.ep.url(srv, true), tc.ep.body(true))
			events, _ := parseSSE(r.body)
			ours := map[string]map[string]bool{}
			for _, ev := range events {
				var m map[string]any
				if json.Unmarshal([]byte(ev.Data), &m) != nil {
					continue // [DONE]
				}
				typ := ""
				if tc.byType {
					typ = str(m["type"])
				}
				if ours[typ] == nil {
					ours[typ] = map[string]bool{}
				}
				keyPaths(m, "", ours[typ])
			}
			var extra []string
			for typ, paths := range ours {
				if recorded[typ] == nil {
					t.Errorf("event type %q never appears in the recordings", typ)
					continue
				}
				for p := range paths {
					if !recorded[typ][p] {
						extra = append(extra, typ+"/"+p)
					}
				}
			}
			sort.Strings(extra)
			if len(extra) > 0 {
				t.Errorf("keys not seen in real recordings: %v", extra)
			}
			for _, req := range tc.required {
				typ, p := "", req
				if tc.byType {
					typ, p, _ = strings.Cut(req, "/")
				}
				if !ours[typ][p] {
					t.Errorf("required key %s missing", req)
				}
			}
		})
	}
}
