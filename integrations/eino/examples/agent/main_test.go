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
// names, eino runs them, and the answer lists both results.
func TestAgentOnTheSimulator(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"tool get_weather(Oslo)",
		"tool convert_temperature(21, fahrenheit)",
		"assistant: [simulated assistant] received 2 tool result(s): ",
		`{"city":"Oslo","celsius":21,"sky":"clear"}`,
		"69.8",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}
