package anthropic

import (
	"strings"
	"testing"

	"github.com/chorusrt/chorus/llm"
)

// TestStopSequenceRoundTrips: the stop sequence that ended an answer is
// read from a buffered answer and a stream's message_delta, and written
// back, with stop_reason stop_sequence, by the server side.
func TestStopSequenceRoundTrips(t *testing.T) {
	res, err := Codec{}.ParseChat([]byte(`{"type":"message","id":"m","content":[{"type":"text","text":"x"}],"stop_reason":"stop_sequence","stop_sequence":"END","usage":{}}`))
	if err != nil || res.StopSequence != "END" || res.FinishReason != llm.FinishStop {
		t.Fatalf("buffered: %v %+v", err, res)
	}
	d := Codec{}.NewStreamDecoder()
	for _, ev := range [][2]string{
		{"message_start", `{"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1}}}`},
		{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`},
		{"content_block_stop", `{"type":"content_block_stop","index":0}`},
		{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"output_tokens":1}}`},
		{"message_stop", `{"type":"message_stop"}`},
	} {
		if _, err := d.Feed([]byte(ev[0]), []byte(ev[1]), func(llm.Event) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if r := d.Result(); r.StopSequence != "END" {
		t.Fatalf("streamed: %+v", r)
	}
	b, err := EncodeServerMessage(res, "m", "c")
	if err != nil || !strings.Contains(string(b), `"stop_reason":"stop_sequence","stop_sequence":"END"`) {
		t.Fatalf("encoded %s %v", b, err)
	}
	s := NewServerStream("m", "c")
	out := string(s.End(nil, res))
	if !strings.Contains(out, `"stop_reason":"stop_sequence","stop_sequence":"END"`) {
		t.Fatalf("streamed end %s", out)
	}
	res.StopSequence = ""
	if b, _ := EncodeServerMessage(res, "m", "c"); !strings.Contains(string(b), `"stop_reason":"end_turn","stop_sequence":null`) {
		t.Fatalf("no sequence: %s", b)
	}
}
