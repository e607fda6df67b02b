package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/store"
)

// Journal record kinds. The journal is the session's only durable state:
// replaying these records in order rebuilds it (see state.apply).
const (
	recUserMessage      = "user_message"      // a user message, queued until a turn or step boundary takes it
	recTurnStarted      = "turn_started"      // a turn starts with the queued messages it takes
	recCompaction       = "compaction"        // a summary of older turns
	recModelStarted     = "model_started"     // a RunModel attempt starts (steering messages taken first)
	recModelOutput      = "model_output"      // a completed assistant message and the calls it plans
	recApprovalResolved = "approval_resolved" // an approval interrupt is resolved (or expired)
	recToolStarted      = "tool_started"      // an attempt of a tool call starts: appended before the handler runs
	recToolAttemptFail  = "tool_attempt_failed"
	recToolFinished     = "tool_finished" // a tool record ends
	recCancelRequested  = "cancel_requested"
	recTurnFinished     = "turn_finished"
)

// wirePart is a message part as stored: never inline bytes.
type wirePart struct {
	Type     llm.PartType `json:"type"`
	Text     string       `json:"text,omitempty"`
	MIMEType string       `json:"mime_type,omitempty"`
	URL      string       `json:"url,omitempty"`
}

type wireCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments,omitempty"`
	Signature string `json:"signature,omitempty"`
}

type wireThinking struct {
	Format    string `json:"format,omitempty"`
	Text      string `json:"text,omitempty"`
	Signature string `json:"signature,omitempty"`
	Redacted  bool   `json:"redacted,omitempty"`
	Data      string `json:"data,omitempty"`
	ID        string `json:"id,omitempty"`
}

// wireMsg is a message as stored in the journal.
type wireMsg struct {
	Role       llm.Role       `json:"role"`
	Content    string         `json:"content,omitempty"`
	Parts      []wirePart     `json:"parts,omitempty"`
	ToolCalls  []wireCall     `json:"tool_calls,omitempty"`
	Reasoning  string         `json:"reasoning,omitempty"`
	Thinking   []wireThinking `json:"thinking,omitempty"`
	Refusal    string         `json:"refusal,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolName   string         `json:"tool_name,omitempty"`
	IsError    bool           `json:"is_error,omitempty"`
}

// toWire converts a message whose media parts are already references.
func toWire(m llm.Message) wireMsg {
	w := wireMsg{Role: m.Role, Content: m.Content, Reasoning: m.Reasoning, Refusal: m.Refusal,
		ToolCallID: m.ToolCallID, ToolName: m.ToolName, IsError: m.IsError}
	for _, p := range m.Parts {
		w.Parts = append(w.Parts, wirePart{Type: p.Type, Text: p.Text, MIMEType: p.MIMEType, URL: p.URL})
	}
	for _, c := range m.ToolCalls {
		w.ToolCalls = append(w.ToolCalls, wireCall(c))
	}
	for _, b := range m.ThinkingBlocks {
		w.Thinking = append(w.Thinking, wireThinking(b))
	}
	return w
}

func (w wireMsg) message() llm.Message {
	m := llm.Message{Role: w.Role, Content: w.Content, Reasoning: w.Reasoning, Refusal: w.Refusal,
		ToolCallID: w.ToolCallID, ToolName: w.ToolName, IsError: w.IsError}
	for _, p := range w.Parts {
		m.Parts = append(m.Parts, llm.Part{Type: p.Type, Text: p.Text, MIMEType: p.MIMEType, URL: p.URL})
	}
	for _, c := range w.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall(c))
	}
	for _, b := range w.Thinking {
		m.ThinkingBlocks = append(m.ThinkingBlocks, llm.ThinkingBlock(b))
	}
	return m
}

type recUser struct {
	QID int     `json:"qid"`
	Msg wireMsg `json:"msg"`
}

type recTurn struct {
	Turn  int   `json:"turn"`
	Taken []int `json:"taken"`
}

type recCompact struct {
	Through int       `json:"through"` // last turn the summary covers
	Summary string    `json:"summary"`
	Usage   llm.Usage `json:"usage"`
}

type recModelStart struct {
	Turn    int   `json:"turn"`
	Step    int   `json:"step"`
	Attempt int   `json:"attempt"`
	Taken   []int `json:"taken,omitempty"` // steering messages taken at this boundary
}

type plannedCall struct {
	ID          string `json:"id"`
	ModelCallID string `json:"model_call_id"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments,omitempty"`
	Effect      Effect `json:"effect"`
	Step        int    `json:"step"`
	// ApprovalStep is the AwaitToolApproval step of a call that needs
	// approval.
	ApprovalStep int       `json:"approval_step,omitempty"`
	Approval     bool      `json:"approval,omitempty"`
	Interrupt    string    `json:"interrupt,omitempty"`
	Deadline     time.Time `json:"deadline,omitzero"`
	MaxAttempts  int       `json:"max_attempts"`
	// Agent is the agent that asked for the call (a ModelStep's).
	Agent string `json:"agent,omitempty"`
	// Unknown marks a call of a tool the session does not have: it ends
	// failed without running.
	Unknown bool `json:"unknown,omitempty"`
}

type recModelOut struct {
	Turn    int           `json:"turn"`
	Step    int           `json:"step"`
	Attempt int           `json:"attempt"`
	Msg     wireMsg       `json:"msg"`
	Usage   llm.Usage     `json:"usage"`
	Calls   []plannedCall `json:"calls,omitempty"`
	// State is a ModelStep's state after this step (StepOutput.State).
	State []byte `json:"state,omitempty"`
	// Ordered: the writes among Calls run one at a time, in their order
	// (absent in journals written before writes were ordered: parallel).
	Ordered bool `json:"ordered,omitempty"`
}

type recResolve struct {
	Turn      int    `json:"turn"`
	Interrupt string `json:"interrupt"`
	Call      string `json:"call"`
	Approved  bool   `json:"approved"`
	Reason    string `json:"reason,omitempty"`
	Expired   bool   `json:"expired,omitempty"`
}

type recToolStart struct {
	Turn    int    `json:"turn"`
	Call    string `json:"call"`
	Attempt int    `json:"attempt"`
	Key     string `json:"key,omitempty"`
}

type recToolFail struct {
	Turn    int    `json:"turn"`
	Call    string `json:"call"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
}

type recToolEnd struct {
	Turn   int        `json:"turn"`
	Call   string     `json:"call"`
	Status ToolStatus `json:"status"`
	Result string     `json:"result,omitempty"`
	Error  string     `json:"error,omitempty"`
	Images []MediaRef `json:"images,omitempty"`
	// Skipped: the call never ran because an earlier write of its
	// response did not succeed (Status is failed).
	Skipped bool `json:"skipped,omitempty"`
}

type recCancel struct {
	Turn   int    `json:"turn"`
	Reason string `json:"reason,omitempty"`
}

type recTurnEnd struct {
	Turn   int        `json:"turn"`
	Status TurnStatus `json:"status"`
	Error  string     `json:"error,omitempty"`
	Note   string     `json:"note,omitempty"`
}

// batch collects the records of one atomic Append.
type batch struct {
	id   string
	recs []store.Record
	err  error
}

// add encodes one record.
func (b *batch) add(kind string, v any) {
	if b.err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		b.err = fmt.Errorf("session %q: encoding %s: %w", b.id, kind, err)
		return
	}
	b.recs = append(b.recs, store.Record{Session: b.id, Kind: kind, Data: data, At: time.Now().UTC()})
}
