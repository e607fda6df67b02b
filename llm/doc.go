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
// Invariants kept by every producer of these types (see DESIGN.md):
//   - FinishReason is one of the five canonical values; provider strings never leak.
//   - Usage has one meaning everywhere: PromptTokens are uncached input only,
//     cache reads and writes have their own fields, CompletionTokens include
//     reasoning tokens.
//   - Event.ToolIndex is the call's position in ChatResult.ToolCalls.
//   - Unknown provider data stays zero: nothing here is guessed.
package llm
