package runtime

import (
	"strings"
	"testing"
	"time"

	"github.com/chorusrt/chorus/llm"
	"github.com/chorusrt/chorus/llmtest"
	"github.com/chorusrt/chorus/telemetry"
)

// TestTelemetryLearnedFallback: a call whose first attempt is refused for
// a parameter learns to leave it out, and its inference span says so
// (chorus.learned, then chorus.learned.applied on the retry); the next
// call's span has the applied event only.
func TestTelemetryLearnedFallback(t *testing.T) {
	srv := llmtest.NewServer()
	defer srv.Close()
	rig := newTelRig(t)
	rt := newRT(t, WithProvider(openaiCfg(srv, key)), WithTelemetry(rig.tel))
	srv.Push(llmtest.Step{Fault: &llmtest.Fault{Kind: llmtest.FaultStatus, Status: 400, Message: "Unsupported parameter: 'temperature' is not supported with this model."}})
	for i := range 2 {
		r := req("openai/m")
		r.Temperature = llm.Ptr(0.3)
		s, err := rt.Stream(ctxT(t, 5*time.Second), r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Result(); err != nil {
			t.Fatal(err)
		}
		spans := rig.ended()
		if len(spans) != i+1 {
			t.Fatalf("%d spans", len(spans))
		}
		var got []string
		for _, ev := range spans[i].Events() {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), key) {
					t.Errorf("event %s holds the key", ev.Name)
				}
			}
			if ev.Name == telemetry.EventLearnedFlag || ev.Name == telemetry.EventLearnedUsed {
				for _, kv := range ev.Attributes {
					if kv.Key == telemetry.AttrLearned {
						got = append(got, ev.Name+"="+kv.Value.AsString())
					}
				}
			}
		}
		want := "[chorus.learned=no_temperature chorus.learned.applied=no_temperature]"
		if i == 1 {
			want = "[chorus.learned.applied=no_temperature]"
		}
		if s := fmtList(got); s != want {
			t.Errorf("call %d: inference span events %s, want %s", i+1, s, want)
		}
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}
