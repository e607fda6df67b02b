package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/chorusrt/chorus/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLogHandlerCarriesTraceIDs: a record logged with a span's context has
// its trace and span ids; one logged without has neither.
func TestLogHandlerCarriesTraceIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewTextHandler(&buf, nil))).With("k", "v")
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := fmt.Sprintf("trace_id=%s span_id=%s", span.SpanContext().TraceID(), span.SpanContext().SpanID())
	if len(lines) != 2 || !strings.Contains(lines[0], want) || !strings.Contains(lines[0], "k=v") || strings.Contains(lines[1], "trace_id") {
		t.Fatalf("log lines %q, want the first with %q", lines, want)
	}
}

// TestErrorType: error.type is a small set of classes.
func TestErrorType(t *testing.T) {
	for err, want := range map[error]string{
		&llm.RateLimitError{}:                           "rate_limit",
		&llm.APIError{Status: 503}:                      "server",
		fmt.Errorf("x: %w", &llm.APIError{Status: 404}): "client",
		context.DeadlineExceeded:                        "timeout",
		llm.ErrOverloaded:                               "overloaded",
		errors.New("what"):                              "_OTHER",
	} {
		if got := ErrorType(err); got != want {
			t.Errorf("ErrorType(%v) = %q, want %q", err, got, want)
		}
	}
}

// TestLibrariesUseTheAPIOnly: no library package of Chorus imports the
// OpenTelemetry SDK or an exporter; only the chorus command does. (Proto.
// Actor's actor package itself imports the SDK's metric package for its
// own metrics, so packages on actors reach it indirectly; telemetry,
// pipeline and batch reach no SDK package at all.)
func TestLibrariesUseTheAPIOnly(t *testing.T) {
	sdk := func(p string) bool {
		return strings.HasPrefix(p, "go.opentelemetry.io/otel/sdk") || strings.HasPrefix(p, "go.opentelemetry.io/otel/exporters")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "github.com/chorusrt/chorus/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if strings.HasPrefix(f[0], "github.com/chorusrt/chorus/cmd/") {
			continue
		}
		for _, imp := range f[1:] {
			if sdk(imp) {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
	out, err = exec.Command("go", "list", "-deps", "github.com/chorusrt/chorus/telemetry", "github.com/chorusrt/chorus/pipeline", "github.com/chorusrt/chorus/batch").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, d := range strings.Fields(string(out)) {
		if sdk(d) {
			t.Errorf("telemetry, pipeline or batch reaches %s", d)
		}
	}
}

// TestContentMessagesShape: recorded content is shaped as the GenAI
// conventions' message parts: an image by URL is a "uri" part, inline
// bytes a "blob" part (base64 content, modality, mime type), an
// assistant's reasoning a "reasoning" part, beside text, tool calls and
// tool results; the output message carries its reasoning and finish reason.
func TestContentMessagesShape(t *testing.T) {
	in := inputMessages([]llm.Message{
		llm.SystemText("be brief"),
		{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("what is this?"), {Type: llm.PartImage, MIMEType: "image/png", URL: "https://example.com/a.png"},
			llm.ImagePart("image/jpeg", []byte{1, 2, 3}), {Type: llm.PartDocument, MIMEType: "application/pdf", Data: []byte("%PDF")}}},
		{Role: llm.RoleAssistant, Reasoning: "think first", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "look", Arguments: `{"q":1}`}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Content: "found"},
	})
	var got []struct {
		Role  string           `json:"role"`
		Parts []map[string]any `json:"parts"`
	}
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("%v: %s", err, in)
	}
	shape := func(ps []map[string]any) string {
		var out []string
		for _, p := range ps {
			s := fmt.Sprint(p["type"])
			for _, k := range []string{"modality", "mime_type", "uri", "content", "name", "response"} {
				if v, ok := p[k]; ok {
					s += fmt.Sprintf(" %s=%v", k, v)
				}
			}
			out = append(out, s)
		}
		return strings.Join(out, "; ")
	}
	want := []string{
		"system: text content=be brief",
		"user: text content=what is this?; uri modality=image mime_type=image/png uri=https://example.com/a.png; blob modality=image mime_type=image/jpeg content=AQID; blob modality=document mime_type=application/pdf content=JVBERg==",
		"assistant: reasoning content=think first; tool_call name=look",
		"tool: tool_call_response response=found",
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages: %s", len(got), in)
	}
	for i, m := range got {
		if g := m.Role + ": " + shape(m.Parts); g != want[i] {
			t.Errorf("message %d: %s\nwant %s", i, g, want[i])
		}
	}
	out := outputMessages(&llm.ChatResult{Content: "a cat", Reasoning: "looked at it", FinishReason: llm.FinishStop})
	var o []struct {
		Role         string           `json:"role"`
		Parts        []map[string]any `json:"parts"`
		FinishReason string           `json:"finish_reason"`
	}
	if err := json.Unmarshal([]byte(out), &o); err != nil || len(o) != 1 || o[0].Role != "assistant" || o[0].FinishReason != "stop" ||
		shape(o[0].Parts) != "reasoning content=looked at it; text content=a cat" {
		t.Fatalf("output messages %s (%v)", out, err)
	}
}
