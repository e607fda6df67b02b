// Drives the gateway with the official @anthropic-ai/sdk npm package. Each
// case prints one JSON line {case, ...}; the Go test (sdk_test.go) scripts
// the fake providers behind the gateway in the same order.
// Usage: node anthropic.cjs BASE_URL GOOD_KEY LIMITED_KEY (SDK_DIR in the env).
const path = require("path");
const Anthropic = require(path.join(process.env.SDK_DIR, "node_modules", "@anthropic-ai", "sdk"));

const [baseURL, goodKey, limitedKey] = process.argv.slice(2);
const client = new Anthropic({ baseURL, apiKey: goodKey, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const errInfo = (e) => ({ error: e && e.constructor ? e.constructor.name : String(e), status: e && e.status, message: e && e.message });
const user = (text) => [{ role: "user", content: text }];

async function main() {
  // 1. buffered, with thinking
  {
    const m = await client.messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: user("hi") });
    const th = m.content.find((b) => b.type === "thinking");
    const tx = m.content.find((b) => b.type === "text");
    out({ case: "buffered", text: tx && tx.text, signature: th && th.signature, stop: m.stop_reason, input: m.usage.input_tokens });
  }

  // 2. streamed, through the SDK's MessageStream
  {
    let deltas = "";
    const s = client.messages.stream({ model: "anthropic/claude-haiku-4-5", max_tokens: 100, messages: user("count") });
    s.on("text", (t) => { deltas += t; });
    const m = await s.finalMessage();
    out({ case: "stream", text: m.content[0].text, deltas, stop: m.stop_reason, output: m.usage.output_tokens });
  }

  // 2b. streamed thinking: each block keeps its signature (signature_delta)
  {
    const s = client.messages.stream({ model: "anthropic/claude-haiku-4-5", max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: user("think") });
    let sigDeltas = 0;
    s.on("streamEvent", (ev) => { if (ev.type === "content_block_delta" && ev.delta.type === "signature_delta") sigDeltas++; });
    const m = await s.finalMessage();
    const blocks = m.content.filter((b) => b.type === "thinking").map((b) => b.thinking + "|" + b.signature);
    out({ case: "thinkingstream", blocks, sigDeltas, text: m.content.filter((b) => b.type === "text").map((b) => b.text).join("") });
  }

  // 3. tools, streamed, on an OpenAI-format model (cross-format)
  {
    const s = client.messages.stream({ model: "openai/gpt-4.1-mini", max_tokens: 100, tools: [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }], tool_choice: { type: "any" }, messages: user("weather?") });
    const m = await s.finalMessage();
    const tu = m.content.find((b) => b.type === "tool_use");
    out({ case: "tools", id: tu && tu.id, name: tu && tu.name, input: tu && tu.input, stop: m.stop_reason });
  }

  // 4. a failure after the first streamed byte
  {
    let text = "";
    try {
      const s = await client.messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 100, stream: true, messages: user("x") });
      for await (const ev of s) {
        if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
      }
      out({ case: "midstream", text, error: null });
    } catch (e) {
      out({ case: "midstream", text, ...errInfo(e) });
    }
  }

  // 5. cancellation after the first delta
  {
    let text = "";
    const ac = new AbortController();
    try {
      const s = await client.messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 100, stream: true, messages: user("x") }, { signal: ac.signal });
      for await (const ev of s) {
        if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") {
          text += ev.delta.text;
          ac.abort();
        }
      }
      out({ case: "cancel", text, error: null });
    } catch (e) {
      out({ case: "cancel", text, ...errInfo(e) });
    }
  }

  // 6. count_tokens
  {
    const c = await client.messages.countTokens({ model: "anthropic/claude-haiku-4-5", messages: user("count me") });
    out({ case: "count", positive: c.input_tokens > 0 });
  }

  // 6b. the model list, one model a page (the SDK's pager follows has_more
  // and last_id), and one model
  {
    const ids = [];
    for await (const m of client.models.list({ limit: 1 })) ids.push(m.type === "model" && m.display_name && m.created_at ? m.id : "bad:" + JSON.stringify(m));
    const one = await client.models.retrieve("fast");
    out({ case: "models", ids, one: one.id });
  }

  // 7. auth error
  try {
    await new Anthropic({ baseURL, apiKey: "gk-wrong", maxRetries: 0 }).messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 5, messages: user("x") });
    out({ case: "auth", error: null });
  } catch (e) {
    out({ case: "auth", ...errInfo(e) });
  }

  // 8. the gateway key's own rate limit (rpm 1)
  {
    const limited = new Anthropic({ baseURL, apiKey: limitedKey, maxRetries: 0 });
    await limited.messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 5, messages: user("x") });
    try {
      await limited.messages.create({ model: "anthropic/claude-haiku-4-5", max_tokens: 5, messages: user("x") });
      out({ case: "ratelimit", error: null });
    } catch (e) {
      out({ case: "ratelimit", retryAfter: e.headers && e.headers.get ? e.headers.get("retry-after") : null, ...errInfo(e) });
    }
  }
}

main().then(() => process.exit(0), (e) => { out({ case: "fatal", ...errInfo(e) }); process.exit(1); });
