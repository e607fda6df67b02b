// Drives "chorus serve" with the official openai and @anthropic-ai/sdk npm
// packages as an application that only changed its base URL would: each
// names its provider's own models (gpt-4o-mini, claude-sonnet-4-5), for a
// buffered call, a stream and tools; the Anthropic client marks its system
// prompt for caching twice. Each case prints one JSON line {case, ...}; the
// Go test (cmd/chorus TestServeOfficialSDKsDropIn) checks them.
// Usage: node dropin.cjs BASE_URL KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));
const Anthropic = require(path.join(process.env.SDK_DIR, "node_modules", "@anthropic-ai", "sdk"));

const [baseURL, key] = process.argv.slice(2);
const openai = new OpenAI({ baseURL: baseURL + "/v1", apiKey: key, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL, apiKey: key, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const weather = { type: "object", properties: { city: { type: "string" } } };

async function main() {
  const msgs = [{ role: "user", content: "hi" }];
  const c = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: msgs });
  out({ case: "openai_buffered", text: c.choices[0].message.content, model: c.model });
  {
    const s = await openai.chat.completions.create({ model: "gpt-4o-mini", messages: msgs, stream: true });
    let text = "";
    for await (const ch of s) if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
    out({ case: "openai_stream", text });
  }
  {
    const runner = openai.chat.completions.stream({ model: "gpt-4o-mini", messages: msgs, tools: [{ type: "function", function: { name: "get_weather", parameters: weather } }] });
    const tc = (await runner.finalChatCompletion()).choices[0].message.tool_calls[0];
    out({ case: "openai_tools", name: tc.function.name, args: tc.function.arguments });
  }
  const m = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 100, messages: msgs });
  out({ case: "anthropic_buffered", text: m.content[0].text, model: m.model });
  {
    const fin = await anthropic.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 100, messages: msgs }).finalMessage();
    out({ case: "anthropic_stream", text: fin.content[0].text });
  }
  {
    const fin = await anthropic.messages.stream({ model: "claude-sonnet-4-5", max_tokens: 100, messages: msgs, tools: [{ name: "get_weather", input_schema: weather }] }).finalMessage();
    const tu = fin.content.find((b) => b.type === "tool_use");
    out({ case: "anthropic_tools", name: tu.name, args: JSON.stringify(tu.input) });
  }
  const system = [{ type: "text", text: "Follow the house rules to the letter. ".repeat(200), cache_control: { type: "ephemeral" } }];
  for (const n of [1, 2]) {
    const r = await anthropic.messages.create({ model: "claude-sonnet-4-5", max_tokens: 100, system, messages: [{ role: "user", content: "question " + n }] });
    out({ case: "anthropic_cache_" + n, write: r.usage.cache_creation_input_tokens, read: r.usage.cache_read_input_tokens });
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
