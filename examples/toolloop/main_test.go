package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestToolLoop: the simulated model calls both tools the prompt names,
// the Go handlers answer, and the second model call ends the loop with a
// text that holds both results.
func TestToolLoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		`assistant calls get_weather({"city":"Oslo"})`,
		`assistant calls convert_temperature({"value":21,"to":"fahrenheit"})`,
		`tool get_weather (call_sim_`,
		`-> {"city":"Oslo","celsius":21,"sky":"clear"}`,
		"-> 69.8\n",
		"assistant: [simulated assistant] received 2 tool result(s): get_weather -> ",
		"2 model calls",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "get_weather(") > strings.Index(got, "convert_temperature(") {
		t.Errorf("calls out of the order they were named in:\n%s", got)
	}
}

// TestToolLoopHandlerError: a handler's error goes back to the model as an
// error result; the loop still ends normally.
func TestToolLoopHandlerError(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"Please", "call", "get_weather", "{}"}); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "get_weather needs a city") || !strings.Contains(got, "received 1 tool result(s)") {
		t.Errorf("output:\n%s", got)
	}
}
