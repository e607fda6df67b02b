package llm

import "encoding/json"

// Role is who authored a message.
type Role string

// The four roles. Any other value is rejected by ChatRequest.Validate.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// PartType says what a content Part carries.
type PartType string

// Content part types.
const (
	PartText     PartType = "text"
	PartImage    PartType = "image"
	PartDocument PartType = "document"
)

// Part is one piece of multimodal message content. An image carries either
// inline Data with its MIMEType or a URL; a document carries inline PDF Data.
type Part struct {
	Type     PartType
	Text     string
	MIMEType string
	Data     []byte
	URL      string
}

// TextPart returns a text part.
func TextPart(s string) Part { return Part{Type: PartText, Text: s} }

// ImagePart returns an inline image part.
func ImagePart(mime string, data []byte) Part {
	return Part{Type: PartImage, MIMEType: mime, Data: data}
}

// ImageURLPart returns an image part referenced by URL.
func ImageURLPart(url string) Part { return Part{Type: PartImage, URL: url} }

// DocumentPart returns an inline PDF document part.
func DocumentPart(data []byte) Part {
	return Part{Type: PartDocument, MIMEType: "application/pdf", Data: data}
}

// ToolCall is a call the model asked for. Arguments is the JSON text of the
// call's arguments as the model produced it.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
	// Signature is a provider's opaque signature for this call (Gemini's
	// thoughtSignature on a functionCall part); it is replayed as received.
	Signature string
}

// ThinkingBlock is one block of model reasoning kept for replay on the next
// turn. Format names the wire format that produced it ("anthropic",
// "gemini", "openai-responses"); a block is only replayed to that format,
// so a history can move between providers without sending foreign signatures.
type ThinkingBlock struct {
	Format    string
	Text      string
	Signature string
	// Redacted marks an Anthropic redacted_thinking block; Data holds its payload.
	Redacted bool
	// Data is opaque provider data: redacted thinking, or OpenAI Responses
	// encrypted reasoning content.
	Data string
	// ID is the provider's id for the block, where it has one.
	ID string
}

// Message is one turn of a conversation.
//
// Content is the plain text of the message. Parts carries multimodal content;
// when both are set, Content is sent first as a text part.
type Message struct {
	Role    Role
	Content string
	Parts   []Part

	// Assistant turns.
	ToolCalls      []ToolCall
	Reasoning      string          // plain reasoning text (DeepSeek reasoning_content and similar)
	ThinkingBlocks []ThinkingBlock // signed reasoning blocks, replayed in order
	Refusal        string

	// Tool results (Role == RoleTool).
	ToolCallID string
	ToolName   string // optional; recovered from the history when empty
	IsError    bool

	// Cache, when set, is a prompt-cache breakpoint after this message
	// (see CacheMark).
	Cache *CacheMark
}

// SystemText returns a system message.
func SystemText(s string) Message { return Message{Role: RoleSystem, Content: s} }

// UserText returns a user message with text content.
func UserText(s string) Message { return Message{Role: RoleUser, Content: s} }

// AssistantText returns an assistant message with text content.
func AssistantText(s string) Message { return Message{Role: RoleAssistant, Content: s} }

// ToolResult returns a tool message answering the call with the given id.
func ToolResult(callID, content string, isError bool) Message {
	return Message{Role: RoleTool, ToolCallID: callID, Content: content, IsError: isError}
}

// Tool is a function the model may call. Parameters is a JSON Schema object;
// when empty, {"type":"object"} is sent.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
	Strict      bool
	// Cache, when set, is a prompt-cache breakpoint after this tool's
	// definition (see CacheMark).
	Cache *CacheMark
}

// ToolChoiceMode says whether and which tools the model may call.
type ToolChoiceMode string

// Tool choice modes. The zero value leaves the choice to the provider.
const (
	ToolChoiceAuto     ToolChoiceMode = "auto"
	ToolChoiceNone     ToolChoiceMode = "none"
	ToolChoiceRequired ToolChoiceMode = "required"
	ToolChoiceTool     ToolChoiceMode = "tool" // the tool named in ToolChoice.Name
)

