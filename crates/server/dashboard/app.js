// The Regina dashboard: a single page, hash-routed, that polls the node's
// HTTP API. Charts are uPlot, tables Grid.js (both vendored under
// /dashboard/vendor/). With auth on, the token typed in the login box is kept
// in sessionStorage and sent as `Authorization: Bearer`.

const POLL_MS = 2000;
const TOKEN_KEY = "regina.token";
const { Grid, html } = window.gridjs;
const uPlot = window.uPlot;

// ------------------------------------------------------------------ the API

class Unauthorized extends Error {}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (resp.status === 401) {
    showLogin(token ? "The token was refused; log in again." : "This node requires a bearer token.");
    throw new Unauthorized("401");
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!resp.ok) {
    const msg = (data && (data.error || data.detail || data.reason)) || resp.statusText;
    const err = new Error(`${method} ${path}: ${resp.status} ${typeof msg === "string" ? msg : JSON.stringify(msg)}`);
    err.status = resp.status;
    err.data = data;
    throw err;
  }
  return data;
}

const enc = encodeURIComponent;

// ------------------------------------------------------------------ helpers

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmtNum(n) {
  if (n === null || n === undefined) return "–";
  if (typeof n !== "number") return String(n);
  return Number.isInteger(n) ? n.toLocaleString("en-US") : n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

function fmtAge(s) {
  if (s === null || s === undefined) return "–";
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

/// An ISO 8601 instant as `2026-01-02 03:04:05Z` (UTC, to the second).
function fmtTime(iso) {
  return iso.replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function json(v) {
  return JSON.stringify(v, null, 2);
}

function cards(container, items) {
  container.replaceChildren(...items.map(([key, label, value]) =>
    el("div", { class: "card", "data-k": key }, el("div", { class: "k" }, label), el("div", { class: "v" }, value))));
}

function link(href, text) {
  return html(`<a href="${esc(href)}">${esc(text)}</a>`);
}

function buttonHtml(action, label, data, cls = "") {
  const attrs = Object.entries(data).map(([k, v]) => `data-${k}="${esc(v)}"`).join(" ");
  return `<button class="${cls}" data-action="${esc(action)}" ${attrs}>${esc(label)}</button>`;
}

function button(action, label, data, cls = "") {
  return html(buttonHtml(action, label, data, cls));
}

/// Least time between two renders of one table. Grid.js (6.2) renders
/// asynchronously, and a render started while the last one still runs
/// fails inside the library ("Cannot read properties of undefined (reading
/// 'length')", its issue 1484), leaving the table empty.
const RENDER_GAP_MS = 300;

/// A Grid.js table in `container`, re-rendered only when its rows change,
/// and at most once per `RENDER_GAP_MS` (with the latest rows).
class Table {
  constructor(container, columns, { limit = 50, search = false } = {}) {
    this.container = container;
    this.columns = columns;
    this.key = null;
    this.rows = [];
    this.timer = null;
    // Rows are arrays: each column gets an id of its own, whatever its title.
    const cols = columns.map((c, i) => ({ id: `c${i}`, name: c, sort: c !== "" }));
    this.grid = new Grid({ columns: cols, data: [], sort: true, search, pagination: { limit }, autoWidth: false });
    this.grid.render(container);
    this.renderedAt = Date.now();
  }

  set(rows) {
    rows = rows.map((r) => r.map((c) => (typeof c === "string" && ISO_TIME.test(c) ? fmtTime(c) : c)));
    const key = JSON.stringify(rows);
    if (key === this.key) return;
    this.key = key;
    this.rows = rows;
    if (this.timer !== null) return;
    const wait = Math.max(0, this.renderedAt + RENDER_GAP_MS - Date.now());
    this.timer = setTimeout(() => {
      this.timer = null;
      this.renderedAt = Date.now();
      this.container.dataset.rows = String(this.rows.length);
      this.grid.updateConfig({ data: this.rows }).forceRender();
    }, wait);
  }
}

/// Runs the handler of every `[data-action]` button clicked inside `root`.
function onAction(root, handlers) {
  root.addEventListener("click", async (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (!b || !handlers[b.dataset.action]) return;
    b.disabled = true;
    try {
      await handlers[b.dataset.action](b.dataset, b);
    } catch (e) {
      if (!(e instanceof Unauthorized)) say(root, `${e.message}`, true);
    } finally {
      b.disabled = false;
    }
  });
}

function say(root, text, bad = false) {
  let s = root.querySelector(".say");
  if (!s) {
    s = el("p", { class: "say" });
    root.prepend(s);
  }
  s.className = `say ${bad ? "error" : "ok"}`;
  s.textContent = text;
}

/// A uPlot time chart in `container`; recreated when its series change.
class Chart {
  constructor(container, title, unit) {
    this.box = el("div", { class: "chart" }, el("h3", {}, title));
    container.append(this.box);
    this.unit = unit;
    this.plot = null;
    this.names = null;
  }

  set(times, series) {
    const names = series.map((s) => s.name).join("\u0000");
    const data = [times, ...series.map((s) => s.values)];
    if (this.plot && names === this.names) {
      this.plot.setData(data);
      return;
    }
    this.plot?.destroy();
    this.names = names;
    const colors = ["#2f5fd0", "#e8590c", "#0ca678", "#ae3ec9", "#f59f00", "#1098ad", "#d6336c", "#5c940d"];
    const width = Math.max(320, this.box.clientWidth - 16);
    this.plot = new uPlot({
      width,
      height: 200,
      series: [{}, ...series.map((s, i) => ({ label: s.name, stroke: colors[i % colors.length], width: 2,
        value: (u, v) => (v === null || v === undefined ? "–" : `${fmtNum(v)} ${this.unit}`) }))],
      axes: [{}, { size: 60 }],
      scales: { x: { time: true } },
    }, data, this.box);
  }
}

// ------------------------------------------------------------------ pages

const pages = {};

pages.overview = (root) => {
  root.append(el("h1", {}, "Overview"));
  const stats = el("div", { class: "cards", id: "overview-cards" });
  const charts = el("div", { class: "charts", id: "overview-charts" });
  root.append(stats, charts, el("h2", {}, "Lag per consumer group"), el("div", { id: "t-lag" }));
  const cIn = new Chart(charts, "Throughput (messages per second)", "msg/s");
  const cDepth = new Chart(charts, "Depth (messages not yet consumed)", "msg");
  const cAge = new Chart(charts, "Oldest unconsumed message (age)", "s");
  const cLag = new Chart(charts, "Lag per consumer group (messages)", "msg");
  const lag = new Table(root.querySelector("#t-lag"), ["Group", "Queue", "Lag (messages)", "Max time lag (s)", "Partitions behind", "Active leases"]);
  return async () => {
    const [ov, hist, groups] = await Promise.all([
      api("/api/v1/resources/overview"), api("/api/v1/dashboard/history"), api("/api/v1/consumer-groups")]);
    const cur = hist.current;
    cards(stats, [
      ["queues", "Queues", fmtNum(ov.queues)],
      ["partitions", "Partitions", fmtNum(ov.partitions)],
      ["depth", "Depth", fmtNum(ov.depth)],
      ["total", "Messages kept", fmtNum(ov.messages.total)],
      ["processing", "Processing", fmtNum(ov.messages.processing)],
      ["deadLetter", "Dead letters", fmtNum(ov.deadLetterRows)],
      ["consumerGroups", "Consumer groups", fmtNum(ov.consumerGroups)],
      ["in", "In (msg/s)", fmtNum(cur.pushedPerSecond)],
      ["out", "Out (msg/s)", fmtNum(cur.consumedPerSecond)],
      ["oldest", "Oldest unconsumed", fmtAge(cur.oldestUnconsumedSeconds)],
    ]);
    const samples = [...hist.samples, cur];
    const t = samples.map((s) => s.atMs / 1000);
    cIn.set(t, [{ name: "in", values: samples.map((s) => s.pushedPerSecond) },
      { name: "out", values: samples.map((s) => s.consumedPerSecond) }]);
    cDepth.set(t, [{ name: "depth", values: samples.map((s) => s.depth) },
      { name: "dead letters", values: samples.map((s) => s.deadLetters) }]);
    cAge.set(t, [{ name: "oldest", values: samples.map((s) => s.oldestUnconsumedSeconds) }]);
    const names = [...new Set(samples.flatMap((s) => s.groups.map((g) => g.group)))].sort();
    cLag.set(t, names.map((n) => ({ name: n, values: samples.map((s) => s.groups.find((g) => g.group === n)?.lagMessages ?? null) })));
    lag.set(groups.map((g) => [g.name, g.queueName, g.totalLag, g.maxTimeLag, g.partitionsWithLag, g.activeLeases]));
  };
};

pages.queues = (root) => {
  root.append(el("h1", {}, "Queues"), el("div", { id: "t-queues" }));
  const t = new Table(root.querySelector("#t-queues"),
    ["Queue", "Partitions", "Depth", "Pending", "Processing", "Completed", "Dead letters", "Groups", "Bytes", "Last write"], { search: true });
  return async () => {
    const r = await api("/api/v1/resources/queues?limit=1000");
    t.set(r.queues.map((q) => [link(`#/queue/${enc(q.name)}`, q.name), q.partitions, q.depth, q.messages.pending,
      q.messages.processing, q.messages.completed, q.deadLetterRows, q.consumerGroups, q.retainedBytes, q.lastWriteAt]));
  };
};

pages.queue = (root, [name]) => {
  root.append(el("h1", {}, "Queue ", el("span", { id: "queue-name" }, name)),
    el("p", {}, el("a", { href: "#/queues" }, "← all queues")),
    el("h2", {}, "Partitions"), el("div", { id: "t-partitions" }),
    el("h2", {}, "Consumer groups"), el("div", { id: "t-queue-groups" }),
    el("h2", {}, "Configuration"), el("pre", { id: "queue-config" }));
  const parts = new Table(root.querySelector("#t-partitions"),
    ["Partition", "Id", "Pending", "Processing", "Total", "Dead letters", "Lag (s)", "Last write"]);
  const groups = new Table(root.querySelector("#t-queue-groups"), ["Group", "Registered", "Subscription"]);
  return async () => {
    const [p, q] = await Promise.all([api(`/api/v1/resources/partitions?queue=${enc(name)}&limit=10000`),
      api(`/api/v1/resources/queues/${enc(name)}`)]);
    parts.set(p.partitions.map((r) => [link(`#/partition/${enc(name)}/${enc(r.partition)}`, r.partition), r.id, r.pending,
      r.processing, r.total, r.deadLetter, r.lagSeconds, r.lastWriteAt]));
    groups.set((q.consumerGroups || []).map((g) => [g.name, g.registeredAt, g.subscriptionTimestamp ?? "–"]));
    root.querySelector("#queue-config").textContent = json(q.config);
  };
};

pages.partition = (root, [queue, partition]) => {
  root.append(el("h1", {}, `Partition ${partition} of `, el("a", { href: `#/queue/${enc(queue)}` }, queue)),
    el("div", { class: "row" }, "Status ", el("select", { id: "msg-status" },
      ...["", "pending", "processing", "completed", "dead_letter"].map((s) => el("option", { value: s }, s || "any")))),
    el("div", { id: "t-messages" }));
  const t = new Table(root.querySelector("#t-messages"), ["Offset", "Transaction", "Status", "Created", "Payload"]);
  const status = root.querySelector("#msg-status");
  status.addEventListener("change", () => refresh());
  const refresh = async () => {
    const s = status.value ? `&status=${enc(status.value)}` : "";
    const r = await api(`/api/v1/messages?queue=${enc(queue)}&partition=${enc(partition)}&limit=1000${s}`);
    t.set(r.messages.map((m) => [m.offset, link(`#/message/${enc(m.partitionId)}/${enc(m.transactionId)}`, m.transactionId),
      m.status, m.createdAt, JSON.stringify(m.payload ?? m.data).slice(0, 120)]));
  };
  return refresh;
};

pages.message = (root, [pid, txn]) => {
  root.append(el("h1", {}, "Message ", el("code", {}, txn)), el("div", { class: "cards", id: "message-cards" }),
    el("h2", {}, "Payload"), el("pre", { id: "message-payload" }), el("h2", {}, "Traces"), el("div", { id: "t-msg-traces" }));
  const traces = new Table(root.querySelector("#t-msg-traces"), ["When", "Type", "Names", "Data"]);
  return async () => {
    const [m, tr] = await Promise.all([api(`/api/v1/messages/${enc(pid)}/${enc(txn)}`),
      api(`/api/v1/traces/${enc(pid)}/${enc(txn)}`).catch(() => ({ traces: [] }))]);
    cards(root.querySelector("#message-cards"), [["queue", "Queue", m.queue], ["partition", "Partition", m.partition],
      ["status", "Status", m.status ?? "–"], ["offset", "Offset", fmtNum(m.offset)], ["created", "Created", m.createdAt]]);
    root.querySelector("#message-payload").textContent = json(m.payload ?? m.data);
    traces.set((tr.traces || []).map((e) => [e.createdAt ?? e.created_at, e.eventType ?? e.event_type,
      JSON.stringify(e.traceNames ?? e.trace_names ?? []), JSON.stringify(e.data)]));
  };
};

pages.groups = (root) => {
  root.append(el("h1", {}, "Consumer groups"),
    el("div", { class: "panel" }, el("h2", {}, "Seek"),
      el("form", { id: "seek-form", class: "row" },
        el("select", { id: "seek-target" }),
        el("select", { id: "seek-where" }, el("option", { value: "end" }, "to the end"), el("option", { value: "time" }, "to a time")),
        el("input", { id: "seek-time", type: "datetime-local", step: "1" }),
        el("button", { class: "primary", type: "submit" }, "Seek"))),
    el("div", { id: "t-groups" }));
  const t = new Table(root.querySelector("#t-groups"),
    ["Group", "Queue", "Lag (messages)", "Max time lag (s)", "Partitions behind", "Cursors", "Active leases", "Subscription"]);
  const target = root.querySelector("#seek-target");
  root.querySelector("#seek-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const [group, queue] = JSON.parse(target.value || "[]");
    if (!group) return;
    const where = root.querySelector("#seek-where").value;
    const time = root.querySelector("#seek-time").value;
    const body = where === "end" ? { toEnd: true } : { timestamp: new Date(time).toISOString() };
    try {
      await api(`/api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/seek`, { method: "POST", body });
      say(root, `moved ${group} on ${queue} ${where === "end" ? "to the end" : `to ${body.timestamp}`}`);
      await refresh();
    } catch (e) {
      if (!(e instanceof Unauthorized)) say(root, e.message, true);
    }
  });
  const refresh = async () => {
    const gs = await api("/api/v1/consumer-groups");
    t.set(gs.map((g) => [g.name, link(`#/queue/${enc(g.queueName)}`, g.queueName), g.totalLag, g.maxTimeLag,
      g.partitionsWithLag, g.partitionCursors, g.activeLeases, g.subscriptionTimestamp ?? "–"]));
    const opts = gs.map((g) => JSON.stringify([g.name, g.queueName]));
    if (opts.join() !== [...target.options].map((o) => o.value).join()) {
      const keep = target.value;
      target.replaceChildren(...gs.map((g) => el("option", { value: JSON.stringify([g.name, g.queueName]) }, `${g.name} on ${g.queueName}`)));
      if (opts.includes(keep)) target.value = keep;
    }
  };
  return refresh;
};

pages.dlq = (root) => {
  root.append(el("h1", {}, "Dead letters"),
    el("div", { class: "row panel" }, "Queue ", el("select", { id: "dlq-queue" }),
      el("button", { class: "danger", id: "dlq-purge" }, "Purge the listed"), el("span", { id: "dlq-progress", class: "muted" })),
    el("div", { id: "t-dlq" }), el("h2", {}, "Inspect"), el("pre", { id: "dlq-inspect" }, "Click a transaction to inspect it."));
  const t = new Table(root.querySelector("#t-dlq"), ["Queue", "Partition", "Transaction", "Error", "Retries", "Failed", "Group", ""]);
  const queueSel = root.querySelector("#dlq-queue");
  let listed = [];
  queueSel.addEventListener("change", () => refresh());
  onAction(root, {
    inspect: async (d) => {
      const m = listed.find((x) => x.partitionId === d.pid && x.transactionId === d.txn);
      root.querySelector("#dlq-inspect").textContent = json(m ?? await api(`/api/v1/messages/${enc(d.pid)}/${enc(d.txn)}`));
    },
    replay: async (d) => {
      await api(`/api/v1/messages/${enc(d.pid)}/${enc(d.txn)}/retry`, { method: "POST" });
      say(root, `replayed ${d.txn}`);
      await refresh();
    },
    delete: async (d) => {
      if (!confirm(`Delete dead letter ${d.txn}?`)) return;
      await api(`/api/v1/messages/${enc(d.pid)}/${enc(d.txn)}`, { method: "DELETE" });
      say(root, `deleted ${d.txn}`);
      await refresh();
    },
  });
  root.querySelector("#dlq-purge").addEventListener("click", async () => {
    const rows = [...listed];
    if (!rows.length || !confirm(`Delete all ${rows.length} listed dead letters?`)) return;
    const progress = root.querySelector("#dlq-progress");
    let done = 0;
    let failed = 0;
    for (const m of rows) {
      try {
        await api(`/api/v1/messages/${enc(m.partitionId)}/${enc(m.transactionId)}`, { method: "DELETE" });
        done += 1;
      } catch (e) {
        if (e instanceof Unauthorized) return;
        failed += 1;
      }
      progress.textContent = `purged ${done}/${rows.length}${failed ? `, ${failed} failed` : ""}`;
    }
    await refresh();
  });
  const refresh = async () => {
    const qs = await api("/api/v1/resources/queues?limit=1000");
    const names = qs.queues.filter((q) => q.deadLetterRows > 0 || q.name === queueSel.value).map((q) => q.name);
    if (names.join() !== [...queueSel.options].map((o) => o.value).join()) {
      const keep = queueSel.value;
      queueSel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
      if (names.includes(keep)) queueSel.value = keep;
    }
    if (!queueSel.value) {
      listed = [];
      t.set([]);
      return;
    }
    const r = await api(`/api/v1/dlq?queue=${enc(queueSel.value)}&limit=1000`);
    listed = r.messages;
    t.set(listed.map((m) => [m.queue, m.partition, button("inspect", m.transactionId, { pid: m.partitionId, txn: m.transactionId }, "linkish"),
      m.errorMessage ?? "", m.retryCount, m.failedAt, m.consumerGroup,
      html(`${buttonHtml("replay", "Replay", { pid: m.partitionId, txn: m.transactionId })} ${buttonHtml("delete", "Delete", { pid: m.partitionId, txn: m.transactionId }, "danger")}`)]));
  };
  return refresh;
};

pages.kv = (root) => {
  root.append(el("h1", {}, "Key/value"),
    el("div", { class: "row panel" }, "Namespace ", el("select", { id: "kv-ns" }), "Prefix ", el("input", { id: "kv-prefix", placeholder: "key prefix" })),
    el("h2", {}, "Rows"), el("div", { id: "t-kv" }), el("h2", {}, "Namespaces"), el("div", { id: "t-kv-ns" }));
  const rows = new Table(root.querySelector("#t-kv"), ["Key", "Value", "Version", "Updated", "Expires"]);
  const spaces = new Table(root.querySelector("#t-kv-ns"), ["Namespace", "Rows"]);
  const ns = root.querySelector("#kv-ns");
  const prefix = root.querySelector("#kv-prefix");
  ns.addEventListener("change", () => refresh());
  prefix.addEventListener("input", () => refresh());
  const refresh = async () => {
    const r = await api("/api/v1/resources/kv/namespaces");
    spaces.set(r.namespaces.map((n) => [n.namespace, n.rows]));
    const names = r.namespaces.map((n) => n.namespace);
    if (names.join() !== [...ns.options].map((o) => o.value).join()) {
      const keep = ns.value;
      ns.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
      if (names.includes(keep)) ns.value = keep;
    }
    if (!ns.value) return rows.set([]);
    const l = await api(`/api/v1/resources/kv/list?namespace=${enc(ns.value)}&prefix=${enc(prefix.value)}&limit=1000`);
    rows.set(l.rows.map((k) => [k.key, JSON.stringify(k.value), k.version, k.updatedAt, k.expiresAt ?? "never"]));
  };
  return refresh;
};

pages.timers = (root) => {
  root.append(el("h1", {}, "Timers"), el("div", { id: "t-timer-queues" }),
    el("h2", {}, "Pending"), el("div", { id: "t-timers-pending" }), el("h2", {}, "Failed"), el("div", { id: "t-timers-failed" }));
  const queues = new Table(root.querySelector("#t-timer-queues"), ["Queue", "Pending", "Failed"]);
  const pending = new Table(root.querySelector("#t-timers-pending"), ["Queue", "Timer", "Partition", "Fires at", "Attempts"]);
  const failed = new Table(root.querySelector("#t-timers-failed"), ["Queue", "Timer", "Partition", "Last try", "Attempts", "Error", ""]);
  onAction(root, {
    "retry-timer": async (d) => {
      await api("/api/v1/timers", { method: "POST", body: { operations: [{ op: "retry", queue: d.queue, timerKey: d.key }] } });
      say(root, `retried ${d.key}`);
      await refresh();
    },
  });
  const refresh = async () => {
    const r = await api("/api/v1/resources/timers");
    queues.set(r.queues.map((q) => [q.queue, q.pending, q.failed]));
    const lists = await Promise.all(r.queues.map((q) => api(`/api/v1/timers/${enc(q.queue)}?limit=1000`)));
    const all = lists.flatMap((l) => l.rows);
    pending.set(all.filter((x) => x.state !== "failed").map((x) => [x.queue, x.timerKey, x.partition, x.deliverAt, x.attempts]));
    failed.set(all.filter((x) => x.state === "failed").map((x) => [x.queue, x.timerKey, x.partition, x.updatedAt, x.attempts,
      x.error?.message ?? x.error?.code ?? "", button("retry-timer", "Retry", { queue: x.queue, key: x.timerKey })]));
  };
  return refresh;
};

pages.jobs = (root) => {
  root.append(el("h1", {}, "Jobs"), el("div", { id: "t-job-queues" }),
    el("div", { class: "row panel" }, "Queue ", el("select", { id: "job-queue" }), "State ",
      el("select", { id: "job-state" }, ...["", "pending", "leased", "completed", "failed"].map((s) => el("option", { value: s }, s || "any")))),
    el("div", { class: "cards", id: "job-stats" }), el("div", { id: "t-jobs" }));
  const queues = new Table(root.querySelector("#t-job-queues"), ["Queue", "Scopes", "Pending", "Leased", "Finished"]);
  const jobs = new Table(root.querySelector("#t-jobs"), ["Id", "Scope", "State", "Attempts", "Available", "Error", "Payload", ""]);
  const qSel = root.querySelector("#job-queue");
  const sSel = root.querySelector("#job-state");
  qSel.addEventListener("change", () => refresh());
  sSel.addEventListener("change", () => refresh());
  onAction(root, {
    "retry-job": async (d) => {
      const o = { op: "retry", queue: d.queue, id: d.id };
      if (d.scope) o.scope = d.scope;
      await api("/api/v1/jobs", { method: "POST", body: { operations: [o] } });
      say(root, `retried ${d.id}`);
      await refresh();
    },
  });
  const refresh = async () => {
    const r = await api("/api/v1/resources/jobs");
    queues.set(r.queues.map((q) => [q.queue, q.scopes, q.pending, q.leased, q.finished]));
    const names = r.queues.map((q) => q.queue);
    if (names.join() !== [...qSel.options].map((o) => o.value).join()) {
      const keep = qSel.value;
      qSel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
      if (names.includes(keep)) qSel.value = keep;
    }
    if (!qSel.value) return jobs.set([]);
    const st = sSel.value ? `&state=${enc(sSel.value)}` : "";
    const [scan, stats] = await Promise.all([api(`/api/v1/jobs/${enc(qSel.value)}?limit=1000${st}`), api(`/api/v1/jobs/${enc(qSel.value)}/stats`)]);
    cards(root.querySelector("#job-stats"), [["pending", "Pending", fmtNum(stats.counts.pending)], ["leased", "Leased", fmtNum(stats.counts.leased)],
      ["completed", "Completed", fmtNum(stats.counts.completed)], ["failed", "Failed", fmtNum(stats.counts.failed)],
      ["ready", "Ready now", fmtNum(stats.readyCount)]]);
    jobs.set(scan.rows.map((j) => [j.id, j.scope, j.state, j.attempts, j.availableAt, j.error ? JSON.stringify(j.error) : "",
      JSON.stringify(j.payload).slice(0, 80), j.state === "failed" ? button("retry-job", "Retry", { queue: j.queue, id: j.id, scope: j.scope }) : ""]));
  };
  return refresh;
};

pages.locks = (root) => {
  root.append(el("h1", {}, "Locks and semaphores"), el("div", { id: "t-locks" }));
  const t = new Table(root.querySelector("#t-locks"), ["Lock", "Slot", "Owner", "Token", "Since", "Renewed", "Expires"]);
  return async () => {
    const r = await api("/api/v1/resources/locks");
    t.set(r.locks.flatMap((l) => l.holders.map((h) => [l.name, h.slot, h.owner ?? "–", h.token, h.since ?? "–", h.renewedAt, h.expiresAt ?? "never"])));
  };
};

pages.traces = (root) => {
  root.append(el("h1", {}, "Traces"), el("h2", {}, "Trace names"), el("div", { id: "t-trace-names" }),
    el("h2", { id: "trace-title" }, "Events"), el("div", { id: "t-traces" }));
  const names = new Table(root.querySelector("#t-trace-names"), ["Name", "Events", ""]);
  const events = new Table(root.querySelector("#t-traces"), ["When", "Queue", "Transaction", "Type", "Data"]);
  let chosen = null;
  onAction(root, { "show-trace": async (d) => { chosen = d.name; await refresh(); } });
  const refresh = async () => {
    const r = await api("/api/v1/traces/names?limit=1000");
    const rows = r.trace_names || [];
    names.set(rows.map((n) => {
      const name = typeof n === "string" ? n : (n.trace_name ?? n.name);
      return [name, n.event_count ?? n.count ?? "", button("show-trace", "Show", { name })];
    }));
    if (!chosen) return events.set([]);
    root.querySelector("#trace-title").textContent = `Events of ${chosen}`;
    const t = await api(`/api/v1/traces/by-name/${enc(chosen)}?limit=1000`);
    events.set((t.traces || []).map((e) => [e.created_at ?? e.createdAt, e.queue_name ?? e.queue ?? "",
      link(`#/message/${enc(e.partition_id ?? e.partitionId)}/${enc(e.transaction_id ?? e.transactionId)}`, e.transaction_id ?? e.transactionId),
      e.event_type ?? e.eventType, JSON.stringify(e.data)]));
  };
  return refresh;
};

pages.cluster = (root) => {
  root.append(el("h1", {}, "Cluster"), el("div", { class: "cards", id: "cluster-cards" }),
    el("h2", {}, "Members"), el("div", { id: "t-members" }), el("h2", {}, "Storage"), el("div", { class: "cards", id: "storage-cards" }),
    el("p", { id: "cluster-note", class: "muted" }));
  const members = new Table(root.querySelector("#t-members"), ["Node", "Address", "Voter", "Leader", "Matched index", "Lag"]);
  return async () => {
    const health = await api("/health").catch((e) => e.data ?? Promise.reject(e));
    let c = health;
    try {
      c = await api("/api/v1/cluster");
      root.querySelector("#cluster-note").textContent = "";
    } catch (e) {
      if (e instanceof Unauthorized) throw e;
      root.querySelector("#cluster-note").textContent = `${e.message} (showing what /health says)`;
    }
    cards(root.querySelector("#cluster-cards"), [["node", "This node", c.nodeId], ["role", "Role", c.role],
      ["leader", "Leader", c.leader ?? "none"], ["term", "Term", fmtNum(c.term)], ["applied", "Applied index", fmtNum(c.appliedIndex)],
      ["commit", "Commit index", fmtNum(c.commitIndex)], ["last", "Last log index", fmtNum(c.lastLogIndex)], ["lag", "Lag", fmtNum(c.lag)],
      ["status", "Health", health.status]]);
    members.set((c.members || []).map((m) => [m.id, m.addr, m.voter ? "yes" : "no", m.leader ? "yes" : "", m.matchedIndex ?? "–", m.lag ?? "–"]));
    cards(root.querySelector("#storage-cards"), [["disk", "Disk used", health.disk ? `${health.disk.usedPct}%` : "–"],
      ["full", "Refusing writes", health.storageFull || health.disk?.full ? "yes" : "no"],
      ["error", "Storage error", health.storageError ?? "none"], ["version", "Version", health.version]]);
  };
};

// ------------------------------------------------------------------ shell

let stopPolling = () => {};
let generation = 0;

async function checkBanner() {
  try {
    const resp = await fetch("/health");
    const h = await resp.json();
    const banner = document.getElementById("banner");
    const reasons = [];
    if (h.storageFull || h.disk?.full) reasons.push(`the disk is full (${h.disk?.usedPct}% used): this node refuses writes`);
    if (h.storageError) reasons.push(`storage error: ${h.storageError}`);
    if (h.leader === null || h.leader === undefined) reasons.push("no leader: writes are refused until one is elected");
    banner.hidden = reasons.length === 0;
    banner.textContent = reasons.join("; ");
  } catch {
    // The node is unreachable: the page's own refresh says so.
  }
}

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "overview").split("/").map(decodeURIComponent);
  const [name, ...args] = parts;
  const page = pages[name] ? name : "overview";
  for (const a of document.querySelectorAll("#nav a")) {
    const target = a.getAttribute("href").slice(2);
    a.classList.toggle("active", target === page || (page === "queue" || page === "partition" || page === "message") && target === "queues");
  }
  stopPolling();
  const gen = ++generation;
  const root = document.getElementById("page");
  root.replaceChildren();
  root.dataset.page = page;
  const refresh = pages[page](root, args);
  const live = document.getElementById("live");
  let timer = null;
  const tick = async () => {
    try {
      await refresh();
      if (gen !== generation) return;
      root.dataset.loaded = "1";
      live.textContent = `updated ${new Date().toLocaleTimeString()}`;
      live.classList.remove("error");
    } catch (e) {
      if (gen !== generation) return;
      if (!(e instanceof Unauthorized)) {
        live.textContent = e.message;
        live.classList.add("error");
      }
    }
    if (gen === generation) timer = setTimeout(tick, POLL_MS);
  };
  stopPolling = () => clearTimeout(timer);
  tick();
}

function showLogin(why) {
  document.getElementById("login-why").textContent = why;
  document.getElementById("login").hidden = false;
  document.getElementById("login-token").focus();
}

document.getElementById("login-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, document.getElementById("login-token").value.trim());
  document.getElementById("login").hidden = true;
  document.getElementById("logout").hidden = false;
  route();
});

document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(TOKEN_KEY);
  document.getElementById("logout").hidden = true;
  route();
});

document.getElementById("logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
window.addEventListener("hashchange", route);
route();
checkBanner();
setInterval(checkBanner, POLL_MS * 2);
