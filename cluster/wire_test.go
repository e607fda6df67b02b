package cluster

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/actors"
	"github.com/chorusrt/chorus/cluster/clusterpb"
	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// Nothing in this package sends an actor message except through wire.go's
// helpers, which take proto.Message: a plain struct sent to another node
// does not compile.
func TestOnlyProtoCrossesNodes(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	sends := map[string]bool{"Send": true, "Request": true, "RequestWithCustomSender": true, "RequestFuture": true, "Respond": true, "Forward": true, "RequestFutureWithSender": true}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || f == "wire.go" {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		file, err := parser.ParseFile(fset, f, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			// The senders are an actor system's Root, and actor contexts,
			// which this package always names c or ctx.
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sends[sel.Sel.Name] && actorish(sel.X) {
				t.Errorf("%s: %s sends an actor message directly; use the proto-typed helpers of wire.go", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 4 {
		t.Fatalf("checked %d files, expected the package's sources", checked)
	}
}

func actorish(x ast.Expr) bool {
	switch x := x.(type) {
	case *ast.Ident:
		return x.Name == "c" || x.Name == "ctx" || x.Name == "Root"
	case *ast.SelectorExpr:
		return x.Sel.Name == "Root"
	case *ast.CallExpr:
		return true // e.g. c.ActorSystem().Root...
	}
	return false
}

func TestDeltaRoundTrip(t *testing.T) {
	evs := []llm.Event{
		{Type: llm.EventText, Text: "héllo"},
		{Type: llm.EventToolCallStart, ToolIndex: 2, ToolCallID: "call_1", ToolName: "lookup", Signature: "sig"},
		{Type: llm.EventToolCallDelta, ToolIndex: 2, Text: `{"a":`},
		{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 5, CacheReadTokens: 3, CacheWriteTokens: 1, ReasoningTokens: 2}},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
	}
	for _, ev := range evs {
		var d clusterpb.Delta
		toDelta(&ev, &d)
		if got := fromDelta(&d); !reflect.DeepEqual(got, ev) {
			t.Errorf("round trip: got %+v, want %+v", got, ev)
		}
	}
}

// Errors keep their type and fields across a node.
func TestErrorsCrossTyped(t *testing.T) {
	partial := &llm.ChatResult{Content: "par", FinishReason: ""}
	cases := []struct {
		name  string
		err   error
		check func(error) bool
	}{
		{"config", &llm.ConfigError{Field: "messages[0].role", Msg: "bad"}, func(e error) bool {
			var ce *llm.ConfigError
			return errors.As(e, &ce) && ce.Field == "messages[0].role"
		}},
		{"api", &llm.APIError{Provider: "openai", Status: 500, Message: "boom", Retryable: true}, func(e error) bool {
			var ae *llm.APIError
			return errors.As(e, &ae) && ae.Status == 500 && ae.Retryable
		}},
		{"rate limit", &llm.RateLimitError{APIError: llm.APIError{Provider: "openai", Status: 429, RetryAfter: 2 * time.Second}, Attempts: 1}, func(e error) bool {
			var rl *llm.RateLimitError
			return errors.Is(e, llm.ErrRateLimited) && errors.As(e, &rl) && rl.RetryAfter == 2*time.Second
		}},
		{"stream", &llm.StreamError{Partial: partial, Err: llm.ErrPrematureClose}, func(e error) bool {
			var se *llm.StreamError
			return errors.As(e, &se) && se.Partial != nil && se.Partial.Content == "par" && errors.Is(e, llm.ErrPrematureClose)
		}},
		{"transport", &llm.TransportError{Provider: "x", Err: errors.New("reset")}, func(e error) bool {
			var te *llm.TransportError
			return errors.As(e, &te) && strings.Contains(te.Error(), "reset")
		}},
		{"refused overloaded", &actors.RefusedError{Provider: "p", Err: llm.ErrOverloaded}, func(e error) bool {
			return errors.Is(e, llm.ErrOverloaded)
		}},
		{"cooling down", &actors.RefusedError{Provider: "p", Err: actors.CoolingDown()}, func(e error) bool { return actors.ErrCoolingDown(e) }},
		{"canceled", context.Canceled, func(e error) bool { return errors.Is(e, context.Canceled) }},
		{"node lost", ErrNodeLost, func(e error) bool { return errors.Is(e, ErrNodeLost) }},
		{"unknown session", session.ErrUnknownSession, func(e error) bool { return errors.Is(e, session.ErrUnknownSession) }},
		{"lease lost", store.ErrLeaseLost, func(e error) bool { return errors.Is(e, store.ErrLeaseLost) }},
		{"resolve", &session.ResolveError{Session: "s", Interrupt: "i", Err: session.ErrAlreadyResolved, Approved: true}, func(e error) bool {
			var re *session.ResolveError
			return errors.Is(e, session.ErrAlreadyResolved) && errors.As(e, &re) && re.Approved && re.Interrupt == "i"
		}},
		{"other", errors.New("something"), func(e error) bool { return e.Error() == "something" }},
	}
	for _, c := range cases {
		got := fromFailure(toFailure(c.err))
		if got == nil || !c.check(got) {
			t.Errorf("%s: %v crossed as %T %v", c.name, c.err, got, got)
		}
	}
	if fromFailure(toFailure(nil)) != nil {
		t.Error("nil error crossed as non-nil")
	}
}

// Single-machine programs never link gRPC: none of the packages they
// import depends on Proto.Actor's remote or cluster, only this one does.
func TestSingleMachineDoesNotLinkGRPC(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("no go command on PATH (CI is set: this check must run)")
		}
		t.Skip("no go command on PATH")
	}
	pkgs := []string{"runtime", "pipeline", "pipeline/rx", "session", "store", "providers", "actors", "llm", "llmtest"}
	args := []string{"list", "-deps"}
	for _, p := range pkgs {
		args = append(args, "github.com/chorusrt/chorus/"+p)
	}
	out, err := exec.Command(goBin, args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "google.golang.org/grpc") || strings.Contains(dep, "protoactor-go/remote") || strings.Contains(dep, "protoactor-go/cluster") {
			t.Errorf("a single-machine package links %s", dep)
		}
	}
	self, err := exec.Command(goBin, "list", "-deps", "github.com/chorusrt/chorus/cluster").Output()
	if err != nil || !strings.Contains(string(self), "google.golang.org/grpc") {
		t.Fatalf("the check proves nothing: cluster itself does not list gRPC (%v)", err)
	}
}