// ToolChoice constrains tool use.
type ToolChoice struct {
	Mode ToolChoiceMode
	Name string
}

// ResponseFormatType selects structured output.
type ResponseFormatType string

// Response formats.
const (
	ResponseText       ResponseFormatType = "text"
	ResponseJSONObject ResponseFormatType = "json_object"
	ResponseJSONSchema ResponseFormatType = "json_schema"
)

// ResponseFormat asks for structured output, mapped natively per format.
type ResponseFormat struct {
	Type   ResponseFormatType
	Name   string          // schema name (json_schema)
	Schema json.RawMessage // JSON Schema (json_schema)
	Strict bool
}

// Effort is a provider-neutral reasoning effort.
type Effort string

// Reasoning efforts. EffortNone turns reasoning off where the provider allows.
const (
	EffortNone   Effort = "none"
	EffortLow    Effort = "low"
	EffortMedium Effort = "medium"
	EffortHigh   Effort = "high"
	EffortMax    Effort = "max"
)

// Reasoning controls model thinking. Effort maps to each format's control
// (OpenAI reasoning_effort, Anthropic and Gemini thinking budgets); BudgetTokens,
// when set, overrides the budget on formats that take one.
type Reasoning struct {
	Effort       Effort
	BudgetTokens int
	// IncludeThoughts asks formats that hide reasoning by default (Gemini)
	// to stream it.
	IncludeThoughts bool
	// Summary asks the Responses API for reasoning summaries ("auto",
	// "concise", "detailed").
	Summary string
}

// ChatRequest is one chat call.
type ChatRequest struct {
	Model    string
	Messages []Message
	Tools    []Tool

	ToolChoice        ToolChoice
	ParallelToolCalls *bool
	ResponseFormat    *ResponseFormat
	Reasoning         *Reasoning

	MaxTokens   int
	Temperature *float64
	TopP        *float64
	Stop        []string
	Seed        *int64

	// Headers are extra HTTP headers for this call. Authentication and
	// framing headers are reserved and rejected by Validate.
	Headers map[string]string

	// Cache holds prompt-caching options (OpenAI prompt_cache_key and
	// retention, Gemini cached content); breakpoints are marked on
	// messages and tools (CacheMark).
	Cache *PromptCache

	// Optional fields some formats honour (params.go). A target whose
	// format cannot honour one that is set refuses the call, or drops it
	// under DropUnsupported (Honours.Check says which).

	TopK             *int
	FrequencyPenalty *float64
	PresencePenalty  *float64
	// LogitBias maps token ids (as decimal text) to a bias, -100 to 100.
	LogitBias map[string]int
	Logprobs  *Logprobs
	// ServiceTier is the processing tier the format names ("flex",
	// "priority", "auto"; Anthropic "auto", "standard_only").
	ServiceTier string
	// User is the end user's id (OpenAI user, Anthropic metadata.user_id);
	// SafetyIdentifier OpenAI's safety_identifier.
	User             string
	SafetyIdentifier string
	// Metadata are OpenAI's stored-completion labels.
	Metadata map[string]string
	// Store asks the provider to keep (true) or not keep (false) the
	// answer; nil is the provider's default.
	Store *bool
	// Verbosity is OpenAI's answer length ("low", "medium", "high").
	Verbosity string
	// Safety are Gemini's safetySettings.
	Safety []SafetySetting
	// Include and Truncation are the Responses API's.
	Include    []string
	Truncation string
	// Extra are the client's fields llm has no name for, for an upstream
	// of the client's own format only.
	Extra *Extra
	// OnUnsupported says what happens to a set field the target cannot
	// honour (default: refused).
	OnUnsupported UnsupportedPolicy
	// PreferResponses serves the call through OpenAI's Responses API on
	// provider "openai" (a Responses client's request: reasoning items,
	// include, store); every other endpoint serves it as usual.
	PreferResponses bool
}

// Ptr returns a pointer to v, for the optional fields of ChatRequest.
func Ptr[T any](v T) *T { return &v }
