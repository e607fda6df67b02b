package einosession_test

import (
	"context"

	"github.com/cloudwego/eino/adk"
	"github.com/cloudwego/eino/components/model"
	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"

	"github.com/chorusrt/chorus/integrations/einosession"
	"github.com/chorusrt/chorus/session"
	"github.com/chorusrt/chorus/store"
)

// docsEinoSession backs docs/frameworks.md's "Running eino agents
// durably" block (internal/readmecheck finds the block's tokens here): it
// compiles, so the guide's code does; TestChatModelAgentReadAndWrite runs
// the same shape.
func docsEinoSession(ctx context.Context, cm model.ToolCallingChatModel, journal store.Journal, lookupOrder, refundOrder tool.InvokableTool) (*session.Manager, error) {
	rn := einosession.New()
	lookup := rn.Tool(lookupOrder, einosession.Effect(session.EffectRead))
	refund := rn.Tool(refundOrder)
	agent, err := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{
		Name: "support", Description: "helps with orders", Instruction: "Help with orders.", Model: cm,
		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{lookup, refund}}},
	})
	opt, err := rn.Options(agent, session.Options{Journal: journal,
		Policy: map[string]session.ToolPolicy{"refund_order": {Effect: session.EffectNonIdempotentWrite}}})
	m, err := session.New(opt) // then Send, Snapshot, Resolve, Wait as for any session
	return m, err
}

var _ = docsEinoSession
