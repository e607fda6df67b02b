// Package einosession runs CloudWeGo eino adk agent trees (a
// ChatModelAgent, sequential and parallel agents, transfers to sub-agents,
// agents as tools) as durable Chorus sessions, as dex-agents-google-adk
// runs Google ADK agents as Dex sessions.
//
//	rn := einosession.New()
//	lookup := rn.Tool(lookupOrder, einosession.Effect(session.EffectRead))
//	refund := rn.Tool(refundOrder)
//	agent, _ := adk.NewChatModelAgent(ctx, &adk.ChatModelAgentConfig{Name: "support", Model: cm,
//		ToolsConfig: adk.ToolsConfig{ToolsNodeConfig: compose.ToolsNodeConfig{Tools: []tool.BaseTool{lookup, refund}}}})
//	opt, err := rn.Options(agent, session.Options{Journal: journal,
//		Policy: map[string]session.ToolPolicy{"refund_order": {Effect: session.EffectNonIdempotentWrite}}})
//	m, err := session.New(opt)
//
// The Runner is the session's ModelStep (session.Options.ModelStep): the
// session id is eino's checkpoint id, and each RunModel step lets the tree
// run until it makes its model call and every tool call of the response
// has paused it. Agents that continue without tools (the next agent of a
// sequence, a transfer's target, the other branches of a parallel agent)
// make their model calls in the same RunModel. Every call of a tool the
// Runner wrapped, reads included, interrupts the run through eino's own
// mechanism (compose.StatefulInterrupt) and becomes a CallTool step of the
// session, with its effect's retry and crash rules, approvals, idempotency
// key and ordered writes; the next RunModel resumes the tree from the
// checkpoint (kept in the journal with the step's output) with the
// recorded results (session.FunctionResponse of each record). Everything
// else is the session's: approvals, outcome_unknown, turn-failure notes,
// CancelTurn, the event stream, and the console, whose timeline names the
// agent that asked for each call.
//
// # Steps
//
//	| Step      | What runs                                                                      |
//	|-----------|--------------------------------------------------------------------------------|
//	| RunModel  | the tree, from its start or its checkpoint, until every tool call paused it    |
//	| CallTool  | one wrapped tool, once per attempt, outside the run; an agent tool runs its     |
//	|           | whole agent there (its inner tools run directly, without steps of their own)    |
//
// # Effects
//
// A tool's effect comes from the session's ToolPolicy for it, then its own
// declaration (Effect when wrapping it; a session.Tool's Effect for
// SessionTool, which is how an MCP tool of mcptools, whose effect comes
// from a trusted server's annotations, joins a tree), then
// session.Options.DefaultEffect (unclassified). RequireApproval makes
// every call wait for approval.
//
// # What fails loudly
//
//   - Two different tools under one name in the tree (Tool, then Options
//     fails): a step finds its tool by name.
//   - A response that calls a control tool (transfer_to_agent, exit)
//     together with other tools: the turn fails before any tool runs
//     (session.ErrStepFailed), since eino applies the control tool before
//     the other results exist.
//   - A tool that asks for a confirmation of its own (an eino interrupt)
//     inside its step: the call ends failed, saying so; use the session's
//     approvals.
//   - An agent tool declared read whose agent calls a tool that is not
//     read: the call ends failed before that tool runs, since a read step
//     may run again and repeat the write.
//   - A run that pauses for anything but a wrapped tool's call.
//
// # Images
//
// A user's images and documents reach the tree as media references (URLs
// of session.MediaScheme) in eino message parts, so that eino's
// checkpoint, kept in the journal, holds no bytes; WithMedia wraps the
// client of the agents' Chorus models (chorus.New) so that each model
// request gets the bytes back from the session's media store.
//
// # Limits
//
//   - Each turn starts a new run of the tree with the session's messages
//     (the user, assistant and tool messages of earlier turns); a steering
//     message sent during a turn reaches the tree at the next turn.
//   - Control tools and tools the Runner did not wrap run inside RunModel,
//     and again when it is retried.
//   - A RunModel retry repeats the model calls of the agents that
//     continued without tools.
//   - The RunModel steps of one Runner run one at a time, across its
//     sessions: eino v0.7.36 agents race when one agent value runs twice
//     at once (a ChatModelAgent compiles its graph lazily, unguarded, on
//     every Run and Resume). Tool steps run in parallel as usual; build a
//     Runner and a tree per group of sessions for more model steps at once.
//   - An eino tool returns text: a tool's images are not shown to the
//     tree's models. Models other than Chorus's with WithMedia see a
//     user's images as references they cannot read.
//
// # How it is tested
//
// Real eino trees on scripted llmtest models, each turn's steps asserted
// from the journal; a turn resumed in a new Manager from the journal's
// checkpoint; and a crash suite (TestCrashSuite) that kills a child
// process running eino sessions with SIGKILL in RunModel (before and with
// the request in flight), in CallTool before and after each effect's side
// effect, and while an approval waits, then checks session's Guarantees.
//
// The module is its own (github.com/chorusrt/chorus/integrations/einosession):
// Chorus never imports eino.
package einosession
