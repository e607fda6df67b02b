package telemetry

import (
	"bytes"
	"context"
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
