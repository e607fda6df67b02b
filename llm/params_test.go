package llm

import (
	"slices"
	"testing"
)

// TestHonoursCheck: a field the format cannot honour is refused when its
// loss changes the answer, its cost or what is kept, and dropped when it
// only asks for the provider's default or its bookkeeping; a client's own
// fields are refused by another format only.
func TestHonoursCheck(t *testing.T) {
	none := Honours{Format: "gemini"}
	cases := []struct {
		req              ChatRequest
		refused, dropped []string
	}{
		{ChatRequest{ServiceTier: "flex"}, []string{"service_tier"}, nil},
		{ChatRequest{ServiceTier: "auto"}, nil, []string{"service_tier"}},
		{ChatRequest{ServiceTier: "default"}, nil, []string{"service_tier"}},
		{ChatRequest{TopK: Ptr(3), Logprobs: &Logprobs{}}, []string{"top_k", "logprobs"}, nil},
		{ChatRequest{Store: Ptr(false)}, nil, nil},
		{ChatRequest{Store: Ptr(true)}, []string{"store"}, nil},
		{ChatRequest{User: "u", Metadata: map[string]string{"a": "b"}}, nil, []string{"metadata", "user"}},
		{ChatRequest{Include: []string{"reasoning.encrypted_content"}}, nil, nil},
		{ChatRequest{Messages: []Message{{Role: RoleUser, Content: "x", Cache: &CacheMark{}}}}, nil, []string{"cache_control"}},
		{ChatRequest{Extra: &Extra{Format: "gemini", Fields: []RawField{{Name: "labels"}}}}, nil, nil},
		{ChatRequest{Extra: &Extra{Format: "openai", Fields: []RawField{{Name: "web_search_options"}}}}, []string{"web_search_options"}, nil},
	}
	for i, c := range cases {
		s := none.Check(&c.req)
		if !slices.Equal(s.Refused, c.refused) || !slices.Equal(s.Dropped, c.dropped) {
			t.Errorf("case %d: refused %v dropped %v, want %v %v", i, s.Refused, s.Dropped, c.refused, c.dropped)
		}
	}
	if s := (Honours{Format: "anthropic", ServiceTiers: []string{"auto", "standard_only"}}).Check(&ChatRequest{ServiceTier: "auto"}); len(s.Refused)+len(s.Dropped) != 0 {
		t.Errorf("a tier the format takes: %+v", s)
	}
}
