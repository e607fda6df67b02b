package cluster

import "sort"

// BudgetOwner says which member owns a credential's budget: the one
// admitter of the provider key in the cluster.
type BudgetOwner struct {
	Provider string
	// KeyID is the key's fingerprint (never the key).
	KeyID string
	// Member is the owner's actor address; empty when the cluster could
	// not place the owner.
	Member string
}

// BudgetOwners lists the owner of each budget this member's runtime uses,
// sorted by provider and key: the member the cluster placed the budget's
// grain on (placing it now if no call has yet). Nil on a client.
func (n *Node) BudgetOwners() []BudgetOwner {
	if n.budgets == nil {
		return nil
	}
	n.budgets.mu.Lock()
	ids := make([]string, 0, len(n.budgets.creds))
	owners := make([]BudgetOwner, 0, len(n.budgets.creds))
	for id, c := range n.budgets.creds {
		ids = append(ids, id)
		owners = append(owners, BudgetOwner{Provider: c.Provider, KeyID: c.KeyID})
	}
	n.budgets.mu.Unlock()
	for i, id := range ids {
		if pid := n.grain(id, kindBudget); pid != nil {
			owners[i].Member = pid.Address
		}
	}
	sort.Slice(owners, func(i, j int) bool {
		if owners[i].Provider != owners[j].Provider {
			return owners[i].Provider < owners[j].Provider
		}
		return owners[i].KeyID < owners[j].KeyID
	})
	return owners
}
