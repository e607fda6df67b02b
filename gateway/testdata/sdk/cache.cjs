// Asks the gateway each question twice with the official openai and
// @anthropic-ai/sdk npm packages: the second answer comes from the
// gateway's response cache. Each call prints one JSON line {case, cache,
// ...what the SDK made of the answer}; the Go test (cache_sdk_test.go)
// checks that both calls of a case agree and that the second was a hit.
// Usage: node cache.cjs BASE_URL KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));
const Anthropic = require(path.join(process.env.SDK_DIR, "node_modules", "@anthropic-ai", "sdk"));

const [baseURL, key] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: baseURL + "/v1", apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL, apiKey: key, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");

const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];

async function openaiBuffered(n) {
  const { data: c, response } = await openai.chat.completions
    .create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "weather in Paris?" }], tools })
    .withResponse();
  const m = c.choices[0].message;
  out({
    case: "openai-buffered-" + n, cache: response.headers.get("x-chorus-cache"),
    text: m.content, tools: (m.tool_calls || []).map((t) => [t.id, t.function.name, t.function.arguments]),
    finish: c.choices[0].finish_reason, usage: [c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens],
  });
}

async function openaiStream(n) {
  const { data: s, response } = await openai.chat.completions
    .create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "count to three" }], tools, stream: true, stream_options: { include_usage: true } })
    .withResponse();
  let text = "", finish = null, usage = null;
  const calls = [];
  for await (const ch of s) {
    if (ch.usage) usage = [ch.usage.prompt_tokens, ch.usage.completion_tokens, ch.usage.total_tokens];
    if (!ch.choices.length) continue;
    const d = ch.choices[0].delta;
    if (d.content) text += d.content;
    for (const tc of d.tool_calls || []) {
      calls[tc.index] = calls[tc.index] || ["", "", ""];
      if (tc.id) calls[tc.index][0] = tc.id;
      if (tc.function && tc.function.name) calls[tc.index][1] = tc.function.name;
      if (tc.function && tc.function.arguments) calls[tc.index][2] += tc.function.arguments;
    }
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
  }
  out({ case: "openai-stream-" + n, cache: response.headers.get("x-chorus-cache"), text, tools: calls, finish, usage });
}

async function anthropicStream(n) {
  const { data: s, response } = await anthropic.messages
    .create({
      model: "anthropic/claude-sonnet-4-5", max_tokens: 256, stream: true,
      messages: [{ role: "user", content: "weather in Rome?" }],
      tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }],
    })
    .withResponse();
  let text = "", stop = null, input = 0, output = 0;
  const calls = [];
  for await (const ev of s) {
    if (ev.type === "message_start") input = ev.message.usage.input_tokens;
    if (ev.type === "content_block_start" && ev.content_block.type === "tool_use") calls.push([ev.content_block.id, ev.content_block.name, ""]);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
    if (ev.type === "content_block_delta" && ev.delta.type === "input_json_delta") calls[calls.length - 1][2] += ev.delta.partial_json;
    if (ev.type === "message_delta") {
      stop = ev.delta.stop_reason;
      output = ev.usage.output_tokens;
      if (ev.usage.input_tokens) input = ev.usage.input_tokens; // the gateway knows them at the end
    }
  }
  out({ case: "anthropic-stream-" + n, cache: response.headers.get("x-chorus-cache"), text, tools: calls, stop, usage: [input, output] });
}

async function main() {
  for (const n of [1, 2]) await openaiBuffered(n);
  for (const n of [1, 2]) await openaiStream(n);
  for (const n of [1, 2]) await anthropicStream(n);
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e) + "\n");
  process.exit(1);
});