// Bad configurations are refused before anything starts, with a
// *llm.ConfigError naming the field.
func TestJoinRefusesBadConfig(t *testing.T) {
	cases := []struct {
		cfg   Config
		field string
	}{
		{Config{Bind: "127.0.0.1:7100"}, "cluster.Name"},
		{Config{Name: "c", Bind: "nohost"}, "cluster.Bind"},
		{Config{Name: "c", Bind: ":7100"}, "cluster.Bind"},
		{Config{Name: "c", Bind: "127.0.0.1:0"}, "cluster.Bind"},
		{Config{Name: "c", Bind: "127.0.0.1:7100", Peers: []string{"127.0.0.1:x"}}, "cluster.Peers[0]"},
		{Config{Name: "c", Bind: "127.0.0.1:7100", Client: true}, "cluster.Peers"},
		{Config{Name: "c", Bind: "127.0.0.1:7100", Peers: []string{"127.0.0.1:7102"}, Client: true, Sessions: &session.Options{}}, "cluster.Sessions"},
		{Config{Name: "c", Bind: "127.0.0.1:7100", MembershipOffset: -1}, "cluster.MembershipOffset"},
	}
	for _, c := range cases {
		n, err := Join(context.Background(), c.cfg)
		var ce *llm.ConfigError
		if n != nil || !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%+v: %v (%T), want a ConfigError on %s", c.cfg, err, err, c.field)
		}
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := Join(done, Config{Name: "c", Bind: "127.0.0.1:7100"}); n != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("Join with a done context: %v", err)
	}
}
