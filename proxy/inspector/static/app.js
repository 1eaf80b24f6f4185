// ctxproxy inspector: vanilla JS, no build step. Every piece of data is inserted with textContent
// (or as SVG attributes), never as HTML, so conversation content cannot inject markup.
"use strict";

const CATEGORIES = ["system", "anchors", "summaries", "fresh_tail", "tools", "free"];
const COLORS = {
  system: "#8e5bd0", anchors: "#d9a400", summaries: "#1f9bb5", fresh_tail: "#3aa757",
  tools: "#4a6fe0", free: "#e3e6eb",
};
const STATUS_COLORS = { raw: "#3aa757", summarised: "#1f9bb5", pinned: "#d9a400" };
const DEPTH_COLORS = ["#9fd6e2", "#5fb8cc", "#2b92ab", "#1b6f85", "#0f4d5d"];
const SVG_NS = "http://www.w3.org/2000/svg";

// ---------------------------------------------------------------------------------------------
// DOM helpers

function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  append(node, children);
  return node;
}

function setAttrs(node, attrs) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "onclick") node.addEventListener("click", value);
    else node.setAttribute(key, String(value));
  }
}

function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

function byId(id) { return document.getElementById(id); }

function fmtNum(n) { return n === null || n === undefined ? "-" : Number(n).toLocaleString("en-US"); }

