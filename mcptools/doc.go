// Package mcptools turns the tools of MCP (Model Context Protocol) servers
// into Chorus tools: for pipeline.ToolLoop and for durable sessions
// (session.Options.Tools), where effect classes, crash rules and approvals
// apply to them exactly as to Go tools. It is built on the official Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp); the package is not named
// mcp so that both can be imported together.
//
//	set, err := mcptools.Start(ctx, mcptools.Options{Servers: []mcptools.Server{
//		{Name: "fs", Command: []string{"mcp-server-filesystem", "/srv/data"}, Trusted: true},
//		{Name: "tracker", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer " + token}},
//	}})
//	if err != nil { return err } // *llm.ConfigError, *CollisionError or *StartError
//	defer set.Close(ctx)
//	res, err := pipeline.ToolLoop(ctx, rt, req, set.ToolSet(), pipeline.ToolLoopOptions{})
//	// or: session.New(session.Options{..., Tools: set.SessionTools()})
//
// # Servers
//
// A Server is a command (stdio) or a URL (Streamable HTTP, with optional
// headers for authorization), never both. Start starts every command as a
// child of this process, connects to every URL, lists each server's tools
// (every page) and checks names; any failure stops what it started and
// returns the error. A command server that dies (or a URL session that
// ends) is restarted by the Set, after a backoff that starts at 100ms and
// doubles up to 10s while restarts follow one another quickly. Close stops
// every server (stdin closed, then SIGTERM, then SIGKILL, each after
// Options.StopTimeout) and waits for every child process and goroutine: no
// zombie and no leaked goroutine. On Linux the kernel also SIGKILLs a server
// whose runtime died without closing it (Pdeathsig), so a crashed process
// leaves no orphaned server behind.
//
// Tools are named as the server names them, after the server's Prefix.
// Two servers offering one name is a *CollisionError naming both (at
// Start; on a later list change, the newcomer's tool is dropped and logged).
// A tool whose name no provider accepts (letters, digits, '_' and '-', at
// most 64) is skipped with a warning. When a server announces a list
// change (notifications/tools/list_changed) the Set lists its tools again;
// ToolSet and SessionTools return the tools of the moment, so a session
// created earlier keeps the tools it was given (a call of a tool that went
// away is a *CallError).
//
// # Calls
//
// A call runs with the caller's context and a timeout (Server.Timeout,
// else Options.CallTimeout, else DefaultCallTimeout; in a session the
// tool's timeout applies too). Cancelling the context sends
// notifications/cancelled for the request, so the server can stop the work.
// A call that finds its server restarting waits for it within that budget.
// Each call carries a progress token; progress is logged at debug level.
// A session's idempotent write sends its idempotency key
// (<session>/<turn>/<call>, the same on every attempt) in the call's _meta
// under IdempotencyKeyMeta, for servers that can deduplicate.
//
// Results:
//   - Text content becomes the tool result the model sees (pieces joined
//     by newlines); resource links, embedded resources and audio are
//     described in a line of text; structured content is kept
//     (Result.Structured) and is the text when there is no text content.
//   - Images become image parts: in a tool loop, parts of the tool message;
//     in a session, images of its Result, which the session stores in its
//     media store while the journal keeps references.
//   - A result with isError: true is an error the model sees: an error
//     result in a tool loop, a *session.ToolError in a session (the record
//     ends failed, without a retry: the tool ran and said no).
//   - A JSON-RPC error, a lost server and a timeout are a *CallError: in a
//     session, a failure under the effect's retry rule (a read retries, on
//     the restarted server; a single-attempt write ends outcome_unknown).
//
// # Effects
//
// A session takes a tool's effect from its policy, then the tool's own
// declaration, then Options.DefaultEffect (unclassified unless set). An MCP
// tool's declaration comes from its annotations (EffectFor) when the user
// marked its server Trusted: readOnlyHint is read; idempotentHint without
// readOnlyHint is idempotent_write; anything else declares nothing, so the
// default applies (unclassified: one attempt, approval). A server that is
// not trusted declares nothing for any tool: the MCP specification says
// annotations from untrusted servers are hints only, so they never lower an
// effect below what the policy (or its default) says. server-filesystem's
// write_file (destructive, idempotent) is idempotent_write from a trusted
// server and unclassified, waiting for approval, from an untrusted one.
//
// # Secrets
//
// Header values, environment values and a URL's password and query values
// never appear in an error or a log line: errors that would show one are
// rewritten with "[redacted]" (they still match errors.Is targets such as
// context.Canceled). A server's stderr is logged at debug level, redacted.
//
// # Telemetry
//
// Each tools/call is a CLIENT span `tools/call {tool}` (Options.Telemetry,
// else the global OpenTelemetry providers), the child of the call's
// execute_tool span: the tool loop's (pipeline.ToolLoop) or the session's
// for ToolSet and SessionTools tools, Set.Call's own otherwise. It carries
// the MCP attributes of the semantic conventions v1.41.0, by their Go
// constants (go.opentelemetry.io/otel/semconv/v1.41.0): mcp.method.name
// (tools/call), mcp.session.id (Streamable HTTP; stdio has none),
// mcp.protocol.version, jsonrpc.request.id (read off the request as it is
// written, matched by its progress token), network.transport (pipe for a
// command, tcp for a URL), network.protocol.name, server.address and
// server.port (URL servers), gen_ai.tool.name and gen_ai.operation.name
// execute_tool; on failure error.type, which for a JSON-RPC error is its
// code, as is rpc.response.status_code (tool_error for a result marked
// isError). The session's attributes also go on the execute_tool span.
// The one name typed here, not from the conventions, is Chorus's own
// chorus.mcp.server (the Server.Name the call went to). Header values,
// arguments and results are never recorded (arguments and results only
// with telemetry.WithContent, on Set.Call's execute_tool span).
//
// The trace context is not sent to the server in params._meta: the
// conventions' notes this project follows do not
// ask for it, and a server that does not expect the keys would see them.
//
// # Which file owns what
//
//	| File          | Owns                                                          |
//	|---------------|---------------------------------------------------------------|
//	| server.go     | Server, its validation, secrets and redaction                 |
//	| set.go        | Options, Set: Start, Close, Tools, Call, collisions           |
//	| conn.go       | one server: connect, list, call, supervise (restart, refresh) |
//	| result.go     | Result: MCP content to text, images and structured content    |
//	| tools.go      | EffectFor, ToolSet (pipeline), SessionTools (session)         |
//	| errors.go     | CollisionError, StartError, CallError, ToolResultError        |
//	| proc_*.go     | a child server dies with this process (Linux: Pdeathsig)      |
//	| telemetry.go  | the tools/call span, its attributes, the JSON-RPC request id  |
//
// The tests run the npm reference servers (@modelcontextprotocol/server-everything,
// server-filesystem), pinned and installed by `make mcp-servers` into
// .cache/npm; without that folder they fail under CI=true and skip
// otherwise.
//
// Guide: docs/mcp.md in the repository, which starts from the task and ends
// with how it is tested; this comment stays the reference.
package mcptools
