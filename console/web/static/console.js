// Chorus console: live tables over the console's JSON API and its
// Server-Sent Events. Hand-written, no dependencies. Every value from the
// server is put in the page with textContent (never innerHTML), so model
// and tool content stays text.
"use strict";
(function () {
  const meta = (n) => (document.querySelector('meta[name="' + n + '"]') || {}).content || "";
  const API = meta("console-api");
  const PREFIX = meta("console-prefix");
  const CSRF = meta("csrf-token");
  const page = document.body.dataset.page;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) {
      if (c instanceof Node) { const td = el("td"); td.appendChild(c); tr.appendChild(td); }
      else if (c && typeof c === "object") { tr.appendChild(el("td", c.text, c.cls)); }
      else tr.appendChild(el("td", c));
    }
    return tr;
  }
  function pre(text) { return el("pre", text || "", "content"); }
  function link(href, text) { const a = el("a", text); a.href = href; return a; }
  function num(v) { return { text: v, cls: "num" }; }
  function budget(rem, lim) { if (rem < 0) return "-"; return lim > 0 ? rem + " / " + lim : String(rem); }
  function secs(s) {
    if (s < 0) return "-";
    s = Math.round(s);
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m" + (s % 60) + "s";
    return Math.floor(m / 60) + "h" + (m % 60) + "m";
  }
  function clock(iso) { return iso ? iso.substring(11, 23) : ""; }
  function live(ok) {
    const l = document.getElementById("live");
    if (l) l.className = ok ? "live on" : "live off";
  }

  async function post(path, body) { return send("POST", path, body); }
  async function send(method, path, body) {
    const headers = { "Content-Type": "application/json" };
    if (CSRF) headers["X-CSRF-Token"] = CSRF;
    const res = await fetch(API + path, { method: method, headers: headers, body: JSON.stringify(body || {}), credentials: "same-origin" });
    let data = null;
    try { data = await res.json(); } catch (e) { data = null; }
    return { status: res.status, data: data };
  }
  async function getJSON(path) {
    const res = await fetch(API + path, { credentials: "same-origin" });
    if (!res.ok) throw new Error("HTTP " + res.status);
    return res.json();
  }
  function stream(path, event, onData) {
    const es = new EventSource(API + path);
    es.addEventListener(event, (m) => { live(true); onData(JSON.parse(m.data), m); });
    es.onerror = () => live(false);
    es.onopen = () => live(true);
    return es;
  }
  function poll(fn, every) {
    const run = async () => {
      try { await fn(); live(true); } catch (e) { live(false); }
      setTimeout(run, every);
    };
    setTimeout(run, every);
  }

  // ---- Credentials: the table and each credential's window chart.
  const history = new Map(); // key -> [{left, rate, requests}]
  const HIST = 120;
  // chart draws a credential's window over the samples of the stream:
  // green, the requests left in the provider's window (scaled to the range
  // seen); blue bars, the requests made per sample.
  function chart(points, limit) {
    const NS = "http://www.w3.org/2000/svg";
    const w = 180, h = 44, top = 12;
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("width", w); svg.setAttribute("height", h);
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    svg.setAttribute("class", "spark");
    const add = (tag, attrs, text) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
      return e;
    };
    add("rect", { width: w, height: h, class: "spark-bg" });
    const span = Math.max(points.length, 40); // a fresh page fills in from the right
    const step = w / span;
    const x0 = w - points.length * step;
    const maxRate = Math.max(1, ...points.map((p) => p.rate));
    points.forEach((p, i) => {
      const bh = (p.rate / maxRate) * (h - top) * 0.5;
      if (bh > 0) add("rect", { x: (x0 + i * step).toFixed(1), y: (h - bh).toFixed(1), width: Math.max(1, step - 1).toFixed(1), height: bh.toFixed(1), class: "spark-rate" });
    });
    const known = points.filter((p) => p.left !== null).map((p) => p.left);
    if (known.length) {
      const hi = Math.max(...known); // zoomed to the range seen: the drain shows
      const lo = Math.min(...known);
      const range = Math.max(1, hi - lo);
      const pts = [];
      points.forEach((p, i) => {
        if (p.left === null) return;
        const y = top + (1 - (p.left - lo) / range) * (h - top - 4);
        pts.push((x0 + (i + 0.5) * step).toFixed(1) + "," + y.toFixed(1));
      });
      add("polyline", { points: pts.join(" "), class: "spark-budget" });
      add("text", { x: 3, y: 10, class: "spark-label" }, known[known.length - 1] + " left" + (limit > 0 ? " of " + limit : ""));
    } else {
      add("text", { x: 3, y: 10, class: "spark-label" }, "no limit reported");
    }
    add("title", {}, "green: requests left in the window; blue: requests per update");
    return svg;
  }
  function renderCredentials(v) {
    const tb = document.querySelector("#credentials tbody");
    if (!tb) return;
    clear(tb);
    if (!v.credentials.length) { tb.appendChild(row([{ text: "No runtime is attached to this console." }])); }
    for (const c of v.credentials) {
      const key = c.provider + "/" + c.credential;
      const hs = history.get(key) || [];
      const prev = hs.length ? hs[hs.length - 1].requests : c.requests;
      hs.push({ left: c.remaining_requests >= 0 ? c.remaining_requests : null, rate: Math.max(0, c.requests - prev), requests: c.requests });
      while (hs.length > HIST) hs.shift();
      history.set(key, hs);
      const costs = c.costs.map((x) => x.model + " $" + x.usd.toFixed(6)).join(" ");
      const tr = row([c.provider + "#" + c.credential, { text: c.fingerprint, cls: "mono" }, num(c.queued), num(c.in_flight), num(c.requests),
        num(c.failed), num(c.rate_limited), num(c.retries), num(budget(c.remaining_requests, c.limit_requests)),
        num(budget(c.remaining_tokens, c.limit_tokens)), c.cooldown_until || "", c.learned.join(", "), costs, chart(hs, c.limit_requests)]);
      tr.dataset.key = key;
      tr.lastChild.className = "chart";
      tb.appendChild(tr);
    }
    const at = document.getElementById("updated");
    if (at) at.textContent = v.at;
    const ab = document.querySelector("#aliases tbody");
    if (ab) {
      clear(ab);
      if (!v.aliases.length) ab.appendChild(row(["No aliases.", "", "", ""]));
      for (const a of v.aliases) {
        const serving = a.strategy ? "chosen per call by its strategy (below)" : a.serving >= 0 ? a.serving_target + " (step " + a.serving + ")" : "none: every target cools down";
        const tr = row([a.name, a.strategy || "fallback list", a.targets.join(" → "), { text: serving, cls: "serving" }]);
        tr.dataset.alias = a.name;
        ab.appendChild(tr);
      }
    }
    const rb = document.querySelector("#routes tbody");
    if (rb && v.routes) {
      clear(rb);
      const pct = (x) => (x * 100).toFixed(1) + "%";
      if (!v.routes.length) rb.appendChild(row(["No routed aliases."]));
      for (const r of v.routes) {
        for (const t of r.targets) {
          let health = t.ejected_until ? "ejected until " + t.ejected_until.replace(/\.\d+Z$/, "Z") : "healthy";
          if (t.ejections) health += " (ejections: " + t.ejections + ")";
          const tr = row([r.alias, r.strategy, t.model, num(t.weight), { text: pct(t.share), cls: "num share" }, num(t.served), num(t.failed),
            num(t.in_flight), num(pct(t.error_rate)), num(t.ttft_ms > 0 ? t.ttft_ms.toFixed(1) + " ms" : "-"), { text: health, cls: "health" },
            num(t.input_tokens > 0 ? (t.cached_tokens * 100 / t.input_tokens).toFixed(1) + "%" : "-")]);
          tr.dataset.alias = r.alias;
          tr.dataset.target = t.model;
          if (t.ejected_until) tr.className = "ejected";
          rb.appendChild(tr);
        }
      }
    }
  }

  // ---- Batches.
  function renderBatches(v) {
    const box = document.getElementById("batches");
    if (!box) return;
    clear(box);
    if (!v.jobs.length) box.appendChild(el("p", "No batch job has run in this process yet.", "empty"));
    for (const j of v.jobs) {
      const s = el("section", null, "job");
      s.dataset.id = j.id;
      const h = el("h2", j.id + ": " + j.name + " ");
      h.appendChild(el("span", j.running ? "running" : (j.error ? "failed: " + j.error : "finished"), "state"));
      s.appendChild(h);
      const bar = el("div", null, "bar"), fill = el("div", null, "fill");
      fill.style.width = j.percent.toFixed(1) + "%";
      bar.appendChild(fill); s.appendChild(bar);
      const stats = j.done + " done" + (j.total ? " of " + j.total : "") + " (" + j.percent.toFixed(1) + "%), " + j.succeeded + " ok, " +
        j.failed + " failed, " + j.skipped + " skipped, " + j.bad + " bad · " + j.rate.toFixed(1) + " lines/s · ETA " + secs(j.eta_seconds) +
        " · elapsed " + secs(j.elapsed_seconds) + " · " + j.tokens + " tokens · cost " + (j.cost_usd === undefined ? "-" : "$" + j.cost_usd.toFixed(6));
      s.appendChild(el("p", stats, "stats"));
      if (j.models.length) {
        const t = el("table", null, "grid models");
        const th = el("thead"); th.appendChild(row(["Model", "Requests", "Failed", "Tokens", "Native", "Cost"])); t.appendChild(th);
        const tb = el("tbody");
        for (const m of j.models) tb.appendChild(row([m.model, num(m.requests), num(m.failed), num(m.tokens), num(m.native), m.cost_usd === undefined ? "-" : "$" + m.cost_usd.toFixed(6)]));
        t.appendChild(tb); s.appendChild(t);
      }
      if (j.bad_lines.length) {
        s.appendChild(el("h3", "Bad lines"));
        const t = el("table", null, "grid badlines");
        const tb = el("tbody");
        for (const b of j.bad_lines) tb.appendChild(row([num(b.line), b.custom_id || "", pre(b.error)]));
        t.appendChild(tb); s.appendChild(t);
      }
      box.appendChild(s);
    }
    const at = document.getElementById("updated");
    if (at) at.textContent = v.at;
  }

  // ---- Sessions list.
  async function refreshSessions() {
    const t = document.getElementById("sessions");
    const state = t.dataset.state;
    const v = await getJSON("sessions" + (state ? "?state=" + encodeURIComponent(state) : ""));
    const tb = t.querySelector("tbody");
    clear(tb);
    if (!v.sessions.length) tb.appendChild(row(["No sessions."]));
    for (const s of v.sessions) {
      tb.appendChild(row([link(PREFIX + "sessions/" + encodeURIComponent(s.id), s.id), { text: s.state, cls: "state-" + s.state }, s.step,
        num(s.turn), num(s.pending), s.last_status || "", num(s.model_calls), num(s.usage.prompt_tokens + "/" + s.usage.completion_tokens)]));
    }
    for (const [k, n] of Object.entries(v.counts)) {
      const c = document.querySelector('[data-count="' + k + '"]');
      if (c) c.textContent = n;
    }
  }

  // ---- Approvals (the Approvals page and a session's pending table).
  function describeError(r) {
    const e = (r.data && r.data.error) || { code: "http_" + r.status, message: "" };
    if (e.code === "already_resolved") {
      let s = "already resolved";
      if (e.approved !== undefined) s += " (" + (e.expired ? "expired" : e.approved ? "approved" : "rejected") + (e.reason ? ": " + e.reason : "") + ")";
      return s;
    }
    return e.code + (e.message ? ": " + e.message : "");
  }
  async function resolve(tr, approved) {
    const out = tr.querySelector(".result");
    const note = (tr.querySelector(".note") || {}).value || "";
    for (const b of tr.querySelectorAll("button")) b.disabled = true;
    out.textContent = "…";
    try {
      const r = await post("sessions/" + encodeURIComponent(tr.dataset.session) + (approved ? "/approve" : "/reject"), { interrupt: tr.dataset.interrupt, note: note });
      if (r.status === 200) { out.textContent = approved ? "approved" : "rejected"; out.className = "result ok"; }
      else {
        out.textContent = describeError(r);
        out.className = "result " + (r.status === 409 ? "conflict" : "bad");
        if (r.status !== 409) for (const b of tr.querySelectorAll("button")) b.disabled = false;
      }
    } catch (e) {
      out.textContent = "network error: " + e.message; out.className = "result bad";
      for (const b of tr.querySelectorAll("button")) b.disabled = false;
    }
    if (page === "sessions") setTimeout(refreshSession, 200);
  }
  function approvalRow(a, withSession) {
    const note = el("input", null, "note"); note.type = "text"; note.placeholder = "note";
    const btns = el("span");
    const ap = el("button", "Approve", "approve"); ap.type = "button";
    const rj = el("button", "Reject", "reject"); rj.type = "button";
    btns.appendChild(ap); btns.appendChild(document.createTextNode(" ")); btns.appendChild(rj);
    const dl = { text: a.deadline || "none", cls: "deadline" };
    const cells = [a.tool, a.effect, pre(a.arguments), dl, note, btns, { text: "", cls: "result" }];
    if (withSession) cells.unshift(link(PREFIX + "sessions/" + encodeURIComponent(a.session), a.session));
    const tr = row(cells);
    tr.dataset.session = a.session; tr.dataset.interrupt = a.interrupt;
    tr.querySelector(".deadline").dataset.deadline = a.deadline || "";
    return tr;
  }
  function wireApprovals(table) {
    table.addEventListener("click", (ev) => {
      const b = ev.target.closest("button");
      if (!b) return;
      const tr = b.closest("tr");
      if (b.classList.contains("approve")) resolve(tr, true);
      else if (b.classList.contains("reject")) resolve(tr, false);
    });
  }
  // mergeApprovals adds new pending rows and marks rows no longer pending.
  function mergeApprovals(table, list, withSession) {
    const tb = table.querySelector("tbody");
    const want = new Map(list.map((a) => [a.session + "\u0000" + a.interrupt, a]));
    for (const tr of Array.from(tb.querySelectorAll("tr"))) {
      if (tr.classList.contains("none")) { if (list.length) tr.remove(); continue; }
      const k = tr.dataset.session + "\u0000" + tr.dataset.interrupt;
      if (want.has(k)) { want.delete(k); continue; }
      const out = tr.querySelector(".result");
      if (out && !out.textContent) { out.textContent = "resolved"; }
      for (const b of tr.querySelectorAll("button")) b.disabled = true;
    }
    for (const a of want.values()) tb.appendChild(approvalRow(a, withSession));
  }
  function countdowns() {
    const now = Date.now();
    for (const d of document.querySelectorAll(".deadline")) {
      if (!d.dataset.deadline) continue;
      const left = (Date.parse(d.dataset.deadline) - now) / 1000;
      d.textContent = left > 0 ? secs(left) + " left" : "expired";
      d.className = left > 0 && left < 60 ? "deadline soon" : "deadline";
    }
  }

  // ---- One session.
  let sessionId = null;
  let refreshing = false;
  async function refreshSession() {
    if (refreshing) return;
    refreshing = true;
    try {
      const v = await getJSON("sessions/" + encodeURIComponent(sessionId));
      const set = (id, t) => { const e = document.getElementById(id); if (e) e.textContent = t; };
      set("s-state", v.state); document.getElementById("s-state").className = "state-" + v.state;
      set("s-step", v.step); set("s-turn", v.turn); set("s-last", v.last_status || ""); set("s-calls", v.model_calls);
      set("s-tokens", v.usage.prompt_tokens + "/" + v.usage.completion_tokens); set("s-answer", v.answer || "");
      mergeApprovals(document.getElementById("approvals"), v.approvals, false);
      const tt = document.querySelector("#tools tbody"); clear(tt);
      for (const r of v.tools) tt.appendChild(row([num(r.turn), { text: r.id, cls: "mono" }, r.name, r.effect, pre(r.arguments), r.approval ? "yes" : "",
        num(r.attempts), r.status, pre((r.result || "") + (r.error || ""))]));
      const tl = document.querySelector("#timeline tbody"); clear(tl);
      for (const e of v.timeline) {
        let text = e.text || "";
        if (text && e.calls && e.calls.length) text += "\n";
        for (const c of e.calls || []) text += "call " + c.name + " " + c.arguments + (c.approval ? " (needs approval)" : "") + "\n";
        tl.appendChild(row([num(e.seq), { text: clock(e.at), cls: "mono" }, e.kind, num(e.turn), num(e.step || ""), num(e.attempt || ""), e.tool || "", e.effect || "",
          (e.status || "") + (e.approved === undefined ? "" : e.approved ? "approved" : "rejected"),
          e.usage ? e.usage.prompt_tokens + "/" + e.usage.completion_tokens : "", pre(text)]));
      }
    } finally { refreshing = false; }
  }
  function eventText(e) {
    let s = "#" + e.seq + " " + e.type + " turn " + e.turn;
    if (e.step) s += " step " + e.step;
    if (e.step_kind) s += " " + e.step_kind;
    if (e.tool_name) s += " " + e.tool_name + (e.effect ? " (" + e.effect + ")" : "");
    if (e.tool_status) s += " → " + e.tool_status;
    if (e.turn_status) s += " → " + e.turn_status;
    if (e.type === "approval_resolved") s += e.approved ? " approved" : " rejected";
    if (e.reason) s += ": " + e.reason;
    if (e.missed) s += " (" + e.missed + " events missed)";
    if (e.text) s += " " + JSON.stringify(e.text);
    return s;
  }
  function initSession() {
    const box = document.getElementById("session");
    if (!box) return;
    sessionId = box.dataset.id;
    wireApprovals(document.getElementById("approvals"));
    const list = document.getElementById("events");
    let pendingRefresh = null;
    const es = stream("sessions/" + encodeURIComponent(sessionId) + "/events", "session", (e) => {
      const li = el("li", eventText(e), "ev ev-" + e.type);
      list.appendChild(li);
      while (list.childNodes.length > 500) list.removeChild(list.firstChild);
      if (e.type !== "text_delta" && e.type !== "reasoning_delta" && !pendingRefresh) {
        pendingRefresh = setTimeout(() => { pendingRefresh = null; refreshSession().catch(() => {}); }, 150);
      }
    });
    document.getElementById("send").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const m = document.getElementById("message");
      const r = await post("sessions/" + encodeURIComponent(sessionId) + "/messages", { text: m.value });
      document.getElementById("act-result").textContent = r.status === 202 ? "sent" : describeError(r);
      if (r.status === 202) m.value = "";
    });
    document.getElementById("cancel").addEventListener("click", async () => {
      const r = await post("sessions/" + encodeURIComponent(sessionId) + "/cancel", {});
      document.getElementById("act-result").textContent = r.status === 200 ? "cancel requested" : describeError(r);
    });
    setInterval(() => refreshSession().catch(() => {}), 5000);
  }

  // ---- Keys: the list, a key's page and their forms (the admin API).
  function money(v) { return "$" + v.toFixed(4); }
  function spendText(k) {
    let s = money(k.spend.spent_usd);
    if (k.spend.reserved_usd) s += " + " + money(k.spend.reserved_usd) + " reserved";
    s += k.budget_usd ? " of " + money(k.budget_usd) : " (no budget)";
    if (k.budget_period !== "total") s += k.budget_period === "day" ? " today" : " this " + k.budget_period;
    return s + " · " + k.spend.calls + " calls";
  }
  // renderSpend redraws a spend cell: the meter against the budget, the text.
  function renderSpend(cell, k) {
    let m = cell.querySelector("meter");
    if (k.budget_usd > 0) {
      if (!m) { m = document.createElement("meter"); m.min = 0; cell.insertBefore(m, cell.firstChild); cell.insertBefore(document.createTextNode(" "), m.nextSibling); }
      m.max = k.budget_usd; m.high = k.budget_usd; m.value = k.spend.spent_usd;
      m.title = Math.min(100, 100 * (k.spend.spent_usd + k.spend.reserved_usd) / k.budget_usd).toFixed(1) + "% used";
    } else if (m) { m.remove(); }
    cell.querySelector(".spend-text").textContent = spendText(k);
  }
  // keyBody reads a key form: models split on commas, numbers as numbers.
  function keyBody(form) {
    const b = {};
    for (const i of form.querySelectorAll("input[name], select[name]")) {
      if (i.name === "grace") continue;
      if (i.name === "models") b.models = i.value.split(",").map((m) => m.trim()).filter((m) => m);
      else if (i.type === "checkbox") b[i.name] = i.checked;
      else if (i.type === "number") b[i.name] = i.value === "" ? 0 : Number(i.value);
      else b[i.name] = i.value;
    }
    return b;
  }
  function showResult(r, okText) {
    const out = document.getElementById("key-result");
    if (!out) return;
    if (r.status < 300) { out.textContent = okText; out.className = "result ok"; return; }
    out.textContent = describeError(r) + (r.data && r.data.error && r.data.error.field ? " (field " + r.data.error.field + ")" : "");
    out.className = "result bad";
  }
  function showSecret(secret) {
    document.getElementById("secret-text").textContent = secret;
    document.getElementById("new-secret").hidden = false;
  }
  function initKeys() {
    const create = document.getElementById("key-create");
    if (create) create.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const r = await post("keys", keyBody(create));
      showResult(r, r.status === 201 ? "created " + r.data.key.name + " (" + r.data.key.fingerprint + ")" : "");
      if (r.status !== 201) return;
      showSecret(r.data.secret);
      document.getElementById("new-key-link").href = PREFIX + "keys/" + encodeURIComponent(r.data.key.id);
      const tb = document.querySelector("#keys tbody");
      const none = tb.querySelector("tr.none");
      if (none) none.remove();
      const k = r.data.key;
      const cell = el("td", null, "spend"); cell.appendChild(el("span", "", "spend-text"));
      const tr = row([link(PREFIX + "keys/" + encodeURIComponent(k.id), k.name), { text: k.fingerprint, cls: "mono" }, k.models.length ? k.models.join(", ") : "every model",
        num(k.rpm || "-"), num(k.tpm || "-"), num(k.concurrency || "-"), { text: k.status, cls: "status state-" + k.status }]);
      tr.appendChild(cell); tr.dataset.id = k.id; tb.appendChild(tr);
      renderSpend(cell, k);
      create.reset();
    });
    const box = document.getElementById("key");
    if (box) {
      const id = box.dataset.id;
      const update = document.getElementById("key-update");
      if (update) update.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const r = await send("PATCH", "keys/" + encodeURIComponent(id), keyBody(update));
        showResult(r, "saved");
        if (r.status === 200) renderKey(r.data.key);
      });
      const rotate = document.getElementById("key-rotate");
      if (rotate) rotate.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const grace = rotate.querySelector("input[name=grace]").value.trim();
        const r = await post("keys/" + encodeURIComponent(id) + "/rotate", grace ? { grace: grace } : {});
        showResult(r, "rotated: the new fingerprint is " + (r.data && r.data.key ? r.data.key.fingerprint : ""));
        if (r.status === 200) { showSecret(r.data.secret); renderKey(r.data.key); }
      });
      const revoke = document.getElementById("revoke");
      if (revoke) revoke.addEventListener("click", async () => {
        const r = await post("keys/" + encodeURIComponent(id) + "/revoke", {});
        showResult(r, "revoked");
        if (r.status === 200) {
          renderKey(r.data.key);
          for (const f of document.querySelectorAll("#key-update, #key-rotate")) for (const i of f.elements) i.disabled = true;
          revoke.disabled = true;
        }
      });
      poll(async () => {
        const v = await getJSON("keys/" + encodeURIComponent(id));
        renderKey(v.key);
        renderLedger(v.ledger);
      }, 1000);
      return;
    }
    if (document.getElementById("keys")) poll(async () => {
      for (const k of (await getJSON("keys")).keys) {
        const tr = document.querySelector('#keys tr[data-id="' + CSS.escape(k.id) + '"]');
        if (!tr) continue;
        renderSpend(tr.querySelector("td.spend"), k);
        const st = tr.querySelector("td.status"); st.textContent = k.status; st.className = "status state-" + k.status;
      }
    }, 2000);
  }
  function renderKey(k) {
    const set = (id, t) => { const e = document.getElementById(id); if (e) e.textContent = t; };
    let st = k.status;
    if (k.previous_valid_until) st += " (the previous key works until " + iso(k.previous_valid_until) + ")";
    if (k.revoked) st += " at " + iso(k.revoked);
    set("k-status", st); document.getElementById("k-status").className = "state-" + k.status;
    set("k-fingerprint", k.fingerprint);
    set("k-models", k.models.length ? k.models.join(", ") : "every model");
    set("k-limits", k.rpm + " rpm, " + k.tpm + " tpm, " + k.concurrency + " at once (0: none)");
    set("k-updated", iso(k.updated));
    renderSpend(document.getElementById("k-spend"), k);
  }
  function iso(t) { return t ? t.replace(/\.\d+Z$/, "Z") : "-"; }
  function renderLedger(ledger) {
    const tb = document.querySelector("#ledger tbody");
    if (!tb) return;
    clear(tb);
    if (!ledger.length) { const tr = row([{ text: "Nothing spent yet.", cls: "empty" }]); tr.firstChild.colSpan = 3; tb.appendChild(tr); }
    for (const l of ledger) tb.appendChild(row([l.period || "total", num(money(l.spent_usd)), num(l.calls)]));
  }

  function init() {
    setInterval(countdowns, 1000);
    countdowns();
    switch (page) {
      case "credentials": stream("credentials/stream", "credentials", renderCredentials); break;
      case "batches": stream("batches/stream", "batches", renderBatches); break;
      case "sessions":
        if (document.getElementById("session")) initSession();
        else if (document.getElementById("sessions")) poll(refreshSessions, 2000);
        break;
      case "keys": initKeys(); break;
      case "approvals": {
        const t = document.getElementById("approvals");
        wireApprovals(t);
        poll(async () => mergeApprovals(t, (await getJSON("approvals")).approvals, true), 2000);
        break;
      }
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
