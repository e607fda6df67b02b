package cluster

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

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

// roundTripBatch packs evs into a DeltaBatch, sends it through protobuf's
// encoding and unpacks it.
func roundTripBatch(t *testing.T, evs []llm.Event) []llm.Event {
	t.Helper()
	var b clusterpb.DeltaBatch
	toDeltas(evs, &b)
	raw, err := proto.Marshal(&b)
	if err != nil {
		t.Fatal(err)
	}
	var got clusterpb.DeltaBatch
	if err := proto.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	var out []llm.Event
	all, err := fromDeltas(&got, func(ev llm.Event) bool { out = append(out, ev); return true })
	if err != nil || !all {
		t.Fatalf("fromDeltas: all %v, err %v", all, err)
	}
	return out
}

// A batch of events crosses a node packed column-wise and comes back
// equal, every field of every event type.
func TestDeltaBatchRoundTrip(t *testing.T) {
	evs := []llm.Event{
		{Type: llm.EventText, Text: "héllo"},
		{Type: llm.EventText, Text: ""},
		{Type: llm.EventReasoning, Signature: "thinking-sig"},
		{Type: llm.EventToolCallStart, ToolIndex: 2, ToolCallID: "call_1", ToolName: "lookup", Signature: "sig"},
		{Type: llm.EventToolCallDelta, ToolIndex: 2, Text: `{"a":`},
		{Type: llm.EventToolCallDelta, ToolIndex: 2, Text: ""},
		{Type: llm.EventToolCallStart, ToolIndex: 0, ToolCallID: "call_0", ToolName: "first"},
		{Type: llm.EventText, Text: "日本語 and \x00 bytes"},
		{Type: llm.EventUsage, Usage: &llm.Usage{PromptTokens: 10, CompletionTokens: 5, CacheReadTokens: 3, CacheWriteTokens: 1, ReasoningTokens: 2}},
		{Type: llm.EventFinish, Finish: llm.FinishToolCalls},
	}
	if got := roundTripBatch(t, evs); !reflect.DeepEqual(got, evs) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, evs)
	}
	// Each event alone: a batch of one.
	for _, ev := range evs {
		if got := roundTripBatch(t, []llm.Event{ev}); !reflect.DeepEqual(got, []llm.Event{ev}) {
			t.Errorf("batch of one: got %+v, want %+v", got, ev)
		}
	}
	// Text-only events carry no tool indexes and no extras.
	var b clusterpb.DeltaBatch
	toDeltas([]llm.Event{{Type: llm.EventText, Text: "a"}, {Type: llm.EventText, Text: "bc"}}, &b)
	if len(b.ToolIndexes) != 0 || len(b.Extras) != 0 || string(b.Texts) != "abc" || !reflect.DeepEqual(b.TextLens, []uint32{1, 2}) {
		t.Errorf("text-only batch: %+v", &b)
	}
	// A batch of session items only has no event columns.
	if got := roundTripBatch(t, nil); len(got) != 0 {
		t.Errorf("empty batch: got %+v", got)
	}
}

// Property: any sequence of events, of any fields, round-trips, and a
// yield that stops stops the batch there.
func TestDeltaBatchRoundTripProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 26))
	words := []string{"", "a", "héllo", "{\"q\":", "日本", strings.Repeat("x", 300)}
	pick := func() string { return words[rng.IntN(len(words))] }
	for round := range 300 {
		evs := make([]llm.Event, 1+rng.IntN(maxBatch))
		for i := range evs {
			ev := llm.Event{Type: llm.EventType(1 + rng.IntN(8)), Text: pick()}
			if rng.IntN(3) == 0 {
				ev.ToolIndex = rng.IntN(4)
			}
			if rng.IntN(4) == 0 {
				ev.ToolCallID, ev.ToolName, ev.Signature = pick(), pick(), pick()
			}
			if rng.IntN(8) == 0 {
				ev.Usage = &llm.Usage{PromptTokens: rng.IntN(1000), CompletionTokens: rng.IntN(1000), ReasoningTokens: rng.IntN(10)}
			}
			if rng.IntN(8) == 0 {
				ev.Finish = []llm.FinishReason{llm.FinishStop, llm.FinishLength, llm.FinishToolCalls, ""}[rng.IntN(4)]
			}
			evs[i] = ev
		}
		if got := roundTripBatch(t, evs); !reflect.DeepEqual(got, evs) {
			t.Fatalf("round %d: got %+v\nwant %+v", round, got, evs)
		}
		var b clusterpb.DeltaBatch
		toDeltas(evs, &b)
		stop := rng.IntN(len(evs))
		var took []llm.Event
		all, err := fromDeltas(&b, func(ev llm.Event) bool { took = append(took, ev); return len(took) <= stop })
		if err != nil || (all != (stop == len(evs))) || !reflect.DeepEqual(took, evs[:min(stop+1, len(evs))]) {
			t.Fatalf("round %d: stop after %d: all %v, err %v, took %d", round, stop+1, all, err, len(took))
		}
	}
}