function fmtTime(ts) {
  if (!ts) return "-";
  const d = new Date(ts * 1000);
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function shortId(id) { return id && id.length > 14 ? id.slice(0, 12) + "…" : id; }

function setStatus(text, isError) {
  const node = byId("status");
  node.textContent = text || "";
  node.className = "status" + (isError ? " error" : "");
}

// ---------------------------------------------------------------------------------------------
// API

async function api(path) {
  const resp = await fetch("/ui/api/" + path, { credentials: "same-origin",
                                                headers: { Accept: "application/json" } });
  if (resp.status === 401) {
    window.location.assign("/ui/login");
    throw new Error("signed out");
  }
  const body = await resp.json();
  if (!resp.ok) throw new Error((body.error && body.error.message) || ("HTTP " + resp.status));
  return body;
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------------------------------------
// Routing: #/ (list), #/t/<tenant>/c/<conversation>

const state = { conversations: [], current: null };

async function route() {
  const parts = window.location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  closeExpand();
  try {
    if (parts[0] === "t" && parts[2] === "c" && parts[3]) await showConversation(parts[1], parts[3]);
    else await showList();
    setStatus("");
  } catch (err) {
    setStatus(err.message, true);
  }
}

function crumbs(items) {
  const nav = clear(byId("crumbs"));
  items.forEach((item, i) => {
    if (i) nav.appendChild(h("span", { class: "sep" }, "/"));
    nav.appendChild(item.href ? h("a", { href: item.href }, item.text) : h("span", {}, item.text));
  });
}

// ---------------------------------------------------------------------------------------------
// Conversation list

async function showList() {
  setStatus("Loading conversations…");
  const data = await api("conversations");
  state.conversations = data.conversations;
  byId("conversation-view").hidden = true;
  byId("list-view").hidden = false;
  crumbs([{ text: "conversations" }]);
  byId("tenant-summary").textContent =
    `${data.conversations.length} conversations across ${data.tenants.length} tenants ` +
    "(tenants are shown as their hash id).";
  renderListRows();
}

function renderListRows() {
  const needle = byId("filter").value.trim().toLowerCase();
  const body = clear(byId("conversation-table").tBodies[0]);
  const rows = state.conversations.filter((c) => !needle ||
    [c.id, c.model, c.tenant_id, c.external_id || ""].some((v) => v.toLowerCase().includes(needle)));
  for (const c of rows) {
    const href = `#/t/${enc(c.tenant_id)}/c/${enc(c.id)}`;
    body.appendChild(h("tr", { "data-testid": "conversation-row", "data-conversation-id": c.id },
      h("td", {}, h("a", { href, "data-testid": `open-${c.id}` }, c.id)),
      h("td", { class: "mono", title: c.tenant_id }, shortId(c.tenant_id)),
      h("td", {}, c.model),
      h("td", { class: "num" }, fmtNum(c.message_count)),
      h("td", { class: "num" }, fmtNum(c.summary_count)),
      h("td", {}, c.external_id || ""),
      h("td", {}, fmtTime(c.updated_at))));
  }
  if (!rows.length) body.appendChild(h("tr", {}, h("td", { colspan: 7, class: "muted" }, "No conversations.")));
}

// ---------------------------------------------------------------------------------------------
// Conversation view

async function showConversation(tenant, id) {
  setStatus("Loading conversation…");
  const d = await api(`tenants/${enc(tenant)}/conversations/${enc(id)}`);
  state.current = { tenant, data: d };
  byId("list-view").hidden = true;
  byId("conversation-view").hidden = false;
  crumbs([{ text: "conversations", href: "#/" }, { text: shortId(tenant) }, { text: id }]);
  renderHeader(d);
  drawOccupancy(byId("occupancy-chart"), d.occupancy);
  renderLegend(d.occupancy);
  byId("prefix-stability").textContent = prefixText(d.prefix_stability);
  byId("cost").textContent = costText(d.cost);
  drawSummaryMap(byId("summary-map"), d);
  renderSummaryTree(byId("summary-tree"), d.summaries);
  renderAnchors(d.anchors);
  renderViewItems(d.view);
  renderTimeline(d.timeline);
  renderEvents(d.events);
}

function renderHeader(d) {
  const c = d.conversation, t = d.totals;
  byId("conv-title").textContent = c.id;
  byId("conv-subtitle").textContent = `${c.model} · tenant ${c.tenant_id}`;
  const rows = [
    ["Messages", `${fmtNum(t.messages)} (${fmtNum(t.message_tokens)} tokens)`],
    ["Raw / summarised / pinned", `${t.raw} / ${t.summarised} / ${t.pinned}`],
    ["Summaries", `${t.summaries} · depth ≤ ${d.summaries.max_depth ?? "-"} · ${d.summaries.generations} gen.`],
    ["Anchors", `${t.anchors_active} active, ${t.anchors_superseded} superseded`],
    ["View", d.view ? `version ${d.view.version}, covers seq 0..${d.view.covered_through_seq}` : "none yet"],
    ["External id", c.external_id || "-"],
    ["Forked from", c.forked_from || "-"],
    ["Created", fmtTime(c.created_at)],
    ["Last update", fmtTime(c.updated_at)],
  ];
  const dl = clear(byId("conv-meta"));
  for (const [k, v] of rows) dl.append(h("div", {}, h("dt", {}, k), h("dd", {}, v)));
}

function prefixText(p) {
  if (p.rate === null) return "Prefix stability: n/a (fewer than two forwarded requests).";
  return `Prefix stability: ${p.stable}/${p.comparable} consecutive requests extended the previous ` +
         `one (${(100 * p.rate).toFixed(1)}%). Dashed red markers: the prefix changed (cache miss).`;
}

function costText(c) {
  if (!c.requests) return "";
  const full = c.full_history_billed_estimate, saved = c.saved_estimate;
  const share = full ? ` (${(100 * Math.abs(saved) / full).toFixed(1)}%)` : "";
  const verdict = saved >= 0 ? `compaction saved ${fmtNum(saved)}${share}`
                             : `compaction cost ${fmtNum(-saved)} more${share}`;
  return `Cost: ${fmtNum(c.prefix_tokens)} tokens in prefixes shared with the previous request; ` +
         `provider cache reads ${fmtNum(c.cache_read_tokens)} (${c.cache_reads_reported} of ${c.requests} ` +
         `replies reported); billed input (estimate) ${fmtNum(c.billed_input_estimate)}, full history ` +
         `${fmtNum(full)}: ${verdict}.`;
}

// ---------------------------------------------------------------------------------------------
// (a) occupancy: stacked bars per forwarded request

function drawOccupancy(container, occ) {
  clear(container);
  const series = occ.series;
  if (!series.length) { container.appendChild(h("p", { class: "muted" }, "No forwarded request yet.")); return; }
  const W = 960, H = 260, L = 56, R = 12, T = 18, B = 34;
  const maxY = Math.max(1, ...series.map((p) => Math.max(p.budget, p.used + p.occupancy.free)));
  const step = (W - L - R) / series.length;
  const bw = Math.max(1, Math.min(48, step * 0.78));
  const y = (v) => T + (H - T - B) * (1 - v / maxY);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "occupancy", role: "img",
                            "aria-label": "Budget occupancy per forwarded request" });
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const v = maxY * f;
    root.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "gridline" }),
                svg("text", { x: L - 6, y: y(v) + 4, class: "axis", "text-anchor": "end" }, fmtNum(Math.round(v))));
  }
  series.forEach((p, i) => root.appendChild(occupancyBar(p, L + i * step + (step - bw) / 2, bw, y)));
  const every = Math.max(1, Math.ceil(series.length / 20));
  series.forEach((p, i) => {
    if (i % every === 0 || i === series.length - 1) {
      root.appendChild(svg("text", { x: L + i * step + step / 2, y: H - B + 16, class: "axis",
                                     "text-anchor": "middle" }, String(p.request)));
    }
  });
  root.appendChild(svg("text", { x: (L + W - R) / 2, y: H - 4, class: "axis", "text-anchor": "middle" },
                       "forwarded request #"));
  container.appendChild(root);
}

