package batch

import (
	"strconv"

	"github.com/chorusrt/chorus/llm"
)

// Cost is what answers cost in US dollars, from the user's prices.
type Cost struct {
	USD float64
}

// usd is the cost for an output line's usage.cost: nil when unpriced.
func (c *Cost) usd() *float64 {
	if c == nil {
		return nil
	}
	v := c.USD
	return &v
}

// Add is the sum of two costs.
func (c Cost) Add(o Cost) Cost { return Cost{USD: c.USD + o.USD} }

// String prints the cost in dollars ("$0.001234").
func (c Cost) String() string { return "$" + strconv.FormatFloat(c.USD, 'f', 6, 64) }

// Prices are the prices a job uses: Models by "provider/model".
type Prices struct {
	Models llm.Prices
}

// costOf is the cost of one answer, priced by the model that served it
// (provider/model as the answer names it, so an alias that fell back is
// priced as what actually ran); nil when it has no price (never a guess).
func (p *Prices) costOf(served string, u llm.Usage, native bool) *Cost {
	if p == nil {
		return nil
	}
	price, ok := p.Models.Lookup(served)
	if !ok {
		return nil
	}
	return &Cost{USD: price.Cost(u, native)}
}

// savingOf is what the batch discount saved on one native answer: its
// live cost minus its batch cost; nil when the model has no price.
func (p *Prices) savingOf(served string, u llm.Usage) *Cost {
	if p == nil {
		return nil
	}
	price, ok := p.Models.Lookup(served)
	if !ok {
		return nil
	}
	return &Cost{USD: price.Cost(u, false) - price.Cost(u, true)}
}
