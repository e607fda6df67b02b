package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
)

// Embeddings run on the members, from a client too, and their errors
// cross typed.
func TestRemoteEmbed(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	addrs := freeAddrs(t, 3)
	members := joinAll(t, "embed", addrs[:2], func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, "sk-test")) })
	client, err := Join(context.Background(), Config{Name: "embed", Bind: addrs[2], Peers: addrs[:2], Client: true, RefreshInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(t, append(members, client))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := client.WaitMembers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		res, err := client.Embed(ctx, &llm.EmbedRequest{Model: "fake/e", Inputs: []string{"a", "b", "c"}})
		if err != nil {
			t.Fatalf("embed %d: %v", i, err)
		}
		if len(res.Vectors) != 3 || len(res.Vectors[0]) == 0 {
			t.Fatalf("embed %d: %d vectors", i, len(res.Vectors))
		}
		want := llmtest.EmbeddingFor("b", len(res.Vectors[1]))
		if res.Vectors[1][0] != want[0] {
			t.Fatalf("embed %d: vector of \"b\" is not the server's", i)
		}
	}
	_, err = client.Embed(ctx, &llm.EmbedRequest{Model: "nowhere/e", Inputs: []string{"a"}})
	var ce *llm.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("embed on an unknown provider: %v (%T), want a *llm.ConfigError from the member", err, err)
	}
	if _, err := client.Embed(ctx, nil); err == nil {
		t.Fatal("a nil request was sent")
	}
}