function occupancyBar(p, x, bw, y) {
  const g = svg("g", { "data-testid": "occupancy-bar", "data-request": p.request });
  let acc = 0;
  for (const cat of CATEGORIES) {
    const v = p.occupancy[cat] || 0;
    if (v > 0) {
      g.appendChild(svg("rect", { x, width: bw, y: y(acc + v), height: Math.max(0, y(acc) - y(acc + v)),
                                  fill: COLORS[cat], class: "seg" },
        svg("title", {}, `request ${p.request} · ${cat}: ${fmtNum(v)} tokens`)));
    }
    acc += v;
  }
  g.appendChild(svg("line", { x1: x - 2, x2: x + bw + 2, y1: y(p.budget), y2: y(p.budget), class: "budget" },
                    svg("title", {}, `budget ${fmtNum(p.budget)} tokens`)));
  if (p.extends_previous === false) {
    g.appendChild(svg("line", { x1: x - 1, x2: x - 1, y1: y(p.budget) - 6, y2: y(0), class: "prefix-break" },
                      svg("title", {}, `request ${p.request}: prefix changed (view v${p.view_version})`)));
  }
  g.appendChild(svg("title", {}, `request ${p.request} · view v${p.view_version} · forwarded ` +
    `${fmtNum(p.tokens_forwarded)} of ${fmtNum(p.tokens_received)} received · budget ${fmtNum(p.budget)}` +
    (p.compacted ? " · compacted" : "")));
  return g;
}

function renderLegend(occ) {
  const legend = clear(byId("occupancy-legend"));
  const latest = occ.latest;
  for (const cat of CATEGORIES) {
    const value = latest ? latest.occupancy[cat] : null;
    const pct = latest && latest.budget ? ` (${(100 * value / latest.budget).toFixed(1)}%)` : "";
    legend.appendChild(h("span", { class: "legend-item", "data-testid": `legend-${cat}` },
      h("span", { class: "swatch", style: null, "data-color": cat }), cat,
      latest ? h("b", {}, ` ${fmtNum(value)}${pct}`) : null));
  }
  legend.querySelectorAll(".swatch").forEach((s) => { s.style.background = COLORS[s.dataset.color]; });
  if (latest) legend.appendChild(h("span", { class: "muted" }, ` latest request #${latest.request}, budget ${fmtNum(latest.budget)}`));
}

// ---------------------------------------------------------------------------------------------
// (b) summary map (icicle over message seqs) and nested tree

