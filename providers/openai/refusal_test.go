package openai

import (
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestResponsesStreamRefusal: a Responses stream whose message is a
// refusal finishes content_filter, with the refusal text in Refusal (not
// Content), whether the refusal came as response.refusal.delta events or
// only in the finished response; output_text stays Content. Buffered
// answers are in TestResponsesParseChat and TestResponsesFinishTable.
func TestResponsesStreamRefusal(t *testing.T) {
	const refusalItem = `{"id":"m","type":"message","content":[{"type":"output_text","text":"Well. "},{"type":"refusal","refusal":"I can't help."}]}`
	cases := []struct {
		name   string
		events [][2]string
		finish llm.FinishReason
	}{
		{"deltas", [][2]string{
			rx("response.output_item.added", `"output_index":0,"item":{"id":"m","type":"message","content":[]}`),
			rx("response.output_text.delta", `"output_index":0,"content_index":0,"delta":"Well. "`),
			rx("response.refusal.delta", `"output_index":0,"content_index":1,"delta":"I can't "`),
			rx("response.refusal.delta", `"output_index":0,"content_index":1,"delta":"help."`),
			rx("response.output_item.done", `"output_index":0,"item":`+refusalItem),
			rx("response.completed", `"response":{"id":"r","status":"completed","output":[`+refusalItem+`]}`),
		}, llm.FinishContentFilter},
		{"finished item only", [][2]string{
			rx("response.output_item.added", `"output_index":0,"item":{"id":"m","type":"message","content":[]}`),
			rx("response.output_item.done", `"output_index":0,"item":`+refusalItem),
			rx("response.completed", `"response":{"id":"r","status":"completed"}`),
		}, llm.FinishContentFilter},
		{"terminal response only", [][2]string{
			rx("response.completed", `"response":{"id":"r","status":"completed","output":[`+refusalItem+`]}`),
		}, llm.FinishContentFilter},
		{"cut short keeps length", [][2]string{
			rx("response.output_text.delta", `"output_index":0,"content_index":0,"delta":"Well. "`),
			rx("response.refusal.delta", `"output_index":0,"content_index":1,"delta":"I can't help."`),
			rx("response.incomplete", `"response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}`),
		}, llm.FinishLength},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, d, done, err := rxFeed(t, tc.events...)
			if err != nil || !done {
				t.Fatalf("done %v, err %v", done, err)
			}
			res := d.Result()
			if res.Content != "Well. " || res.Refusal != "I can't help." || res.FinishReason != tc.finish {
				t.Errorf("content %q, refusal %q, finish %q; want %q, %q, %q", res.Content, res.Refusal, res.FinishReason, "Well. ", "I can't help.", tc.finish)
			}
			if last := evs[len(evs)-1]; last.Type != llm.EventFinish || last.Finish != tc.finish {
				t.Errorf("last event %+v, want finish %q", last, tc.finish)
			}
		})
	}
}
