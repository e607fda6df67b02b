package eino_test

import (
	"context"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"

	chorus "github.com/chorusrt/chorus/integrations/eino"
	"github.com/chorusrt/chorus/runtime"
)

// docsEino backs docs/frameworks.md's eino block (internal/readmecheck
// finds the block's tokens here): it compiles, so the guide's code does.
func docsEino(ctx context.Context, rt *runtime.Runtime, tools []tool.BaseTool) (*schema.Message, error) {
	cm, err := chorus.New(rt, chorus.Config{Model: "smart"})
	agent, err := react.NewAgent(ctx, &react.AgentConfig{
		ToolCallingModel: cm,
		ToolsConfig:      compose.ToolsNodeConfig{Tools: tools},
	})
	out, err := agent.Generate(ctx, []*schema.Message{schema.UserMessage("What's the weather in Oslo?")})
	return out, err
}

var _ = docsEino