function drawSummaryMap(container, d) {
  clear(container);
  const nodes = d.summaries.nodes, n = Math.max(1, d.timeline.length);
  const depths = nodes.length ? Math.max(...nodes.map((s) => s.depth)) + 1 : 0;
  const W = 960, L = 56, R = 12, rowH = 30, stripH = 16, T = 8;
  const H = T + depths * (rowH + 4) + stripH + 30;
  const x = (seq) => L + (W - L - R) * seq / n;
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "summary-map", role: "img",
                            "aria-label": "Summaries over message ranges" });
  for (let depth = 0; depth < depths; depth++) {
    const top = T + (depths - 1 - depth) * (rowH + 4);
    root.appendChild(svg("text", { x: L - 6, y: top + rowH / 2 + 4, class: "axis", "text-anchor": "end" }, `depth ${depth}`));
  }
  for (const s of nodes) root.appendChild(summaryBox(s, x, T + (depths - 1 - s.depth) * (rowH + 4), rowH));
  const stripTop = T + depths * (rowH + 4);
  for (const m of d.timeline) {
    root.appendChild(svg("rect", { x: x(m.seq), y: stripTop, width: Math.max(0.5, x(m.seq + 1) - x(m.seq) - 0.5),
                                   height: stripH, fill: STATUS_COLORS[m.status], "data-testid": "strip-message" },
      svg("title", {}, `seq ${m.seq} · ${m.role} · ${m.status}${m.summary_id ? " in " + m.summary_id : ""}`)));
  }
  root.appendChild(svg("text", { x: L - 6, y: stripTop + 12, class: "axis", "text-anchor": "end" }, "msgs"));
  const ticks = Math.min(10, n);
  for (let i = 0; i <= ticks; i++) {
    const seq = Math.round(i * n / ticks);
    root.appendChild(svg("text", { x: x(seq), y: stripTop + stripH + 14, class: "axis", "text-anchor": "middle" }, String(seq)));
  }
  if (d.view) {
    const cx = x(d.view.covered_through_seq + 1);
    root.appendChild(svg("line", { x1: cx, x2: cx, y1: T, y2: stripTop + stripH, class: "view-edge" },
      svg("title", {}, `view v${d.view.version} covers seq 0..${d.view.covered_through_seq}; newer messages are raw`)));
  }
  container.appendChild(root);
}

function summaryBox(s, x, top, rowH) {
  const x0 = x(s.first_seq), x1 = x(s.last_seq + 1);
  const g = svg("g", { class: `sbox ${s.status}`, "data-testid": `summary-box-${s.id}`, tabindex: 0,
                       role: "button", onclick: () => openExpand(s.id) });
  g.appendChild(svg("rect", { x: x0 + 1, y: top, width: Math.max(2, x1 - x0 - 2), height: rowH, rx: 4,
                              fill: DEPTH_COLORS[Math.min(s.depth, DEPTH_COLORS.length - 1)] }));
  if (x1 - x0 > 34) {
    const dark = s.depth < 2;  // light fills at shallow depths get dark text
    g.appendChild(svg("text", { x: (x0 + x1) / 2, y: top + rowH / 2 + 4, "text-anchor": "middle",
                                class: "sbox-label" + (dark ? " dark" : "") },
                      x1 - x0 > 110 ? `g${s.generation} · ${s.first_seq}-${s.last_seq}` : `g${s.generation}`));
  }
  g.appendChild(svg("title", {}, `${s.id} · ${s.kind} depth ${s.depth} · generation ${s.generation} · ` +
    `seq ${s.first_seq}-${s.last_seq} · ${fmtNum(s.token_count)} tokens · ${s.level} · ${s.status}`));
  g.addEventListener("keydown", (e) => { if (e.key === "Enter") openExpand(s.id); });
  return g;
}