// A batch whose columns disagree is a *ProtocolError before any event.
func TestDeltaBatchMalformed(t *testing.T) {
	good := func() *clusterpb.DeltaBatch {
		var b clusterpb.DeltaBatch
		toDeltas([]llm.Event{
			{Type: llm.EventText, Text: "ab"},
			{Type: llm.EventToolCallStart, ToolIndex: 1, ToolCallID: "c", ToolName: "n"},
			{Type: llm.EventFinish, Finish: llm.FinishStop},
		}, &b)
		return &b
	}
	cases := map[string]func(b *clusterpb.DeltaBatch){
		"short text lengths": func(b *clusterpb.DeltaBatch) { b.TextLens = b.TextLens[:2] },
		"texts too long":     func(b *clusterpb.DeltaBatch) { b.Texts = append(b.Texts, 'x') },
		"texts too short":    func(b *clusterpb.DeltaBatch) { b.Texts = b.Texts[:1] },
		"huge text length":   func(b *clusterpb.DeltaBatch) { b.TextLens[0] = 1<<32 - 1 },
		"tool indexes":       func(b *clusterpb.DeltaBatch) { b.ToolIndexes = b.ToolIndexes[:1] },
		"extra out of range": func(b *clusterpb.DeltaBatch) { b.Extras[1].At = 3 },
		"extras out of order": func(b *clusterpb.DeltaBatch) {
			b.Extras[0], b.Extras[1] = b.Extras[1], b.Extras[0]
		},
		"extras twice at one": func(b *clusterpb.DeltaBatch) { b.Extras[1].At = b.Extras[0].At },
		"nil extra":           func(b *clusterpb.DeltaBatch) { b.Extras[0] = nil },
	}
	for name, spoil := range cases {
		b := good()
		spoil(b)
		n := 0
		_, err := fromDeltas(b, func(llm.Event) bool { n++; return true })
		var pe *ProtocolError
		if !errors.As(err, &pe) || n != 0 {
			t.Errorf("%s: err %v, %d events, want a *ProtocolError and none", name, err, n)
		}
	}
	if _, err := fromDeltas(good(), func(llm.Event) bool { return true }); err != nil {
		t.Errorf("good batch: %v", err)
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

// A time crosses between nodes as a duration when the sender sends one:
// the receiver's clock, however far off, reads it right; a sender that
// sends only the Unix time is read on the receiver's clock.
func TestWireTimesAreDurations(t *testing.T) {
	ahead := &Node{cfg: Config{clock: func() time.Time { return time.Now().Add(time.Hour) }}}
	at := time.Now().Add(2 * time.Second)
	got := ahead.fromWireTime(unixNano(at), until(at))
	if d := got.Sub(at); d < -50*time.Millisecond || d > 50*time.Millisecond {
		t.Fatalf("a duration read on a clock an hour ahead is %v off", d)
	}
	got = ahead.fromWireTime(unixNano(at), nil)
	if d := at.Sub(got); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("a Unix time read on a clock an hour ahead is %v off, want about an hour", d)
	}
	if age := negate(until(time.Now().Add(-3 * time.Second))); *age < int64(3*time.Second) {
		t.Fatalf("the age of a reading 3 s old is %v", time.Duration(*age))
	}
}
