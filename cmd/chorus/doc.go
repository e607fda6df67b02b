// Command chorus runs batches, fans prompts out to several models, lists
// models and serves the built-in simulator, all through the Chorus runtime
// (credential actors, pacing from learned limits, retries).
//
//	chorus batch -i IN.jsonl -o OUT.jsonl [-c N] [--model M] [--resume] [--native | --cancel]
//	chorus chat [-m provider/model]... PROMPT
//	chorus models [provider]
//	chorus sim [--addr 127.0.0.1:8088] [--rpm N] [--tpm N] [--latency D] [--tokens-per-second N]
//
// Every command registers the simulator (package sim) as provider "sim",
// every credential of the environment (providers.FromEnv) and the
// providers of --config chorus.yaml. The README's "The chorus command"
// section is the full reference.
//
// Decisions:
//   - Default models. A chat or batch line that names no model uses
//     defaults.chat / defaults.embed from chorus.yaml when set; else, when
//     no provider key is found (environment or a key_env of chorus.yaml),
//     sim/echo and sim/embed; else the default of the first provider with
//     a key that has one (defaultModels: openai, anthropic, gemini,
//     deepseek). chat without -m asks the default of every provider with a
//     key. The choice is printed on stderr.
//   - The job engine is package batch (the CLI is a shell over it);
//     --cluster fills its Runner with the cluster node. --native takes the
//     first environment key of openai, anthropic and gemini; the summary
//     gains native, cost and saved columns with prices: or --native only,
//     so its default shape does not change.
//   - Batch output is append-only: each line is built whole in memory and
//     written with one write on an O_APPEND file by a single writer, so a
//     killed run leaves whole lines (at worst an unterminated last one,
//     which --resume cuts). --resume skips the custom_ids already written;
//     a failed item is written as an error line and not retried by
//     --resume. A call cut short by an interrupt is not written, so the
//     next --resume runs it. Without --resume, a non-empty output is
//     refused unless --overwrite is given.
//   - A bad input line is reported on stderr with its line number and the
//     JSON path at fault; when it has a custom_id, an error line is written
//     under it too. Unknown request fields are refused rather than silently
//     dropped, except user, metadata, store, service_tier, stream and
//     stream_options, which change nothing in a batch answer.
//   - Output ids are derived from the custom_id ("batch_req_" + FNV-64),
//     so a rerun writes the same ids. The body's model is
//     "provider/model" as the provider named it.
//   - Telemetry (otel.go): the only place the OpenTelemetry SDK and its
//     OTLP exporters are linked. Every command installs them as the global
//     providers when the standard OTEL_* variables ask for an export (an
//     OTLP endpoint, or OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER=otlp),
//     read through the command's environment, and flushes them on exit;
//     the library packages emit through the globals. No flag of its own.
//   - Exit status: 0 success, 1 an item failed or a line was bad, 2 usage
//     or setup error (naming the flag, variable or file:line), 130
//     interrupted.
package main
