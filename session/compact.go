package session

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/chorusrt/chorus/llm"
)

// summaryInstructions is the system message of a summary call.
const summaryInstructions = "You summarize conversations between a user and an assistant that uses tools. " +
	"Write a concise summary that keeps every fact, decision, open question and tool outcome the assistant " +
	"needs to continue, in particular which writes (refunds, emails, orders) were made, failed or have an " +
	"unknown outcome. Answer with the summary only."

// estimateTokens counts three bytes of JSON as one token: the model input
// (instructions, tool definitions, summary, history after it) plus the
// queued messages the next turn takes and the policy's reserved tokens.
func (a *sessionActor) estimateTokens() int {
	n := len(a.m.opt.Instructions) + len(a.st.Summary)
	for _, d := range a.m.defs {
		n += len(d.Name) + len(d.Description) + len(d.Parameters)
	}
	for _, h := range a.st.History {
		if h.Turn > a.st.SummaryThrough {
			b, _ := json.Marshal(h.Msg)
			n += len(b)
		}
	}
	for _, q := range a.st.Queue {
		b, _ := json.Marshal(q.Msg)
		n += len(b)
	}
	return n/3 + a.m.opt.Compaction.ReservedTokens
}

// compactThrough is the last turn a summary would cover now.
func (a *sessionActor) compactThrough() int {
	return a.st.Turn - a.m.opt.Compaction.KeepTurns
}

// needCompaction reports whether the next turn starts with a compaction:
// there is a policy, turns older than the kept ones are not summarized yet,
// and the estimate reaches the trigger.
func (a *sessionActor) needCompaction() bool {
	p := a.m.opt.Compaction
	if p == nil || a.skipCompact == a.st.Turn+1 {
		return false
	}
	if a.compactThrough() <= a.st.SummaryThrough {
		return false
	}
	return float64(a.estimateTokens()) >= float64(p.ContextWindowTokens)*p.TriggerRatio
}

// startCompaction asks the model for a summary of the earlier summary and
// the turns after it up to compactThrough, as plain text, without tools.
func (a *sessionActor) startCompaction() {
	st := a.st
	through := a.compactThrough()
	var b strings.Builder
	if st.Summary != "" {
		fmt.Fprintf(&b, "Summary of turns 1 to %d:\n%s\n\n", st.SummaryThrough, st.Summary)
	}
	for _, h := range st.History {
		if h.Turn <= st.SummaryThrough || h.Turn > through {
			continue
		}
		writeTranscript(&b, h)
	}
	text := b.String()
	if len(text) > defaultSummaryMaxBytes {
		text = "…" + text[len(text)-defaultSummaryMaxBytes:]
	}
	req := &llm.ChatRequest{Model: a.m.opt.Compaction.SummaryModel, Messages: []llm.Message{
		llm.SystemText(summaryInstructions),
		llm.UserText("Summarize this conversation:\n\n" + text),
	}}
	ctx, cancel := context.WithTimeout(a.m.base, a.m.opt.ModelTimeout)
	a.compacting, a.compactStop = true, cancel
	turn := st.Turn + 1
	a.publish(Event{Type: EventStepStarted, Turn: turn, Attempt: 1, StepKind: StepCompact})
	self, sys := a.self, a.m.sys
	a.m.work.Add(1)
	go func() {
		defer a.m.work.Done()
		defer cancel()
		res, err := a.m.streamModel(ctx, req, nil)
		msg := msgCompactDone{Turn: turn, Through: through, Err: err}
		if err == nil {
			msg.Summary, msg.Usage = strings.TrimSpace(res.Content), res.Usage
		}
		sys.Root.Send(self, msg)
	}()
}

func writeTranscript(b *strings.Builder, h histEntry) {
	m := h.Msg
	switch m.Role {
	case llm.RoleUser:
		fmt.Fprintf(b, "[turn %d] User: %s", h.Turn, m.Content)
		for _, p := range m.Parts {
			if p.Type == llm.PartText {
				b.WriteString(" " + p.Text)
			} else {
				fmt.Fprintf(b, " [%s]", p.Type)
			}
		}
	case llm.RoleAssistant:
		fmt.Fprintf(b, "[turn %d] Assistant: %s", h.Turn, m.Content)
		for _, c := range m.ToolCalls {
			fmt.Fprintf(b, " [calls %s %s]", c.Name, c.Arguments)
		}
	case llm.RoleTool:
		fmt.Fprintf(b, "[turn %d] Tool %s result: %s", h.Turn, m.ToolName, m.Content)
	default:
		fmt.Fprintf(b, "[turn %d] %s: %s", h.Turn, m.Role, m.Content)
	}
	b.WriteString("\n")
}

func (a *sessionActor) onCompactDone(msg msgCompactDone) {
	if !a.compacting || msg.Turn != a.st.Turn+1 {
		return
	}
	a.compacting, a.compactStop = false, nil
	if a.closing || a.broken != nil {
		return
	}
	if msg.Err != nil || msg.Summary == "" {
		why := "empty summary"
		if msg.Err != nil {
			why = msg.Err.Error()
		}
		// The turn goes on uncompacted; the next turn tries again.
		a.log.Warn("compaction failed", slog.Int("turn", msg.Turn), slog.String("error", why))
		a.skipCompact = msg.Turn
		return
	}
	b := a.newBatch()
	b.add(recCompaction, recCompact{Through: msg.Through, Summary: msg.Summary, Usage: msg.Usage})
	if !a.appendBatch(b) {
		return
	}
	a.publish(Event{Type: EventCompacted, Turn: msg.Turn, Attempt: 1, StepKind: StepCompact, Text: msg.Summary})
}
