// Drives "chorus serve" on the simulator with both official npm SDKs, as
// their users run them: the serve command's own runtime, the simulator as
// provider "sim" (OpenAI format) and as the built-in "anthropic" provider
// moved onto a simulator (Anthropic format). Each case prints one JSON
// line {case, ...}; the Go test (cmd/chorus serve_sdk_test.go) compares
// the cross-format answers with the direct ones.
// Usage: node sim.cjs BASE_URL GOOD_KEY LIMITED_KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));
const Anthropic = require(path.join(process.env.SDK_DIR, "node_modules", "@anthropic-ai", "sdk"));

const [baseURL, goodKey, limitedKey] = process.argv.slice(2);
const oa = new OpenAI({ baseURL: baseURL + "/v1", apiKey: goodKey, maxRetries: 0 });
const an = new Anthropic({ baseURL, apiKey: goodKey, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const errInfo = (e) => ({ error: e && e.constructor ? e.constructor.name : String(e), status: e && e.status });
const weather = "what is the weather? call get_weather {\"city\":\"Paris\"}";
const oaTools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
const anTools = [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];

// OpenAI SDK, streamed: the text and tool calls the SDK assembles.
async function openaiStream(model, content, tools) {
  const s = oa.chat.completions.stream({ model, messages: [{ role: "user", content }], ...(tools ? { tools: oaTools } : {}), stream_options: { include_usage: true } });
  let deltas = 0;
  s.on("content", () => { deltas++; });
  const c = await s.finalChatCompletion();
  const m = c.choices[0].message;
  return { text: m.content || "", calls: (m.tool_calls || []).map((t) => t.function.name + " " + JSON.stringify(JSON.parse(t.function.arguments))), deltas, usage: c.usage ? c.usage.total_tokens : 0 };
}

// Anthropic SDK, streamed through its MessageStream.
async function anthropicStream(model, content, tools) {
  const s = an.messages.stream({ model, max_tokens: 200, messages: [{ role: "user", content }], ...(tools ? { tools: anTools } : {}) });
  let deltas = 0;
  s.on("text", () => { deltas++; });
  const m = await s.finalMessage();
  return { text: m.content.filter((b) => b.type === "text").map((b) => b.text).join(""), calls: m.content.filter((b) => b.type === "tool_use").map((b) => b.name + " " + JSON.stringify(b.input)), deltas, usage: m.usage.output_tokens };
}

async function main() {
  const c = await oa.chat.completions.create({ model: "sim/echo", messages: [{ role: "user", content: "hello sim" }] });
  out({ case: "openai-buffered", text: c.choices[0].message.content, finish: c.choices[0].finish_reason });
  const m = await an.messages.create({ model: "sim/echo", max_tokens: 100, messages: [{ role: "user", content: "hello sim" }] });
  out({ case: "anthropic-buffered", text: m.content[0].text, stop: m.stop_reason });

  // The same prompt, streamed, each SDK on each format's model.
  for (const [name, fn] of [["openai", openaiStream], ["anthropic", anthropicStream]]) {
    for (const model of ["sim/story", "anthropic/story"]) {
      out({ case: name + ":" + model, ...(await fn(model, "tell me a short story", false)) });
      out({ case: name + ":" + model + ":tools", ...(await fn(model, weather, true)) });
    }
  }

  const e = await oa.embeddings.create({ model: "sim/text-embedding-3-small", input: ["a", "b"] });
  out({ case: "embeddings", n: e.data.length, dims: e.data[0].embedding.length });
  const ids = [];
  for await (const x of oa.models.list()) ids.push(x.id);
  const anIds = [];
  for await (const x of an.models.list({ limit: 2 })) anIds.push(x.id);
  out({ case: "models", ids, anIds });

  // A provider's 400 (the simulator's [sim:status=400]) is each SDK's BadRequestError.
  try {
    await oa.chat.completions.create({ model: "sim/echo", messages: [{ role: "user", content: "[sim:status=400]" }] });
    out({ case: "openai-400", error: null });
  } catch (e) {
    out({ case: "openai-400", ...errInfo(e) });
  }
  try {
    await an.messages.create({ model: "sim/echo", max_tokens: 10, messages: [{ role: "user", content: "[sim:status=400]" }] });
    out({ case: "anthropic-400", error: null });
  } catch (e) {
    out({ case: "anthropic-400", ...errInfo(e) });
  }
  try {
    await new OpenAI({ baseURL: baseURL + "/v1", apiKey: "gk-wrong", maxRetries: 0 }).chat.completions.create({ model: "sim/echo", messages: [{ role: "user", content: "x" }] });
    out({ case: "auth", error: null });
  } catch (e) {
    out({ case: "auth", ...errInfo(e) });
  }
  // The gateway key's rpm 1: the second call is each SDK's RateLimitError.
  const lo = new OpenAI({ baseURL: baseURL + "/v1", apiKey: limitedKey, maxRetries: 0 });
  await lo.chat.completions.create({ model: "sim/echo", messages: [{ role: "user", content: "x" }] });
  try {
    await lo.chat.completions.create({ model: "sim/echo", messages: [{ role: "user", content: "x" }] });
    out({ case: "openai-429", error: null });
  } catch (e) {
    out({ case: "openai-429", retryAfter: e.headers.get("retry-after"), ...errInfo(e) });
  }
  try {
    await new Anthropic({ baseURL, apiKey: limitedKey, maxRetries: 0 }).messages.create({ model: "sim/echo", max_tokens: 10, messages: [{ role: "user", content: "x" }] });
    out({ case: "anthropic-429", error: null });
  } catch (e) {
    out({ case: "anthropic-429", retryAfter: e.headers.get("retry-after"), ...errInfo(e) });
  }
}

main().then(() => process.exit(0), (e) => { out({ case: "fatal", error: String(e && e.stack || e) }); process.exit(1); });
