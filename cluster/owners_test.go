package cluster

import (
	"slices"
	"testing"

	"github.com/chorusrt/chorus/llmtest"
)

// TestBudgetOwners: every member names the same owner for each key's
// budget, a member of the cluster, by the key's fingerprint.
func TestBudgetOwners(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	const key = "sk-owners-test-key"
	addrs := freeAddrs(t, 2)
	nodes := joinAll(t, "owners", addrs, func(i int, c *Config) { c.Runtime = append(c.Runtime, openaiAt(srv, key)) })
	defer closeAll(t, nodes)
	var first []BudgetOwner
	for _, n := range nodes {
		got := n.BudgetOwners()
		if len(got) != 1 || got[0].Provider != "fake" || got[0].KeyID == "" || got[0].KeyID == key || !slices.Contains(addrs, got[0].Member) {
			t.Fatalf("%s: owners %+v", n.Address(), got)
		}
		if first == nil {
			first = got
		} else if !slices.Equal(first, got) {
			t.Fatalf("members disagree: %+v and %+v", first, got)
		}
	}
}
