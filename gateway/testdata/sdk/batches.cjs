// Drives the gateway's /v1/files and /v1/batches with the official openai
// npm package: files.create, batches.create, batches.retrieve polling,
// files.content of the output and error files, batches.list, a cancel, and
// a batch refused for a model the key may not call. Each case prints one
// JSON line {case, ...}; the Go test (sdk_test.go) checks them.
// Usage: node batches.cjs BASE_URL KEY (SDK_DIR in the env).
const path = require("path");
const OpenAI = require(path.join(process.env.SDK_DIR, "node_modules", "openai"));
const { toFile } = OpenAI;

const [baseURL, key] = process.argv.slice(2);
const client = new OpenAI({ baseURL: baseURL + "/v1", apiKey: key, maxRetries: 0 });
const out = (o) => process.stdout.write(JSON.stringify(o) + "\n");
const errInfo = (e) => ({ error: e && e.constructor ? e.constructor.name : String(e), status: e && e.status, message: e && e.message });
const line = (id, model, role) => JSON.stringify({ custom_id: id, method: "POST", url: "/v1/chat/completions", body: { model, messages: [{ role, content: "hi " + id }] } });

async function wait(id) {
  for (let i = 0; i < 1500; i++) {
    const b = await client.batches.retrieve(id);
    if (["completed", "failed", "cancelled", "expired"].includes(b.status)) return b;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("batch " + id + " never ended");
}

async function main() {
  // 1. a batch with two good lines and a bad one
  {
    const jsonl = [line("a", "openai/gpt-4.1-mini", "user"), line("b", "openai/gpt-4.1-mini", "user"), line("c", "openai/gpt-4.1-mini", "wizard")].join("\n") + "\n";
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "in.jsonl"), purpose: "batch" });
    const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h", metadata: { job: "sdk" } });
    const b = await wait(created.id);
    const output = (await (await client.files.content(b.output_file_id)).text()).trim().split("\n").map(JSON.parse);
    const errors = (await (await client.files.content(b.error_file_id)).text()).trim().split("\n").map(JSON.parse);
    const texts = output.map((l) => l.custom_id + ":" + l.response.body.choices[0].message.content).sort();
    out({ case: "batch", file: file.purpose, bytes: file.bytes === Buffer.byteLength(jsonl), created: created.status, status: b.status, counts: b.request_counts, texts, errors: errors.map((l) => l.custom_id), metadata: b.metadata });
    const ids = [];
    for await (const x of client.batches.list({ limit: 10 })) ids.push(x.id);
    out({ case: "list", has: ids.includes(created.id) });
  }

  // 2. a model the key may not call: the batch fails validation
  {
    const jsonl = line("x", "anthropic/claude-haiku-4-5", "user") + "\n";
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "bad.jsonl"), purpose: "batch" });
    const b = await wait((await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" })).id);
    out({ case: "refused", status: b.status, code: b.errors.data[0].code, line: b.errors.data[0].line });
  }

  // 3. cancel a running batch (its one line stalls upstream)
  {
    const jsonl = line("slow", "openai/gpt-4.1-mini", "user") + "\n";
    const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "slow.jsonl"), purpose: "batch" });
    const created = await client.batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    let b = created;
    while (b.status === "validating") b = await client.batches.retrieve(created.id);
    await new Promise((r) => setTimeout(r, 100));
    const c = await client.batches.cancel(created.id);
    b = await wait(created.id);
    out({ case: "cancel", cancelling: c.status === "cancelling" || c.status === "cancelled", status: b.status, completed: b.request_counts.completed });
  }

  // 4. another key's file is not found
  try {
    const other = new OpenAI({ baseURL: baseURL + "/v1", apiKey: "gk-sdk-limited", maxRetries: 0 });
    const file = await client.files.create({ file: await toFile(Buffer.from(line("z", "openai/gpt-4.1-mini", "user") + "\n"), "z.jsonl"), purpose: "batch" });
    await other.files.content(file.id);
    out({ case: "foreign", error: null });
  } catch (e) {
    out({ case: "foreign", ...errInfo(e) });
  }
}

main().then(() => process.exit(0), (e) => { out({ case: "fatal", ...errInfo(e) }); process.exit(1); });
