package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestFanout(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-m", "sim/echo,sim/prose,sim/third", "What", "is", "a", "fan-out?"}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"sim/echo     first token after",
		"== sim/echo ==\n[simulated] What is a fan-out?\n-- stop",
		"== sim/prose ==\n[simulated prose] You wrote 4 word(s)",
		"== sim/third ==\n[simulated third] ",
		"all 3 models done",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "error") || strings.Contains(got, "!") {
		t.Errorf("a model failed:\n%s", got)
	}
}

// TestFanoutOneModelFails: a model that cannot answer is reported; the
// others still answer.
func TestFanoutOneModelFails(t *testing.T) {
	defer goleak.VerifyNone(t)
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-m", "sim/echo,nowhere/model", "hi"}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "== sim/echo ==\n[simulated] hi") || !strings.Contains(got, "== nowhere/model ==\nerror: ") ||
		!strings.Contains(got, `provider "nowhere" is not registered`) {
		t.Errorf("output:\n%s", got)
	}
}
