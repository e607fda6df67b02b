// Drives the gateway's POST /v1/responses with the official openai npm
// package. Each case prints one JSON line {case, ...}; the Go test
// (sdk_test.go) scripts the fake provider behind the gateway in the same
// order and checks the lines.
// Usage: node responses.cjs BASE_URL KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));

const [baseURL, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: key, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const errInfo = (e) => ({ error: e && e.constructor ? e.constructor.name : String(e), status: e && e.status, message: e && e.message });

async function main() {
  // 1. buffered
  {
    const r = await client.responses.create({ model: "openai/gpt-4.1-mini", instructions: "be brief", input: "hi" });
    out({ case: "buffered", text: r.output_text, status: r.status, total: r.usage.total_tokens, id: r.id.startsWith("resp_") });
  }

  // 2. streamed with create({stream:true})
  {
    const s = await client.responses.create({ model: "openai/gpt-4.1-mini", input: "count", stream: true });
    let text = "", status = null, total = 0, seq = [];
    for await (const ev of s) {
      seq.push(ev.sequence_number);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed") { status = ev.response.status; total = ev.response.usage.total_tokens; }
    }
    const ordered = seq.every((n, i) => n === i);
    out({ case: "stream", text, status, total, ordered });
  }

  // 3. tools from an Anthropic-format model, with the SDK's stream helper
  {
    const tools = [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }];
    const stream = client.responses.stream({ model: "anthropic/claude-haiku-4-5", input: "weather?", tools });
    const final = await stream.finalResponse();
    const fc = final.output.find((o) => o.type === "function_call");
    out({ case: "tools", id: fc.call_id, name: fc.name, args: fc.arguments, status: final.status });
  }

  // 4. a failure after the first streamed byte surfaces as the SDK's error
  {
    let text = "";
    try {
      const s = await client.responses.create({ model: "openai/gpt-4.1-mini", input: "x", stream: true });
      for await (const ev of s) {
        if (ev.type === "response.output_text.delta") text += ev.delta;
      }
      out({ case: "midstream", text, error: null });
    } catch (e) {
      out({ case: "midstream", text, ...errInfo(e) });
    }
  }

  // 5. stateful requests are refused as the SDK's BadRequestError
  try {
    await client.responses.create({ model: "openai/gpt-4.1-mini", input: "x", previous_response_id: "resp_1" });
    out({ case: "stateful", error: null });
  } catch (e) {
    out({ case: "stateful", ...errInfo(e) });
  }
}

main().then(() => process.exit(0), (e) => { out({ case: "fatal", ...errInfo(e) }); process.exit(1); });