function renderSummaryTree(container, summaries) {
  clear(container);
  const byId_ = Object.fromEntries(summaries.nodes.map((n) => [n.id, n]));
  if (!summaries.nodes.length) { container.appendChild(h("p", { class: "muted" }, "No summaries yet.")); return; }
  const build = (id) => {
    const n = byId_[id];
    if (!n) return h("li", { class: "missing" }, `${id} (missing)`);
    return h("li", {},
      h("button", { type: "button", class: `node ${n.status}`, "data-testid": `summary-node-${n.id}`,
                    onclick: () => openExpand(n.id) },
        h("span", { class: "mono" }, n.id),
        h("span", { class: "tag" }, `${n.kind} d${n.depth} g${n.generation}`),
        ` seq ${n.first_seq}-${n.last_seq} · ${fmtNum(n.token_count)} tok · ${n.level} · ${n.model || "?"} @ ${n.prompt_version || "?"} · `,
        h("span", { class: `st ${n.status}` }, n.status)),
      n.children.length ? h("ul", {}, n.children.map(build)) :
        h("ul", {}, h("li", { class: "muted" }, `${n.source_seqs.length} messages (seq ${n.first_seq}-${n.last_seq})`)));
  };
  container.appendChild(h("ul", { class: "tree-root" }, summaries.roots.map(build)));
}

// ---------------------------------------------------------------------------------------------
// (c) timeline, (d) anchors, view, (e) events

function renderTimeline(rows) {
  const body = clear(byId("timeline").tBodies[0]);
  for (const m of rows) {
    body.appendChild(h("tr", { class: `st-${m.status}`, "data-testid": "timeline-row", "data-seq": m.seq, "data-status": m.status },
      h("td", { class: "num" }, String(m.seq)),
      h("td", {}, m.role + (m.source === "reply" ? " (reply)" : "")),
      h("td", { class: "num" }, fmtNum(m.token_count)),
      h("td", {}, h("span", { class: `badge ${m.status}` }, m.status)),
      h("td", {}, m.summary_id ? h("button", { type: "button", class: "link", onclick: () => openExpand(m.summary_id) },
        `${m.summary_id} (d${m.summary_depth})`) : ""),
      h("td", { class: "preview" }, m.preview)));
  }
}

