// Package runtime is what Chorus users import first: it boots the actor
// system, spawns one credential actor per provider key, and serves chat,
// streaming and the other operations through those actors.
//
//	rt, err := runtime.New(runtime.FromEnv())
//	if err != nil { return err }
//	defer rt.Close(context.Background())
//	s, err := rt.Stream(ctx, &llm.ChatRequest{
//		Model:    "openai/gpt-4.1-mini", // provider/model, or an alias
//		Messages: []llm.Message{llm.UserText("hello")},
//	})
//
// How a call runs: the runtime resolves the model (provider/model or an
// alias with its ordered fallbacks; a routed alias, WithRoutedAlias, orders
// them for the call by its strategy: routing.go), picks the credential of that provider
// that is least busy and not cooling down, and asks its actor for admission.
// The actor paces admissions from the limits the provider reported in its
// response headers, so that once they are known no request is sent that the
// provider would refuse; a full admission queue is an immediate
// llm.ErrOverloaded, never a blocked caller. Once admitted, the call runs on
// the caller's own goroutine with the credential's providers.Client, and
// streamed events go from the goroutine reading the HTTP body straight into
// the caller's channel: the actor never sees a delta. The call then reports
// once to the actor (status, usage, rate-limit headers).
//
// A 429 or 529 puts only that credential in cooldown until the provider's
// retry-after; the call moves to another credential of the provider, or
// waits for the earliest one to come back when its budget allows. A
// retryable failure before the first event, or every credential cooling
// down past the caller's budget, moves the call to the next model of the
// alias. After the first event nothing is retried: the partial result comes
// back in a *llm.StreamError.
//
// Decisions:
//   - Retries of 5xx, transport failures and learn-once fallbacks stay in the
//     credential's providers.Client ladder; 429/529 are left to the runtime
//     (providers.RetryPolicy.NoRateLimitRetry), so that pacing and rotation
//     happen in one place.
//   - A request's token cost is estimated before admission as a quarter of
//     its text bytes plus MaxTokens (256 when unset), the way providers count
//     max_tokens against a tokens-per-minute budget; the headers of the
//     response correct the budget.
//   - Before a credential has seen its first response it admits at most four
//     requests at once, so a cold start cannot overrun limits it has not
//     read yet.
//   - Learn-once state (a parameter or stream_options the provider refused,
//     a model served only by the Responses API) belongs to the endpoint,
//     the provider id and base URL (invariant 6): the runtime keeps one
//     providers.Learned per endpoint and gives it to every credential's
//     client, so what one key's call learned, the next call on any key of
//     the endpoint uses. A providers.WithLearned passed through
//     WithClientOptions overrides it (every credential then shares that
//     one). Stats show each credential its endpoint's flags.
//   - Telemetry (telemetry.go, package telemetry): one OpenTelemetry CLIENT
//     span per call, named {operation} {model} and attributed by the GenAI
//     conventions, spans every placement of the call: the admission wait,
//     the credential's fingerprint, each attempt as an event (status,
//     error class, wait before the next), a cooldown the call caused, the
//     alias and the fallback step that served. Per-call attempts reach the
//     span through providers.WithAttemptHook, so credentials' observers
//     stay as they are. With no SDK installed (WithTelemetry unset and no
//     global provider) the call costs one non-recording span and nothing
//     per delta.
//   - One process, one Proto.Actor system: the credential actors of every
//     runtime, and the session actors of every session.Manager, run in the
//     process's shared system, created on first use; its log lines go to
//     the loggers of the runtimes and managers that use it (WithLogger).
//     Close stops the runtime's own actors and leaves the system. Inside a
//     cluster node the runtime uses the node's system instead (see
//     package cluster).
//   - Model names (names.go): provider/model, an alias, or bare. A bare
//     name is served by the first WithModelPattern it matches, or on the
//     default provider a caller names (Resolve: the gateway names the
//     provider whose API the client speaks, chorus batch "openai"); the
//     runtime never guesses a provider from how a model is spelled. A name
//     with a slash whose provider is not registered is not taken for a
//     bare one: a mistyped provider id fails instead of reaching another.
//   - Fields a format cannot honour (support.go): before admission each
//     target says what its format makes of the request's optional fields
//     (providers.Client.Support). A target that would have to refuse one
//     is skipped, and with none left the call fails with an
//     *llm.UnsupportedFieldError before anything is sent or any budget is
//     spent; under llm.DropUnsupported every target serves without them.
//     What a target left out is in Meta.Dropped and CallReport.Dropped. A
//     request that sets no optional field pays one check.
//
// Guide: docs/runtime.md (keys, limits, aliases) and docs/pacing.md (how
// rate limits are learnt and kept) in the repository, which starts from the
// task and ends with how it is tested; this comment stays the reference.
package runtime
