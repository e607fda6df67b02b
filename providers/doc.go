// Package providers is Chorus's provider layer: the registry of providers
// and their quirks, the transport, the retry ladder, learn-once fallbacks,
// rate-limit header parsing and a plain Client per credential that chats,
// buffered or streaming, over the three wire formats (OpenAI Chat
// Completions, Anthropic Messages, Gemini generateContent).
//
// It is usable on its own, without actors:
//
//	cfg, _ := providers.Builtin("openai")
//	cfg.APIKey = providers.Secret(os.Getenv("OPENAI_API_KEY"))
//	client, err := providers.New(cfg)
//	if err != nil { return err }
//	stream, err := client.Stream(ctx, &llm.ChatRequest{
//		Model:    "gpt-4.1-mini",
//		Messages: []llm.Message{llm.UserText("Write a haiku about Go.")},
//	})
//	if err != nil { return err }
//	for ev, err := range stream.All() {
//		if err != nil { return err }
//		fmt.Print(ev.Text)
//	}
//
// All wire knowledge lives under this package: the codecs in
// providers/openai, providers/anthropic and providers/gemini, the SSE reader
// in providers/internal/sse. Layers above see only package llm.
//
// Besides chat, a Client embeds (Embed), speaks (Speak), transcribes
// (Transcribe), counts tokens (CountTokens) and lists models (ListModels)
// on every format that offers the operation (see ops.go); the others answer
// *llm.UnsupportedError at once, never an estimate.
//
// Chat requests of an OpenAI-format credential go to the Responses API
// (/responses) for models marked Config.Models[m].Responses, or once the
// provider has answered that the model is only served there (learned per
// model, shared through Learned); never by model name. Responses calls are
// stateless (store:false) and replay encrypted reasoning from the previous
// result's ThinkingBlocks.
//
// Decisions worth knowing:
//   - The request timeout (WithTimeout) is one budget for the whole call:
//     every attempt, every backoff and, for a stream, the stream itself. A
//     retry-after hint that does not fit the remaining budget ends the call
//     with the provider's error at once instead of sleeping to the deadline.
//   - Streams retry only before their first event; afterwards a failure
//     returns the partial result in a *llm.StreamError.
//   - A stream that ends without the format's completion signal is
//     llm.ErrPrematureClose; one that sends nothing, keepalives included,
//     for the idle timeout is llm.ErrIdleTimeout.
//   - Goroutines per open stream: Stream decodes on a goroutine of its own,
//     because a receive from Events cannot run the decoder; with net/http's
//     HTTP/1.1 transport (a read and a write goroutine per connection) an
//     open stream is four goroutines, the caller's included. StreamTo
//     decodes on the caller's goroutine: three, as a loop of the caller's
//     own over the body. All and Result could in principle decode on the
//     caller's goroutine too, but Stream sends the request at once, before
//     the caller picks a face (so that streams opened one after another
//     wait for their first bytes together), and the attempt, its retries
//     before the first event and its end would then have to hand over
//     between goroutines mid-call; that is not done.
//   - Memory per open stream is what waits on the network: the SSE reader
//     keeps 512 bytes of its own and takes its 4 KiB read buffer from a pool
//     only while bytes are at hand (providers/internal/sse); the stream's
//     context is the call's budget, not one more; the request Stream builds
//     to reject a bad one is the one the first attempt sends. The event
//     channel (WithStreamBuffer events of llm.Event) is the largest part
//     left: it is what lets the decoder run ahead of a consumer that is
//     briefly busy.
//   - Learn-once state (Learned) is per endpoint (provider id and base URL;
//     per model where the lesson is), monotonic and shared by every caller
//     and every credential of the endpoint that is given it; a rejection
//     teaches a flag only when the request really carried the rejected
//     parameter.
//   - Media MIME types are sent lower-cased and trimmed on every format
//     (data URLs, media_type, mimeType), whatever case the Part gave.
//   - A refusal is content_filter: an answer carrying refusal text
//     (ChatResult.Refusal) that ends normally finishes content_filter, as
//     do Anthropic's refusal stop reason and Gemini's safety family.
//   - Keys are Secrets: no String, error, log line or event shows them, and
//     provider messages that echo a key are redacted.
//
// Which file owns what:
//
//	registry.go   Config, Format, Secret, the built-in providers, FromEnv
//	client.go     Client, New, the buffered Chat
//	options.go    Option, the With... options and their defaults
//	transport.go  the pooled HTTP client, send (one HTTP request), body caps
//	errors.go     typing errors: status answers, codec and read errors, key redaction
//	retry.go      RetryPolicy, the retry ladder, what is retryable
//	learn.go      learn-once state (Learned) and learning from rejections
//	routing.go    which codec serves a chat (Chat Completions or Responses)
//	stream.go     Stream, StreamTo, the stream ladder, SSE pumps, idle watchdog
//	ops.go        Embed, Speak, Transcribe, CountTokens
//	models.go     ListModels and its cache
//	meta.go       response metadata and rate-limit headers
//	observe.go    attempt and learn observers
package providers
