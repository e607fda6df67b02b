package runtime

import (
	"github.com/chorusrt/chorus/llm"
)

// What a target's wire format makes of a request's optional fields.
//
// Before a call is admitted, each of its targets is asked what its format
// makes of the request (providers.Client.Support, llm.Honours): the fields
// it would have to refuse and the ones it leaves out harmlessly. Under
// llm.RefuseUnsupported (the default) a target that would refuse a field
// is skipped, so a prompt-cache handle, logprobs or a client's own fields
// never reach a fallback whose format cannot take them; when no target is
// left the call fails with an *llm.UnsupportedFieldError naming the first
// target's fields, before anything is sent or any budget is spent. Under
// llm.DropUnsupported every target serves, without what it cannot take.
// What a target left out is in the answer's Meta.Dropped and the call's
// CallReport.Dropped. A request that sets no optional field costs one
// check (llm.ChatRequest.Optional).

// supported returns the targets that serve req, each with what it drops.
func (rt *Runtime) supported(req *llm.ChatRequest, targets []target) ([]target, error) {
	if !req.Optional() {
		return targets, nil
	}
	var first *llm.UnsupportedFieldError
	out := targets[:0:0]
	for _, t := range targets {
		probe := *req
		probe.Model = t.model
		s := t.g.creds[0].client.Support(&probe)
		if len(s.Refused) > 0 && req.OnUnsupported != llm.DropUnsupported {
			if first == nil {
				first = &llm.UnsupportedFieldError{Fields: s.Refused, Format: s.Format, Target: t.name}
			}
			continue
		}
		t.dropped = append(append([]string(nil), s.Dropped...), s.Refused...)
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, first
	}
	return out, nil
}

// droppedFor is what the target that c's provider serves model for left
// out of the request.
func droppedFor(targets []target, c *cred, model string) []string {
	for i := range targets {
		t := &targets[i]
		if len(t.dropped) > 0 && t.model == model && t.g.id == c.provider {
			return t.dropped
		}
	}
	return nil
}
