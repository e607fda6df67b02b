package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

func TestRemoteStreamDeliversInOrder(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "stream-order", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	defer closeAll(t, nodes)

	text := strings.Repeat("abcdefgh", 200)
	for range 4 {
		srv.Push(llmtest.Text(text))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 4 {
		s, err := nodes[0].Stream(ctx, &llm.ChatRequest{Model: "fake/m", Messages: []llm.Message{llm.UserText("hi")}})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		n := 0
		for ev, err := range s.All() {
			if err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			if ev.Type == llm.EventText {
				b.WriteString(ev.Text)
				n++
			}
		}
		if b.String() != text {
			t.Fatalf("call %d: text of %d bytes in %d deltas, want the %d sent", i, b.Len(), n, len(text))
		}
		res, err := s.Result()
		if err != nil || res.Content != text || res.FinishReason != llm.FinishStop {
			t.Fatalf("call %d: result %+v, %v", i, res, err)
		}
	}
	if srv.Count() != 4 {
		t.Fatalf("provider saw %d requests, want 4", srv.Count())
	}
}
