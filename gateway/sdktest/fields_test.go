package sdktest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/chorusrt/chorus/llm"
	chorusanthropic "github.com/chorusrt/chorus/providers/anthropic"
	chorusgemini "github.com/chorusrt/chorus/providers/gemini"
	chorusopenai "github.com/chorusrt/chorus/providers/openai"
)

// jsonNames are the JSON names of a params struct's fields, as the SDK
// sends them.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "" {
			tag = f.Tag.Get("api") // anthropic-sdk-go and openai-go name some fields here
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" || name == "-" {
			continue
		}
		out = append(out, name)
	}
	return out
}

// classified fails for each SDK field the gateway's table does not name.
func classified(t *testing.T, sdk string, names []string, table []llm.WireField, prefix string) {
	t.Helper()
	if len(names) < 5 {
		t.Fatalf("%s: read only %d fields (%v): the SDK's struct tags changed", sdk, len(names), names)
	}
	for _, n := range names {
		if !slices.ContainsFunc(table, func(f llm.WireField) bool { return f.Name == prefix+n }) {
			t.Errorf("%s field %q has no classification in the gateway's table", sdk, prefix+n)
		}
	}
}

// TestFieldTablesCoverTheSDKs: every request parameter of the pinned
// official SDKs is mapped, served, passed through or refused by name in
// the gateway's tables (the tables are what docs/gateway-fields.md lists);
// a new SDK field fails here until it is classified.
func TestFieldTablesCoverTheSDKs(t *testing.T) {
	classified(t, "openai-go ChatCompletionNewParams", jsonNames(reflect.TypeFor[openai.ChatCompletionNewParams]()), chorusopenai.ChatFields, "")
	classified(t, "openai-go ResponseNewParams", jsonNames(reflect.TypeFor[responses.ResponseNewParams]()), chorusopenai.ResponsesFields, "")
	classified(t, "openai-go EmbeddingNewParams", jsonNames(reflect.TypeFor[openai.EmbeddingNewParams]()), chorusopenai.EmbedFields, "")
	classified(t, "anthropic-sdk-go MessageNewParams", jsonNames(reflect.TypeFor[anthropic.MessageNewParams]()), chorusanthropic.MessagesFields, "")
	classified(t, "genai GenerationConfig", jsonNames(reflect.TypeFor[genai.GenerationConfig]()), chorusgemini.GenerateFields, "generationConfig.")
	// GenerateContentConfig is the SDK's flattening of the request: its
	// generationConfig members are checked above, the rest are top-level
	// fields, or the SDK's own (never sent as such).
	gc := jsonNames(reflect.TypeFor[genai.GenerationConfig]())
	sdkOnly := []string{"httpOptions", "shouldReturnHttpResponse", "automaticFunctionCalling", "responseJsonSchema"}
	var top []string
	for _, n := range jsonNames(reflect.TypeFor[genai.GenerateContentConfig]()) {
		if !slices.Contains(gc, n) && !slices.Contains(sdkOnly, n) {
			top = append(top, n)
		}
	}
	classified(t, "genai GenerateContentConfig", top, chorusgemini.GenerateFields, "")
}