function renderAnchors(anchors) {
  const body = clear(byId("anchors-table").tBodies[0]);
  const sorted = [...anchors].sort((a, b) => (a.kind + a.key).localeCompare(b.kind + b.key) || a.id - b.id);
  for (const a of sorted) {
    const active = a.status === "active";
    const value = active ? h("span", { class: "value" }, a.value) :
      h("span", {}, h("del", { class: "value superseded", "data-testid": "anchor-superseded" }, a.value),
        h("span", { class: "muted" }, ` → #${a.superseded_by}${a.superseded_by_value ? " " + a.superseded_by_value : ""}`));
    body.appendChild(h("tr", { class: active ? "" : "superseded", "data-testid": "anchor-row", "data-status": a.status },
      h("td", {}, a.kind), h("td", {}, a.key), h("td", {}, value),
      h("td", { class: "num" }, a.source_seq === null ? "-" : String(a.source_seq))));
  }
  if (!anchors.length) body.appendChild(h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No anchors.")));
}

function renderViewItems(view) {
  const box = clear(byId("view-items"));
  if (!view) { box.appendChild(h("p", { class: "muted" }, "No compacted view yet: the provider sees the raw history.")); return; }
  box.appendChild(h("p", { class: "muted" }, `Version ${view.version}: what replaces seq 0..${view.covered_through_seq}, in order; newer messages follow raw.`));
  box.appendChild(h("div", { class: "chips" }, view.items.map((it) => it.kind === "summary" ?
    h("button", { type: "button", class: "chip summary", onclick: () => openExpand(it.ref) }, it.ref) :
    h("span", { class: "chip message" }, `msg ${it.ref}`))));
}

function renderEvents(events) {
  const body = clear(byId("events-table").tBodies[0]);
  for (const e of events) {
    const sources = [e.source_message_ids.length ? `${e.source_message_ids.length} msgs` : "",
                     e.source_summary_ids.length ? `${e.source_summary_ids.length} summaries` : ""]
      .filter(Boolean).join(", ");
    const sourceIds = [...e.source_message_ids.map((m) => `msg ${m}`), ...e.source_summary_ids].join(", ");
    body.appendChild(h("tr", { class: `outcome-${e.outcome}`, "data-testid": "event-row" },
      h("td", {}, String(e.id ?? "-")), h("td", { class: "nowrap" }, fmtTime(e.created_at)), h("td", {}, e.trigger),
      h("td", { class: "nowrap" }, `${e.tier} / ${e.level}`), h("td", {}, h("span", { class: `badge ${e.outcome}` }, e.outcome)),
      h("td", {}, e.summary_id ? h("button", { type: "button", class: "link", onclick: () => openExpand(e.summary_id) }, e.summary_id) : "-"),
      h("td", { class: "nowrap" }, e.summary_id ? `d${e.depth} / g${e.generation}` : "-"),
      h("td", { class: "nowrap", title: sourceIds || null }, sources || "-"),
      h("td", { class: "num nowrap" }, `${fmtNum(e.tokens_before)} → ${fmtNum(e.tokens_after)}`),
      h("td", {}, e.verification), h("td", {}, e.rejected_facts.join(", ")),
      h("td", {}, `+${e.anchors_added.length}/-${e.anchors_superseded.length}`),
      h("td", {}, `${e.summarizer_model} @ ${e.prompt_version || "-"}`),
      h("td", { class: "mono small" }, JSON.stringify(e.summarizer_settings)),
      h("td", { class: "num" }, Number(e.duration_ms).toFixed(0)), h("td", { class: "error-text" }, e.error || "")));
  }
  if (!events.length) body.appendChild(h("tr", {}, h("td", { colspan: 16, class: "muted" }, "No compaction events.")));
}

// ---------------------------------------------------------------------------------------------
// (f) expanding a summary down to its original messages

async function openExpand(summaryId) {
  if (!state.current) return;
  const panel = byId("expand-panel");
  byId("expand-title").textContent = `Summary ${summaryId}`;
  const body = clear(byId("expand-body"));
  body.appendChild(h("p", { class: "muted" }, "Loading…"));
  panel.hidden = false;
  try {
    const tree = await api(`tenants/${enc(state.current.tenant)}/summaries/${enc(summaryId)}/expand`);
    clear(body).appendChild(expandNode(tree, true));
  } catch (err) {
    clear(body).appendChild(h("p", { class: "error" }, err.message));
  }
}

function expandNode(node, open) {
  if (node.type === "message") {
    return h("div", { class: `msg role-${node.role}`, "data-testid": "expanded-message", "data-seq": node.seq },
      h("div", { class: "msg-head" }, `seq ${node.seq} · ${node.role}${node.pinned ? " · pinned" : ""} · ${fmtNum(node.token_count)} tok` +
        (node.tool_call_id ? ` · result of ${node.tool_call_id}` : "")),
      h("pre", { class: "msg-text" }, node.text || "(no text)"));
  }
  const details = h("details", { class: "exp-summary", "data-testid": `expanded-summary-${node.id}`, open: open ? "" : null },
    h("summary", {}, h("span", { class: "mono" }, node.id),
      ` ${node.kind} depth ${node.depth} · generation ${node.generation} · seq ${node.first_seq}-${node.last_seq} · ` +
      `${fmtNum(node.token_count)} tok · ${node.level} · ${node.model} @ ${node.prompt_version}`),
    h("pre", { class: "summary-text" }, node.content),
    h("div", { class: "sources" }, node.sources.map((s) => expandNode(s, true))));
  return details;
}

function closeExpand() { byId("expand-panel").hidden = true; }

// ---------------------------------------------------------------------------------------------

document.addEventListener("DOMContentLoaded", () => {
  byId("filter").addEventListener("input", renderListRows);
  byId("expand-close").addEventListener("click", closeExpand);
  document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeExpand(); });
  window.addEventListener("hashchange", route);
  route();
});
