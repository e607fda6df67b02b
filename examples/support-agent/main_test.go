package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestSupportAgent runs main(): the agent looks the order up without
// approval, asks for approval of the refund, which runs once after it, and
// answers both turns.
func TestSupportAgent(t *testing.T) {
	defer goleak.VerifyNone(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	func() {
		defer func() { os.Stdout = stdout }()
		os.Args = []string{"support-agent"}
		main()
	}()
	w.Close()
	got := <-out
	for _, want := range []string{
		"lookup_order (read) started, attempt 1",
		"lookup_order succeeded",
		`approval requested: refund {"order_id":"A-1001","amount_cents":4999} (interrupt approval/2/`,
		"support lead: approved",
		"refund (non_idempotent_write) started, attempt 1",
		"agent: [simulated support] received 1 tool result(s): refund -> ",
		`turn 2 refund {"order_id":"A-1001","amount_cents":4999} (non_idempotent_write): succeeded {"refund_id":"R-A-1001","amount_cents":4999}`,
		"refunds made: 1; 4 model calls",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "support lead: approved") > strings.Index(got, "refund (non_idempotent_write) started") {
		t.Errorf("the refund started before its approval:\n%s", got)
	}
}

// TestRunBadFlag: run reports a flag error instead of exiting.
func TestRunBadFlag(t *testing.T) {
	defer goleak.VerifyNone(t)
	if err := run(context.Background(), io.Discard, []string{"-nope"}); err == nil {
		t.Fatal("bad flag accepted")
	}
}
