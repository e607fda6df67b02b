// Drives the gateway with the official openai npm package. Each case
// prints one JSON line {case, ...}; the Go test (sdk_test.go) scripts the
// fake provider behind the gateway in the same order and checks the lines.
// Usage: node openai.cjs BASE_URL GOOD_KEY LIMITED_KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));

const [baseURL, goodKey, limitedKey] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: goodKey, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const errInfo = (e) => ({ error: e && e.constructor ? e.constructor.name : String(e), status: e && e.status, message: e && e.message });

async function main() {
  // 1. buffered chat
  const c = await client.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "hi" }] });
  out({ case: "buffered", text: c.choices[0].message.content, finish: c.choices[0].finish_reason, total: c.usage.total_tokens });

  // 2. streamed chat with usage
  {
    const s = await client.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "count" }], stream: true, stream_options: { include_usage: true } });
    let text = "", finish = null, total = 0;
    for await (const ch of s) {
      if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
      if (ch.choices.length && ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
      if (ch.usage) total = ch.usage.total_tokens;
    }
    out({ case: "stream", text, finish, total });
  }

  // 3. tools, streamed, assembled by the SDK's helper
  {
    const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
    const runner = client.chat.completions.stream({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "weather?" }], tools, tool_choice: "required" });
    const final = await runner.finalChatCompletion();
    const tc = final.choices[0].message.tool_calls[0];
    out({ case: "tools", id: tc.id, name: tc.function.name, args: tc.function.arguments, finish: final.choices[0].finish_reason });
  }

  // 4. a failure after the first streamed byte surfaces as the SDK's error
  {
    let text = "";
    try {
      const s = await client.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "x" }], stream: true });
      for await (const ch of s) {
        if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
      }
      out({ case: "midstream", text, error: null });
    } catch (e) {
      out({ case: "midstream", text, ...errInfo(e) });
    }
  }

  // 5. cancellation: abort after the first chunk
  {
    const ac = new AbortController();
    let text = "";
    try {
      const s = await client.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "x" }], stream: true }, { signal: ac.signal });
      for await (const ch of s) {
        if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
        ac.abort();
      }
      out({ case: "cancel", text, error: null });
    } catch (e) {
      out({ case: "cancel", text, ...errInfo(e) });
    }
  }

  // 6. embeddings (the SDK asks for base64 by default and decodes it)
  {
    const e = await client.embeddings.create({ model: "openai/text-embedding-3-small", input: ["a", "b"] });
    out({ case: "embeddings", n: e.data.length, dims: e.data[0].embedding.length, first: e.data[1].embedding.slice(0, 2) });
  }

  // 7. model list
  {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    out({ case: "models", ids });
  }

  // 8. auth error
  try {
    await new OpenAI({ baseURL: baseURL + "/v1", apiKey: "gk-wrong", maxRetries: 0 }).chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "x" }] });
    out({ case: "auth", error: null });
  } catch (e) {
    out({ case: "auth", ...errInfo(e) });
  }

  // 9. the gateway key's own rate limit (rpm 1): the second call is a RateLimitError
  {
    const limited = new OpenAI({ baseURL: baseURL + "/v1", apiKey: limitedKey, maxRetries: 0 });
    const first = await limited.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "x" }] }).withResponse();
    try {
      await limited.chat.completions.create({ model: "openai/gpt-4.1-mini", messages: [{ role: "user", content: "x" }] });
      out({ case: "ratelimit", error: null });
    } catch (e) {
      out({ case: "ratelimit", remaining: first.response.headers.get("x-ratelimit-remaining-requests"), retryAfter: e.headers && e.headers.get ? e.headers.get("retry-after") : null, ...errInfo(e) });
    }
  }
}

main().then(() => process.exit(0), (e) => { out({ case: "fatal", ...errInfo(e) }); process.exit(1); });
