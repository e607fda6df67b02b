// Package llm is the vocabulary every Chorus layer shares: chat requests,
// messages and their parts, tools, streamed events, results, usage, response
// metadata and the typed errors callers match with errors.Is and errors.As.
//
// The vocabulary is OpenAI-shaped; each provider package translates it in both
// directions. The package does no I/O and depends on the standard library only.
//
// The shortest use, with any provider client or the runtime:
//
//	req := &llm.ChatRequest{
//		Model:    "gpt-4.1-mini",
//		Messages: []llm.Message{llm.UserText("Say hello")},
//	}
//	stream, err := client.Stream(ctx, req)
//	if err != nil { return err }
//	for ev, err := range stream.All() {
//		if err != nil { return err }
//		fmt.Print(ev.Text)
//	}
//
// # Invariants
//
// DESIGN.md's invariants, numbered as code comments cite them ("invariant
// 10"); a broken one is a defect. Each item ends with the tests that prove
// it; TestInvariantsDocumented keeps this list and those tests in step.
//
//  1. Finish reasons are stop | length | tool_calls | content_filter | ""; provider strings never leak. Tests: TestInvariant01_FinishReasonsCanonical, TestInvariant01_UnknownFinishReasonIsEmpty
//  2. API keys never appear in an error, a log line, String(), an event or a trace. Tests: TestInvariant02_KeysNeverInErrorsOrEvents, TestInvariant02_KeysNeverPrinted, TestInvariant02_KeysNeverInErrorsEveryOperation
//  3. Streams retry only before the first emitted event; partial output plus error after; a premature close is an error; no goroutine outlives its stream. Tests: TestInvariant03_StreamRetriesOnlyBeforeFirstEvent
//  4. Unknown roles or malformed requests are rejected at the boundary with a typed error. Tests: TestInvariant04_UnknownRoleRejected
//  5. Unknown provider data stays zero: no guessed context windows, prices or limits. Tests: TestInvariant05_UnknownDataStaysZero
//  6. Learn-once state is per endpoint (provider id + base URL, per model where the lesson is), monotonic, shared by all callers and all credentials of that endpoint. Tests: TestInvariant06_LearnOnceSharedMonotonic
//  7. Reasoning round-trips: Anthropic thinking blocks with their signatures in order, Gemini thought signatures per part, OpenAI Responses encrypted reasoning. Tests: TestInvariant07_ReasoningRoundTrips, TestInvariant07_ResponsesEncryptedReasoningRoundTrip
//  8. Event.ToolIndex is the call's position in ChatResult.ToolCalls on every format. Tests: TestInvariant08_ToolIndexIsPosition
//  9. Usage means one thing everywhere: PromptTokens uncached only, cache reads and writes in their own fields, CompletionTokens include reasoning. Tests: TestInvariant09_UsageOneMeaning
//  10. A request timeout is a whole-call budget, retries and queueing included. Tests: TestInvariant10_WholeCallBudget, TestInvariant10_WholeCallBudgetEveryOperation, TestInvariant10_BudgetIncludesQueueing
//  11. A journal write is durable before the step it records starts its side effect. Tests: TestInvariant11_JournalDurableBeforeSideEffect
package llm
