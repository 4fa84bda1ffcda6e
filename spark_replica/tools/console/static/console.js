// The replog console page: polls the console's JSON and redraws. Read-only, no libraries.
"use strict";

const POLL_MS = 1500;
const PARTITIONS_PER_PAGE = 25;
const FETCH_TIMEOUT_MS = 5000;
const CHART_WIDTH = 340;
const CHART_HEIGHT = 140;
const SVG_NS = "http://www.w3.org/2000/svg";

// Element builder: text goes in through textContent, never as HTML (topic names are data).
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

function bytes(perSecond) {
  const units = ["B/s", "KB/s", "MB/s", "GB/s"];
  let value = perSecond;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(value < 10 && unit > 0 ? 1 : 0)} ${units[unit]}`;
}

function messages(perSecond) {
  return `${perSecond < 10 ? perSecond.toFixed(1) : Math.round(perSecond)} msg/s`;
}

const FORMAT = { bytes_in: bytes, bytes_out: bytes, messages_in: messages };

function show(id, text) {
  const node = document.getElementById(id);
  node.hidden = !text;
  node.textContent = text || "";
}

function card(label, value, bad, id) {
  return el("div", { class: bad ? "card bad" : "card", id },
    el("span", { class: "value" }, value), el("span", { class: "label" }, label));
}

function renderSummary(doc) {
  const s = doc.summary;
  const controller = doc.controller === null ? "none" : `broker ${doc.controller}`;
  document.getElementById("summary").replaceChildren(
    card("brokers alive", `${s.brokers_alive} / ${s.brokers}`, s.brokers_alive < s.brokers,
      "summary-brokers"),
    card("controller", controller, doc.controller === null, "summary-controller"),
    card("topics", s.topics, false, "summary-topics"),
    card("partitions", s.partitions, false, "summary-partitions"),
    card("under-replicated", s.under_replicated, s.under_replicated > 0,
      "summary-under-replicated"),
    card("offline", s.offline, s.offline > 0, "summary-offline"),
    card("leader not preferred", s.leader_not_preferred, s.leader_not_preferred > 0,
      "summary-not-preferred"),
  );
}

function clock(ms) {
  return new Date(ms).toLocaleTimeString();
}

function renderBrokers(doc, rates) {
  const perBroker = (rates && rates.brokers) || {};
  const metrics = (rates && rates.broker_metrics) || {};
  const rows = doc.brokers.map((b) => {
    const reach = metrics[String(b.id)];
    const unreachable = reach && reach.stale && reach.stale_since_ms !== null;
    const r = unreachable ? null : perBroker[String(b.id)];
    const rate = (series) => (r ? FORMAT[series](r[series]) : "–");
    return el("tr", {
      "data-broker": b.id,
      "data-alive": b.alive,
      "data-controller": b.controller,
      class: b.alive ? null : "dead",
    },
    el("td", {}, b.id),
    el("td", {}, b.host === null ? "unknown" : `${b.host}:${b.port}`),
    el("td", { "data-unreachable": unreachable ? "true" : "false" },
      el("span", { class: b.alive ? "badge alive" : "badge dead" }, b.alive ? "alive" : "dead"),
      unreachable
        ? el("span", { class: "unreachable", title: reach.stale_detail || "" },
          `${reach.stale_reason} since ${clock(reach.stale_since_ms)}`)
        : ""),
    el("td", {}, b.controller ? el("span", { class: "badge controller" }, "controller") : ""),
    el("td", { class: "num" }, rate("bytes_in")),
    el("td", { class: "num" }, rate("bytes_out")),
    el("td", { class: "num" }, rate("messages_in")));
  });
  document.querySelector("#brokers tbody").replaceChildren(...rows);
}

function partitionState(p) {
  if (p.offline) return "offline";
  if (p.under_replicated) return "under-replicated";
  return "ok";
}

// The partition table's view: the topic filter and the page shown (kept across polls).
const partitionView = { filter: "", page: 0, rows: [] };

function replicasCell(p) {
  const dead = new Set(p.dead_replicas);
  return el("td", { "data-dead-replicas": p.dead_replicas.join(",") },
    ...p.replicas.map((r) => el("span", dead.has(r)
      ? { class: "replica dead", title: `broker ${r} is not alive` }
      : { class: "replica" }, dead.has(r) ? `${r} (dead)` : r)));
}

function leaderCell(p) {
  const cell = el("td", { class: "num" }, p.leader === null ? "none" : p.leader);
  if (p.leader_not_preferred) {
    cell.append(el("span", { class: "badge not-preferred",
      title: `the preferred leader is broker ${p.preferred_leader}` },
    `not preferred (preferred ${p.preferred_leader})`));
  }
  return cell;
}

function partitionRow(topic, p) {
  const state = partitionState(p);
  return el("tr", {
    "data-topic": topic,
    "data-partition": p.partition,
    "data-leader": p.leader === null ? "" : p.leader,
    "data-isr": p.isr.join(","),
    "data-hw": p.high_watermark === null ? "" : p.high_watermark,
    "data-state": state,
    "data-not-preferred": p.leader_not_preferred,
    class: [p.under_replicated && "under-replicated", p.offline && "offline"]
      .filter(Boolean).join(" ") || null,
  },
  el("td", {}, topic),
  el("td", { class: "num" }, p.partition),
  leaderCell(p),
  replicasCell(p),
  el("td", {}, p.isr.join(", ")),
  el("td", { class: "num" }, p.high_watermark === null ? "?" : p.high_watermark),
  el("td", {}, state));
}

function renderPartitions(doc) {
  partitionView.rows = doc.topics.flatMap((t) => t.partitions.map((p) => [t.topic, p]));
  drawPartitions();
}

function drawPartitions() {
  const { filter, rows } = partitionView;
  const matching = rows.filter(([topic]) => topic.toLowerCase().includes(filter));
  const pages = Math.max(1, Math.ceil(matching.length / PARTITIONS_PER_PAGE));
  partitionView.page = Math.min(partitionView.page, pages - 1);
  const first = partitionView.page * PARTITIONS_PER_PAGE;
  const shown = matching.slice(first, first + PARTITIONS_PER_PAGE);
  document.querySelector("#partitions tbody").replaceChildren(
    ...shown.map(([topic, p]) => partitionRow(topic, p)));
  const pageNote = document.getElementById("partitions-page");
  pageNote.textContent = matching.length
    ? `${first + 1}–${first + shown.length} of ${matching.length} partitions` +
      ` (page ${partitionView.page + 1} of ${pages})`
    : "";
  pageNote.dataset.page = String(partitionView.page + 1);
  pageNote.dataset.pages = String(pages);
  pageNote.dataset.matching = String(matching.length);
  document.getElementById("partitions-previous").disabled = partitionView.page === 0;
  document.getElementById("partitions-next").disabled = partitionView.page >= pages - 1;
  const none = document.getElementById("no-topics");
  none.hidden = matching.length > 0;
  none.textContent = rows.length ? `No topic matches "${filter}".` : "No topics yet.";
}

function setUpPartitionTable() {
  document.getElementById("partition-filter").addEventListener("input", (event) => {
    partitionView.filter = event.target.value.trim().toLowerCase();
    partitionView.page = 0;
    drawPartitions();
  });
  document.getElementById("partitions-previous").addEventListener("click", () => {
    partitionView.page = Math.max(0, partitionView.page - 1);
    drawPartitions();
  });
  document.getElementById("partitions-next").addEventListener("click", () => {
    partitionView.page += 1;
    drawPartitions();
  });
}

// The plot area inside each chart's viewBox; the margins hold the axes' labels.
const PLOT = { left: 66, right: CHART_WIDTH - 8, top: 8, bottom: CHART_HEIGHT - 30 };
const AXIS_TITLE = { bytes_in: "bytes/s", bytes_out: "bytes/s", messages_in: "messages/s" };

// The smallest 1, 2 or 5 times a power of ten at or above `value`: a round axis top.
function roundUp(value) {
  const power = 10 ** Math.floor(Math.log10(value));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= value);
}

function axisText(x, y, text, attrs = {}) {
  const node = svg("text", { x, y, ...attrs });
  node.textContent = text;
  return node;
}

function axes(series, top, spanSeconds) {
  const nodes = [
    svg("line", { class: "axis", x1: PLOT.left, y1: PLOT.top, x2: PLOT.left, y2: PLOT.bottom }),
    svg("line", { class: "axis", x1: PLOT.left, y1: PLOT.bottom, x2: PLOT.right, y2: PLOT.bottom }),
  ];
  for (const fraction of [0, 0.5, 1]) {
    const y = PLOT.bottom - fraction * (PLOT.bottom - PLOT.top);
    nodes.push(svg("line", { class: "grid", x1: PLOT.left, y1: y, x2: PLOT.right, y2: y }));
    nodes.push(axisText(PLOT.left - 4, y + 3, FORMAT[series](fraction * top),
      { class: "tick y-tick", "text-anchor": "end" }));
  }
  const xTicks = [[PLOT.left, `−${spanSeconds} s`, "start"],
    [(PLOT.left + PLOT.right) / 2, `−${Math.round(spanSeconds / 2)} s`, "middle"],
    [PLOT.right, "now", "end"]];
  for (const [x, label, anchor] of xTicks) {
    nodes.push(axisText(x, PLOT.bottom + 12, label,
      { class: "tick x-tick", "text-anchor": anchor }));
  }
  nodes.push(axisText((PLOT.left + PLOT.right) / 2, CHART_HEIGHT - 3, "time (seconds ago)",
    { class: "axis-title x-title", "text-anchor": "middle" }));
  nodes.push(axisText(8, (PLOT.top + PLOT.bottom) / 2, AXIS_TITLE[series], {
    class: "axis-title y-title", "text-anchor": "middle",
    transform: `rotate(-90 8 ${(PLOT.top + PLOT.bottom) / 2})`,
  }));
  return nodes;
}

function renderChart(series, points) {
  const chart = document.getElementById(`chart-${series}`);
  const values = points.map((p) => p[series]);
  const peak = Math.max(1, ...values);
  // At least 10 a second, so that the middle tick is a whole number in any unit.
  const top = roundUp(Math.max(10, peak));
  const first = points.length ? points[0].t : 0;
  const span = points.length > 1 ? points[points.length - 1].t - first : 0;
  const spanSeconds = Math.max(1, Math.round(span / 1000));
  const x = (t) => PLOT.left + (span ? (t - first) / span : 1) * (PLOT.right - PLOT.left);
  const y = (v) => PLOT.bottom - (v / top) * (PLOT.bottom - PLOT.top);
  const coords = points.map((p) => `${x(p.t).toFixed(1)},${y(p[series]).toFixed(1)}`);
  const shapes = axes(series, top, spanSeconds);
  if (coords.length > 1) {
    const area = [`${PLOT.left},${PLOT.bottom}`, ...coords, `${PLOT.right},${PLOT.bottom}`];
    shapes.push(svg("polygon", { points: area.join(" ") }));
    shapes.push(svg("polyline", { points: coords.join(" ") }));
  }
  chart.replaceChildren(...shapes);
  chart.dataset.points = String(values.length);
  chart.dataset.latest = values.length ? String(values[values.length - 1]) : "";
  chart.dataset.max = String(peak);
  chart.dataset.axisTop = String(top);
  const figure = chart.closest("figure");
  figure.querySelector(".now").textContent =
    values.length ? FORMAT[series](values[values.length - 1]) : "–";
  figure.querySelector(".scale").textContent = values.length
    ? `peak ${FORMAT[series](Math.max(...values))} over the last ${Math.round(span / 1000)} s`
    : "";
}

function renderRates(doc) {
  const charts = document.getElementById("charts");
  charts.classList.toggle("unavailable", !doc.available);
  charts.dataset.available = String(doc.available);
  // Brokers whose metrics failed are named in the brokers table and the panel's note.
  show("rates-unavailable", doc.available ? "" : doc.reason);
  for (const series of doc.series) renderChart(series, doc.points);
}

function lagTable(query) {
  const rows = (query.partitions || []).map((p) => el("tr", {
    "data-topic": p.topic, "data-partition": p.partition, "data-lag": p.lag ?? "",
  },
  el("td", {}, p.topic),
  el("td", { class: "num" }, p.partition),
  el("td", { class: "num" }, p.committed ?? "–"),
  el("td", { class: "num" }, p.high_watermark ?? "?"),
  el("td", { class: "num" }, p.lag ?? "?")));
  return el("table", {},
    el("thead", {}, el("tr", {}, el("th", {}, "topic"), el("th", { class: "num" }, "partition"),
      el("th", { class: "num" }, "committed"), el("th", { class: "num" }, "high watermark"),
      el("th", { class: "num" }, "lag"))),
    el("tbody", {}, ...rows));
}

function renderLag(doc) {
  const blocks = doc.queries.map((q) => {
    const block = el("div", { class: "lag-query", "data-checkpoint": q.checkpoint },
      el("h3", {}, q.checkpoint));
    if (q.error) {
      block.append(el("p", { class: "error lag-error" }, `lag unavailable: ${q.error}`));
    } else {
      const batch = q.batch_id === null || q.batch_id === undefined ? "none yet" : q.batch_id;
      block.append(el("p", { class: "note" },
        `last committed batch: ${batch}; total lag: ${q.total_lag ?? "?"} records`));
      block.append(lagTable(q));
    }
    return block;
  });
  if (!blocks.length) {
    blocks.push(el("p", { class: "note" }, "No queries: start the console with --checkpoint DIR."));
  }
  document.getElementById("lag").replaceChildren(...blocks);
}

function renderConfigs(doc) {
  const known = doc.topics.some((t) => t.config !== null);
  show("configs-unavailable", doc.topics.length && !known
    ? "Topic configs are kept in ZooKeeper: start the console with --dir or --zookeeper."
    : "");
  const rows = doc.topics.map((t) => {
    const config = t.config || {};
    const items = Object.entries(config).map(([key, value]) =>
      el("span", { class: "config-item", "data-key": key }, `${key}=${value}`));
    const replicas = t.partitions.length ? t.partitions[0].replicas.length : 0;
    return el("tr", { "data-topic": t.topic },
      el("td", {}, t.topic),
      el("td", { class: "num" }, t.partitions.length),
      el("td", { class: "num" }, replicas),
      el("td", {}, ...(items.length ? items
        : [t.config === null ? "unknown" : "none (the brokers' defaults)"])));
  });
  document.querySelector("#configs tbody").replaceChildren(...rows);
}

function groupTable(group) {
  const cell = (value) => el("td", { class: "num" }, value ?? "–");
  const rows = group.partitions.map((p) => el("tr", {
    "data-topic": p.topic, "data-partition": p.partition, "data-lag": p.lag ?? "",
  },
  el("td", {}, p.topic), cell(p.partition), cell(p.current_offset), cell(p.log_end_offset),
  cell(p.lag), el("td", {}, p.consumer_id ?? "–"), el("td", {}, p.host ?? "–"),
  el("td", {}, p.client_id ?? "–")));
  const heads = ["topic", "partition", "committed", "log end", "lag", "consumer id", "host",
    "client id"].map((name, i) => el("th", { class: i > 0 && i < 5 ? "num" : null }, name));
  return el("table", {}, el("thead", {}, el("tr", {}, ...heads)), el("tbody", {}, ...rows));
}

function renderGroups(doc) {
  show("groups-unavailable", doc.available ? "" : doc.reason);
  const blocks = doc.groups.map((g) => {
    const block = el("div", { class: "group", "data-group": g.group, "data-state": g.state ?? "",
      "data-total-lag": g.total_lag ?? "" });
    if (g.error) {
      block.append(el("h3", {}, el("span", { class: "group-id" }, g.group)),
        el("p", { class: "error" }, `cannot describe: ${g.error}`));
      return block;
    }
    const members = g.members.length;
    block.append(el("h3", {}, el("span", { class: "group-id" }, g.group),
      ` — ${g.state}, ${members} member${members === 1 ? "" : "s"}` +
      `, total lag ${g.total_lag ?? "?"}`));
    block.append(g.partitions.length ? groupTable(g)
      : el("p", { class: "note" }, "No committed offsets and no assigned partitions."));
    return block;
  });
  if (doc.available && !blocks.length) blocks.push(el("p", { class: "note" }, "No groups."));
  if (doc.total > doc.groups.length) {
    blocks.push(el("p", { class: "note" }, `Showing ${doc.groups.length} of ${doc.total} groups.`));
  }
  document.getElementById("groups").replaceChildren(...blocks);
}

// A request the console does not answer in time fails, so that the page says so and
// polls again instead of waiting on it for ever.
// The record browser: one page of a partition at a time, read when asked (not polled).
function bytesCell(field) {
  if (field === null) return el("td", { class: "bytes" }, el("span", { class: "null" }, "null"));
  const cell = el("td", { class: "bytes" }, field.data);
  if (field.truncated) cell.append(el("span", { class: "cut" }, ` … (${field.size} bytes)`));
  return cell;
}

function headersCell(headers) {
  const cell = el("td", { class: "bytes" });
  headers.forEach((h, i) => {
    if (i) cell.append("\n");
    cell.append(`${h.key}: `, h.value === null ? "null" : h.value.data);
  });
  return cell;
}

function renderRecords(page) {
  const rows = page.records.map((r) => el("tr", { "data-offset": r.offset },
    el("td", { class: "num" }, r.offset),
    el("td", {}, new Date(r.timestamp_ms).toISOString()),
    bytesCell(r.key), bytesCell(r.value), headersCell(r.headers)));
  document.querySelector("#records tbody").replaceChildren(...rows);
  document.getElementById("records").hidden = rows.length === 0;
  const capped = page.capped_by_bytes ? " (cut short: the page reached its byte cap)" : "";
  show("record-summary", rows.length
    ? `${page.topic}-${page.partition}: offsets ${page.start_offset} to ${page.next_offset - 1}` +
      ` of ${page.log_start_offset} to ${page.high_watermark - 1}${capped}`
    : `${page.topic}-${page.partition}: no records from offset ${page.start_offset}` +
      ` (high watermark ${page.high_watermark})`);
  const next = document.getElementById("record-next");
  next.disabled = page.next_offset >= page.high_watermark;
  next.dataset.offset = String(page.next_offset);
}

async function readRecords(params) {
  const query = new URLSearchParams(params);
  try {
    const response = await fetch(`/api/records?${query}`,
      { cache: "no-store", signal: AbortSignal.timeout(FETCH_TIMEOUT_MS * 5) });
    const page = await response.json();
    if (!response.ok) throw new Error(page.error || `HTTP ${response.status}`);
    show("record-error", "");
    renderRecords(page);
  } catch (error) {
    show("record-error", error.message);
    show("record-summary", "");
    document.getElementById("records").hidden = true;
    document.getElementById("record-next").disabled = true;
  }
}

function recordParams(offset) {
  const value = (id) => document.getElementById(id).value.trim();
  const params = { topic: value("record-topic"), partition: value("record-partition"),
    limit: value("record-limit"), format: value("record-format") };
  if (offset !== undefined) params.offset = offset;
  else if (value("record-from") === "timestamp") params.timestamp = value("record-timestamp");
  else params.offset = value("record-offset");
  return params;
}

function setUpRecordBrowser() {
  const from = document.getElementById("record-from");
  from.addEventListener("change", () => {
    document.getElementById("record-offset").hidden = from.value !== "offset";
    document.getElementById("record-timestamp").hidden = from.value !== "timestamp";
  });
  document.getElementById("record-query").addEventListener("submit", (event) => {
    event.preventDefault();
    readRecords(recordParams());
  });
  document.getElementById("record-next").addEventListener("click", (event) => {
    readRecords(recordParams(event.target.dataset.offset));
  });
}

function renderTopicChoices(doc) {
  const names = doc.topics.map((t) => t.topic);
  const list = document.getElementById("record-topics");
  if (list.dataset.names === names.join("\n")) return;
  list.dataset.names = names.join("\n");
  list.replaceChildren(...names.map((name) => el("option", { value: name })));
}

async function getJson(path) {
  const signal = AbortSignal.timeout(FETCH_TIMEOUT_MS);
  const response = await fetch(path, { cache: "no-store", signal });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

// Each section names its panel (data-panel); a stale panel is greyed and says why.
function renderPanels(panels) {
  for (const section of document.querySelectorAll("section[data-panel]")) {
    const panel = panels[section.dataset.panel];
    if (!panel) continue;
    section.classList.toggle("stale", panel.stale);
    section.dataset.stale = String(panel.stale);
    section.dataset.readMs = panel.read_ms === null ? "" : String(panel.read_ms);
    const readAt = section.querySelector(".read-at");
    if (readAt) readAt.textContent = panel.read_ms === null ? "" : `read at ${clock(panel.read_ms)}`;
    const note = section.querySelector(".panel-note");
    if (!panel.stale) {
      note.hidden = true;
      note.replaceChildren();
      continue;
    }
    const failures = panel.failures > 1 ? ` (${panel.failures} failed reads)` : "";
    note.hidden = false;
    note.replaceChildren(
      `stale — ${panel.stale_reason} since ${clock(panel.stale_since_ms)}${failures}`,
      panel.stale_detail ? el("span", { class: "detail" }, panel.stale_detail) : "");
  }
}

// The header says when the cluster was read, from the panels' own times: it never moves
// on while the reads fail, and names the first stale panel's reason, the cluster's own
// (ZooKeeper, the brokers) before the metrics' and the lag's, which follow from them.
function renderStatus(cluster, panels) {
  const status = document.getElementById("status");
  const stale = Object.values(panels).filter((p) => p.stale);
  const reads = Object.values(panels).map((p) => p.read_ms).filter((t) => t !== null);
  status.classList.toggle("stale", stale.length > 0);
  status.dataset.stale = String(stale.length > 0);
  if (stale.length) {
    status.textContent = `stale — ${stale[0].stale_reason} since ${clock(stale[0].stale_since_ms)}`;
  } else {
    status.textContent = `read from ${cluster.source} at ${clock(Math.min(...reads))}`;
  }
}

// When the console itself stopped answering the page (null while it answers).
let consoleUnreachableSince = null;

async function poll() {
  const status = document.getElementById("status");
  try {
    const [cluster, rates, lag, groups] = await Promise.all(
      ["/api/cluster", "/api/rates", "/api/lag", "/api/groups"].map(getJson));
    const panels = { ...cluster.panels, ...rates.panels, ...groups.panels, ...lag.panels };
    consoleUnreachableSince = null;
    document.body.classList.remove("console-unreachable");
    renderSummary(cluster);
    renderBrokers(cluster, rates);
    renderPartitions(cluster);
    renderRates(rates);
    renderConfigs(cluster);
    renderTopicChoices(cluster);
    renderGroups(groups);
    renderLag(lag);
    renderPanels(panels);
    renderStatus(cluster, panels);
  } catch (error) {
    document.body.classList.add("console-unreachable");
    status.classList.add("stale");
    status.dataset.stale = "true";
    consoleUnreachableSince = consoleUnreachableSince ?? Date.now();
    status.textContent =
      `stale — console unreachable (${error.message}) since ${clock(consoleUnreachableSince)}`;
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

setUpPartitionTable();
setUpRecordBrowser();
poll();
