package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestAgentOnTheSimulator: the simulated model calls both tools the prompt
// names, the executor runs them, and the model answers. LangChainGo's
// functions agent replays each call as its own assistant message followed
// by its result, so the simulator's answer lists the last result only.
func TestAgentOnTheSimulator(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"tool get_weather(Oslo)",
		"tool convert_temperature(21)",
		"assistant: [simulated assistant] received 1 tool result(s): convert_temperature -> 69.8.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
