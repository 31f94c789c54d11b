// The Skerry console: pages over the broker's JSON API (/api/), drawn in the browser.
// Rules: every piece of data enters the page as text (textContent, createTextNode, SVG
// attributes), never as markup; nothing is loaded from anywhere but this broker.
"use strict";

(function () {
  const TOKEN_KEY = "skerry-console-token";
  const INTERNAL_KEY = "skerry-console-internal";
  const COLORS = ["#16425b", "#d1495b", "#2f9c95", "#edae49", "#6a4c93", "#3a86ff",
                  "#8d6346", "#00798c", "#ff6f59", "#4d5359"];
  let pollMs = 2000;
  let timer = null;
  let route = null;

  // ------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function svg(tag, attrs) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (name === "text") node.textContent = String(value);
      else node.setAttribute(name, String(value));
    }
    return node;
  }

  function link(href, text) { return el("a", {href: href, text: text}); }
  function topicHref(name) { return "#/topics/" + encodeURIComponent(name); }
  function groupHref(group, topic) {
    return "#/groups/" + encodeURIComponent(group) + "/" + encodeURIComponent(topic);
  }

  function fmtBytes(n) {
    if (n === null || n === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i === 0 ? String(n) : n.toFixed(1)) + " " + units[i];
  }
  function fmtNum(n) { return (n === null || n === undefined) ? "–" : Number(n).toLocaleString("en-US"); }
  function fmtRate(n) { return n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(1); }
  function fmtDuration(s) {
    s = Math.floor(s);
    const d = Math.floor(s / 86400), h = Math.floor(s % 86400 / 3600),
          m = Math.floor(s % 3600 / 60), sec = s % 60;
    return (d ? d + "d " : "") + (d || h ? h + "h " : "") + (d || h || m ? m + "m " : "") + sec + "s";
  }
  function fmtTime(us) {
    if (!us) return "–";
    return new Date(us / 1000).toISOString().replace("T", " ").replace("Z", " UTC");
  }
  function fmtRetention(ms, bytes) {
    const parts = [];
    if (ms !== null) parts.push(fmtDuration(ms / 1000));
    if (bytes !== null) parts.push(fmtBytes(bytes));
    return parts.length ? parts.join(" / ") : "forever";
  }

  function bytesOf(encoded) {
    const raw = atob(encoded.base64);
    const out = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
    return out;
  }
  function hexOf(encoded) {
    const bytes = bytesOf(encoded);
    const lines = [];
    for (let i = 0; i < bytes.length; i += 16) {
      const row = Array.from(bytes.slice(i, i + 16), b => b.toString(16).padStart(2, "0"));
      lines.push(row.join(" "));
    }
    return lines.join("\n");
  }
  // One key, value or header as a text node: text when it is UTF-8 and the view is text,
  // hex otherwise. Never markup.
  function shown(encoded, view) {
    if (encoded === null) return el("span", {class: "muted", text: "(none)"});
    if (view === "hex" || encoded.text === null) {
      const node = el("span", {class: "mono", text: hexOf(encoded)});
      if (view !== "hex") node.prepend(el("span", {class: "binary", text: "binary, " + encoded.size + " bytes:\n"}));
      return node;
    }
    return el("span", {text: encoded.text});
  }

  function table(headers, rows, attrs) {
    const head = el("tr", {}, ...headers.map(h => el("th", {class: h.cls || null, text: h.label})));
    return el("div", {class: "table-wrap"},
      el("table", attrs || {}, el("thead", {}, head), el("tbody", {}, ...rows)));
  }
  function card(label, value, sub, attrs) {
    return el("div", Object.assign({class: "card"}, attrs || {}),
      el("div", {class: "label", text: label}),
      el("div", {class: "value", text: value}),
      sub === undefined ? null : (sub instanceof Node ? sub : el("div", {class: "sub", text: sub})));
  }

  // ------------------------------------------------------------------ API and login

  class AuthNeeded extends Error {}

  async function api(path) {
    const headers = {"Accept": "application/json"};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers["Authorization"] = "Bearer " + token;
    const response = await fetch("api/" + path, {headers: headers, cache: "no-store"});
    // The broker's sampling interval paces the polling (0.5 to 5 seconds).
    const hint = Number(response.headers.get("x-skerry-poll-ms"));
    if (hint > 0) pollMs = Math.min(5000, Math.max(500, hint));
    if (response.status === 401) throw new AuthNeeded();
    const doc = await response.json();
    if (!response.ok) throw new Error(doc.error || ("HTTP " + response.status));
    return doc;
  }

  function showLogin(message) {
    document.getElementById("login").hidden = false;
    document.getElementById("page").hidden = true;
    document.getElementById("login-error").textContent = message || "";
    document.getElementById("logout").hidden = true;
    setStatus("");
  }

  function setupLogin() {
    document.getElementById("login-form").addEventListener("submit", event => {
      event.preventDefault();
      const input = document.getElementById("login-token");
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      input.value = "";
      document.getElementById("login").hidden = true;
      document.getElementById("page").hidden = false;
      render(true);
    });
    document.getElementById("logout").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin("Logged out.");
    });
  }

  // The Iggy transport's internal topics (__iggy.*) and groups (iggy.consumer.*) are left
  // out of the lists unless the reader ticks "show internal", as the skerry command lists
  // them only with --internal. The choice lasts as long as the tab (sessionStorage).
  function showInternal() { return sessionStorage.getItem(INTERNAL_KEY) === "1"; }
  function internalQuery() { return showInternal() ? "?internal=1" : ""; }
  function internalToggle(what, hidden) {
    const box = el("input", {type: "checkbox", id: "show-internal", checked: showInternal(),
      onchange: e => { sessionStorage.setItem(INTERNAL_KEY, e.target.checked ? "1" : "0"); render(true); }});
    return el("p", {class: "muted internal-toggle"},
      el("label", {}, box, " show internal " + what + " (the Iggy transport's)"),
      el("span", {id: "internal-hidden", text: hidden ? " – " + hidden + " hidden" : ""}));
  }

  function setStatus(text) { document.getElementById("status").textContent = text; }

  // ------------------------------------------------------------------ charts

  function sparkline(values, label) {
    const width = 300, height = 48;
    const box = svg("svg", {class: "spark", viewBox: "0 0 " + width + " " + height,
                            preserveAspectRatio: "none", role: "img", "aria-label": label});
    const max = Math.max(1, ...values);
    const step = values.length > 1 ? width / (values.length - 1) : width;
    const points = values.map((v, i) => (i * step).toFixed(1) + "," +
                                        (height - 2 - (v / max) * (height - 4)).toFixed(1));
    box.append(svg("polyline", {points: points.join(" ")}));
    box.setAttribute("data-points", String(values.length));
    return box;
  }

  // Lag per partition over the history window: x is the sample's age, from the oldest
  // sample kept (at least a minute, at most the window: an hour) to now.
  function fmtAge(s) {
    if (s <= 0) return "now";
    if (s < 120) return "-" + Math.round(s) + " s";
    return "-" + Math.round(s / 60) + " min";
  }

  function lagChart(history) {
    const page = document.getElementById("page");
    const width = Math.max(300, Math.round(page.clientWidth || 800)), height = 260;
    const left = 50, right = 16, top = 12, bottom = 28;
    const chart = svg("svg", {class: "chart", id: "lag-chart", viewBox: "0 0 " + width + " " + height,
                              role: "img", "aria-label": "lag per partition over the last hour"});
    const samples = history.samples;
    const oldest = samples.length ? samples[0].age_s : 0;
    const span = Math.min(history.window_s, Math.max(60, oldest));
    const partitions = new Set();
    let max = 1;
    for (const s of samples) for (const [p, v] of Object.entries(s.lag)) { partitions.add(p); max = Math.max(max, v); }
    const x = age => left + (1 - Math.min(age, span) / span) * (width - left - right);
    const y = v => top + (1 - v / max) * (height - top - bottom);
    chart.append(svg("line", {class: "axis", x1: left, y1: y(0), x2: width - right, y2: y(0)}));
    chart.append(svg("line", {class: "axis", x1: left, y1: top, x2: left, y2: y(0)}));
    chart.append(svg("text", {x: 4, y: top + 10, text: fmtNum(max)}));
    chart.append(svg("text", {x: 4, y: y(0), text: "0"}));
    for (const fraction of [1, 0.75, 0.5, 0.25, 0]) {
      const label = fmtAge(span * fraction);
      const at = x(span * fraction);
      chart.append(svg("text", {x: Math.min(width - right - 7 * label.length, Math.max(left, at - 3.5 * label.length)),
                                y: height - 8, text: label}));
    }
    const order = Array.from(partitions).sort((a, b) => Number(a) - Number(b));
    let drawn = 0;
    order.forEach((p, i) => {
      const points = samples.filter(s => p in s.lag)
        .map(s => x(s.age_s).toFixed(1) + "," + y(s.lag[p]).toFixed(1));
      drawn = Math.max(drawn, points.length);
      chart.append(svg("polyline", {points: points.join(" "), stroke: COLORS[i % COLORS.length],
                                    "data-partition": p}));
    });
    chart.setAttribute("data-samples", String(samples.length));
    const last = samples.length ? samples[samples.length - 1] : null;
    chart.setAttribute("data-last-total",
      last ? String(Object.values(last.lag).reduce((a, b) => a + b, 0)) : "");
    const legend = el("div", {class: "legend"}, ...order.map((p, i) => {
      const item = el("span", {text: "partition " + p});
      item.style.setProperty("--swatch", COLORS[i % COLORS.length]);
      return item;
    }));
    return el("div", {}, chart, legend);
  }

  // ------------------------------------------------------------------ pages

  async function overviewPage() {
    const o = await api("overview");
    const produce = o.rates.produce.map(r => r.messages_per_s);
    const consume = o.rates.consume.map(r => r.messages_per_s);
    const lastRate = list => list.length ? fmtRate(list[list.length - 1]) + " msg/s" : "–";
    const brokers = o.brokers.map(b => "#" + b.id + " " + b.address + (b.local ? " (this one)" : ""));
    return [
      el("h1", {text: "Overview"}),
      el("div", {class: "cards"},
        card("Broker", brokers.join(", "), o.cluster_mode === "single" ? "single broker" : o.cluster_mode + " cluster"),
        card("Version", o.version, "skerry"),
        card("Uptime", fmtDuration(o.uptime_s), "", {id: "uptime"}),
        card("fsync", o.fsync, o.fsync === "interval" ? "every " + o.fsync_interval_ms + " ms" : ""),
        card("Produce", lastRate(produce), sparkline(produce, "produce rate, last hour"), {id: "produce-rate"}),
        card("Consume", lastRate(consume), sparkline(consume, "consume rate, last hour"), {id: "consume-rate"}),
        card("Storage used", fmtBytes(o.storage.used_bytes),
             o.storage.topics + " topics, " + o.storage.partitions + " partitions; " +
             fmtBytes(o.storage.disk_free_bytes) + " free", {id: "storage"}),
        card("Connections", fmtNum(o.connections), "V1 clients")),
      el("h2", {text: "Listeners"}),
      table([{label: "listener"}, {label: "address"}],
            Object.entries(o.listeners).map(([name, addr]) => el("tr", {}, el("td", {text: name}), el("td", {class: "mono", text: addr})))),
      el("p", {class: "muted", text: "Data directory: " + o.storage.data_dir +
               (o.totals ? "; since start: " + fmtNum(o.totals.messages_in) + " messages in, " +
                fmtNum(o.totals.messages_out) + " out" : "") +
               "; auth " + (o.auth ? "on" : "off") + ", TLS " + (o.tls ? "on" : "off") + "."}),
    ];
  }

  async function topicsPage() {
    const doc = await api("topics" + internalQuery());
    const rows = doc.topics.map(t => el("tr", {"data-topic": t.name},
      el("td", {}, link(topicHref(t.name), t.name)),
      el("td", {class: "num", text: t.partitions}),
      el("td", {class: "num", text: fmtNum(t.messages)}),
      el("td", {class: "num", text: fmtBytes(t.bytes)}),
      el("td", {class: "num hide-narrow", text: t.replication_factor}),
      el("td", {class: "hide-narrow", text: fmtRetention(t.retention_ms, t.retention_bytes)})));
    return [
      el("h1", {text: "Topics"}),
      doc.topics.length ? table([{label: "topic"}, {label: "partitions", cls: "num"},
                                 {label: "messages", cls: "num"}, {label: "bytes", cls: "num"},
                                 {label: "replicas", cls: "num hide-narrow"},
                                 {label: "retention", cls: "hide-narrow"}], rows, {id: "topics-table"})
                        : el("p", {class: "muted", text: "No topics yet."}),
      internalToggle("topics", doc.internal_hidden),
    ];
  }

  // The message browser keeps its settings and results across refreshes of the page.
  const browser = {topic: null, partition: 0, mode: "latest", offset: 0, timestamp: "",
                   limit: 20, view: "text", result: null, error: ""};

  async function loadMessages(from) {
    const q = new URLSearchParams({partition: browser.partition, limit: browser.limit});
    if (from !== undefined) q.set("offset", from);
    else if (browser.mode === "offset") q.set("offset", browser.offset);
    else if (browser.mode === "timestamp" && browser.timestamp) q.set("timestamp_ms", Date.parse(browser.timestamp + "Z"));
    try {
      browser.result = await api("topics/" + encodeURIComponent(browser.topic) + "/messages?" + q);
      browser.error = "";
    } catch (err) {
      if (err instanceof AuthNeeded) { showLogin(); return; }
      browser.result = null;
      browser.error = err.message;
    }
    drawMessages();
  }

  function drawMessages() {
    const box = document.getElementById("messages");
    if (!box) return;
    box.replaceChildren();
    if (browser.error) { box.append(el("p", {class: "error", text: browser.error})); return; }
    const r = browser.result;
    if (!r) return;
    if (!r.messages.length) {
      box.append(el("p", {class: "muted", text: "No messages from offset " + r.from_offset + " (hw " + r.hw + ")."}));
      return;
    }
    const rows = r.messages.map(m => el("tr", {"data-offset": m.offset},
      el("td", {class: "num", text: m.offset}),
      el("td", {class: "mono hide-narrow", text: fmtTime(m.timestamp_us)}),
      el("td", {class: "value-cell"}, shown(m.key, browser.view)),
      el("td", {class: "value-cell message-value"}, shown(m.value, browser.view)),
      el("td", {class: "hide-narrow"}, m.headers.length ? el("ul", {class: "headers"}, ...m.headers.map(h =>
        el("li", {}, shown(h.name, browser.view), ": ", shown(h.value, browser.view)))) : null)));
    box.append(table([{label: "offset", cls: "num"}, {label: "timestamp", cls: "hide-narrow"},
                      {label: "key"}, {label: "value"}, {label: "headers", cls: "hide-narrow"}],
                     rows, {id: "messages-table"}));
    box.append(el("p", {},
      el("button", {type: "button", id: "messages-next", onclick: () => loadMessages(r.next_offset),
                    text: "Next from offset " + r.next_offset}),
      el("span", {class: "muted", text: "  partition " + r.partition + ": offsets " + r.first_offset + "–" + r.hw})));
  }

  function browserForm(topic) {
    const partitions = el("select", {id: "browse-partition", onchange: e => { browser.partition = Number(e.target.value); }},
      ...Array.from({length: topic.partitions}, (_, p) => el("option", {value: p, selected: p === browser.partition, text: p})));
    const mode = el("select", {id: "browse-mode", onchange: e => { browser.mode = e.target.value; }},
      el("option", {value: "latest", selected: browser.mode === "latest", text: "latest"}),
      el("option", {value: "offset", selected: browser.mode === "offset", text: "from offset"}),
      el("option", {value: "timestamp", selected: browser.mode === "timestamp", text: "from time (UTC)"}));
    const view = el("select", {id: "browse-view", onchange: e => { browser.view = e.target.value; drawMessages(); }},
      el("option", {value: "text", selected: browser.view === "text", text: "text"}),
      el("option", {value: "hex", selected: browser.view === "hex", text: "hex"}));
    return el("form", {class: "browser", id: "browser", onsubmit: e => { e.preventDefault(); loadMessages(); }},
      el("label", {}, "partition", partitions),
      el("label", {}, "start", mode),
      el("label", {}, "offset", el("input", {type: "number", min: 0, id: "browse-offset", value: browser.offset,
                                             oninput: e => { browser.offset = Number(e.target.value); }})),
      el("label", {}, "time (UTC)", el("input", {type: "datetime-local", step: 1, id: "browse-time", value: browser.timestamp,
                                                 oninput: e => { browser.timestamp = e.target.value; }})),
      el("label", {}, "limit", el("input", {type: "number", min: 1, max: 500, id: "browse-limit", value: browser.limit,
                                            oninput: e => { browser.limit = Number(e.target.value) || 20; }})),
      el("label", {}, "show as", view),
      el("button", {type: "submit", id: "browse-load", text: "Load"}));
  }

  async function topicPage(name, first) {
    const t = await api("topics/" + encodeURIComponent(name) + internalQuery());
    if (browser.topic !== name) Object.assign(browser, {topic: name, partition: 0, result: null, error: ""});
    const rows = t.partition_details.map(p => el("tr", {"data-partition": p.partition},
      el("td", {class: "num", text: p.partition}),
      el("td", {class: "num", text: fmtNum(p.first_offset)}),
      el("td", {class: "num", text: fmtNum(p.last_offset)}),
      el("td", {class: "num", text: fmtNum(p.hw)}),
      el("td", {class: "num", text: fmtNum(p.messages)}),
      el("td", {class: "num", text: fmtBytes(p.size_bytes)}),
      el("td", {class: "num", text: p.leader === null ? "?" : p.leader}),
      el("td", {class: p.under_replicated ? "warn" : "", text: "[" + p.isr.join(", ") + "]" + (p.under_replicated ? " under-replicated" : "")})));
    const page = [
      el("h1", {}, "Topic ", el("span", {id: "topic-name", text: t.name})),
      el("p", {class: "muted", text: t.partitions + " partitions, replication factor " + t.replication_factor +
               ", min ISR " + t.min_insync_replicas + ", retention " + fmtRetention(t.retention_ms, t.retention_bytes)}),
      table([{label: "partition", cls: "num"}, {label: "first", cls: "num"}, {label: "last", cls: "num"},
             {label: "hw", cls: "num"}, {label: "messages", cls: "num"}, {label: "size", cls: "num"},
             {label: "leader", cls: "num"}, {label: "ISR"}], rows, {id: "partitions-table"}),
    ];
    if (t.groups.length) page.push(el("p", {}, "Groups: ", ...t.groups.flatMap((g, i) =>
      [i ? ", " : "", link(groupHref(g, t.name), g)])));
    page.push(el("h2", {text: "Messages"}), browserForm(t), el("div", {id: "messages"}));
    if (first) setTimeout(() => loadMessages(), 0);
    return page;
  }

  async function groupsPage() {
    const doc = await api("groups" + internalQuery());
    const rows = doc.groups.map(g => el("tr", {"data-group": g.group, "data-topic": g.topic},
      el("td", {}, link(groupHref(g.group, g.topic), g.group)),
      el("td", {}, link(topicHref(g.topic), g.topic)),
      el("td", {text: g.state}),
      el("td", {class: "num", text: g.members}),
      el("td", {class: "hide-narrow", text: g.assignor}),
      el("td", {class: "group-type", text: g.type}),
      el("td", {class: "num" + (g.lag > 0 ? " lag-high" : ""), text: fmtNum(g.lag)})));
    return [
      el("h1", {text: "Groups"}),
      doc.groups.length ? table([{label: "group"}, {label: "topic"}, {label: "state"},
                                 {label: "members", cls: "num"}, {label: "assignor", cls: "hide-narrow"},
                                 {label: "type"},
                                 {label: "lag", cls: "num"}], rows, {id: "groups-table"})
                        : el("p", {class: "muted", text: "No groups yet."}),
      internalToggle("groups", doc.internal_hidden),
    ];
  }

  async function groupPage(group, topic) {
    const g = await api("groups/" + encodeURIComponent(group) + "/" + encodeURIComponent(topic));
    const consumer = g.type === "consumer";  // KIP-848: member epochs and pending partitions
    const members = g.members.map(m => el("tr", {"data-member": m.member_id},
      el("td", {class: "mono", text: m.member_id}),
      ...(consumer ? [el("td", {class: "num member-epoch", text: m.member_epoch})] : []),
      el("td", {class: "assigned", text: m.partitions.length ? m.partitions.join(", ") : "(none)"}),
      ...(consumer ? [el("td", {class: "pending", text: m.pending.length ? m.pending.join(", ") : "–"})] : [])));
    const memberColumns = consumer
      ? [{label: "member"}, {label: "epoch", cls: "num"}, {label: "partitions"}, {label: "pending"}]
      : [{label: "member"}, {label: "partitions"}];
    const rows = g.partitions.map(p => el("tr", {"data-partition": p.partition},
      el("td", {class: "num", text: p.partition}),
      el("td", {class: "mono", text: p.member === null ? "–" : p.member}),
      el("td", {class: "num", text: fmtNum(p.committed)}),
      el("td", {class: "num", text: fmtNum(p.hw)}),
      el("td", {class: "num lag" + (p.lag > 0 ? " lag-high" : ""), text: fmtNum(p.lag)})));
    return [
      el("h1", {}, "Group ", el("span", {text: g.group}), " on ", link(topicHref(g.topic), g.topic)),
      el("div", {class: "cards"},
        card("Lag", fmtNum(g.lag), "messages behind", {id: "group-lag"}),
        consumer ? card("State", g.state, "consumer group, group epoch " + g.group_epoch +
                        ", assignment epoch " + g.assignment_epoch, {id: "group-state"})
                 : card("State", g.state, "generation " + g.generation, {id: "group-state"}),
        card("Members", fmtNum(g.members.length), "assignor " + g.assignor)),
      el("h2", {text: "Lag per partition, last hour"}),
      lagChart(g.history),
      el("p", {class: "muted", text: "Sampled every " + g.history.interval_s + " s; " + g.history.samples.length +
               " samples, kept in the broker's memory for " + Math.round(g.history.window_s / 60) + " min."}),
      el("h2", {text: "Partitions"}),
      table([{label: "partition", cls: "num"}, {label: "member"}, {label: "committed", cls: "num"},
             {label: "hw", cls: "num"}, {label: "lag", cls: "num"}], rows, {id: "group-partitions"}),
      el("h2", {text: "Members"}),
      g.members.length ? table(memberColumns, members, {id: "group-members"})
                       : el("p", {class: "muted", text: "No live members."}),
    ];
  }

  async function clusterPage() {
    const c = await api("cluster" + internalQuery());
    const brokers = c.brokers.map(b => el("tr", {},
      el("td", {class: "num", text: b.id}),
      el("td", {class: "mono", text: b.address}),
      el("td", {text: (b.id === c.controller ? "controller" : "") + (b.local ? (b.id === c.controller ? ", " : "") + "this broker" : "")}),
      el("td", {class: "num", text: b.leader_of})));
    const parts = c.partitions.map(p => el("tr", {},
      el("td", {}, link(topicHref(p.topic), p.topic)),
      el("td", {class: "num", text: p.partition}),
      el("td", {class: "num", text: p.leader === null ? "?" : p.leader}),
      el("td", {text: "[" + p.replicas.join(", ") + "]"}),
      el("td", {class: p.under_replicated ? "warn" : "", text: "[" + p.isr.join(", ") + "]"})));
    const mode = {single: "A single broker: it is the only broker, the controller and the leader of every partition.",
                  static: "A static cluster (cluster section): this broker's own view of the brokers and the partitions it replicates."}[c.mode] || c.mode;
    return [
      el("h1", {text: "Cluster"}),
      el("p", {class: "muted", text: mode}),
      el("div", {class: "cards"},
        card("Brokers", fmtNum(c.brokers.length)),
        card("Controller", c.controller === null ? "none" : "#" + c.controller),
        card("Under-replicated", fmtNum(c.under_replicated), "partitions", {id: "under-replicated"})),
      el("h2", {text: "Brokers"}),
      table([{label: "id", cls: "num"}, {label: "address"}, {label: "role"}, {label: "leads", cls: "num"}], brokers, {id: "brokers-table"}),
      el("h2", {text: "Leaders"}),
      table([{label: "topic"}, {label: "partition", cls: "num"}, {label: "leader", cls: "num"},
             {label: "replicas"}, {label: "ISR"}], parts, {id: "leaders-table"}),
      internalToggle("topics", c.internal_hidden),
    ];
  }

  async function accessPage() {
    const a = await api("acls");
    const rows = a.acls.map(x => el("tr", {},
      el("td", {class: "mono", text: x.principal}),
      el("td", {text: x.resource_type}),
      el("td", {text: x.pattern}),
      el("td", {class: "mono", text: x.name}),
      el("td", {text: x.operation}),
      el("td", {class: x.permission === "Deny" ? "warn" : "", text: x.permission})));
    const note = !a.enabled ? "Authentication is off: every request is allowed."
      : a.allow_everyone_if_no_acl_found ? "A resource no ACL names is open to every user."
      : "A resource no ACL names is open to super users only.";
    return [
      el("h1", {text: "Access"}),
      el("p", {class: "muted", text: note}),
      el("div", {class: "cards"},
        card("ACLs", fmtNum(a.acls.length)),
        card("Super users", a.super_users.length ? a.super_users.join(", ") : "none")),
      el("h2", {text: "Who may do what"}),
      a.acls.length ? table([{label: "principal"}, {label: "type"}, {label: "pattern"}, {label: "name"},
                             {label: "operation"}, {label: "permission"}], rows, {id: "acls-table"})
                    : el("p", {class: "muted", text: "No ACLs."}),
    ];
  }

  // ------------------------------------------------------------------ routing

  function parseRoute() {
    const decode = part => { try { return decodeURIComponent(part); } catch (err) { return part; } };
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decode);
    if (parts[0] === "topics" && parts.length === 2) return {page: "topics", build: first => topicPage(parts[1], first)};
    if (parts[0] === "topics") return {page: "topics", build: topicsPage};
    if (parts[0] === "groups" && parts.length === 3) return {page: "groups", build: () => groupPage(parts[1], parts[2])};
    if (parts[0] === "groups") return {page: "groups", build: groupsPage};
    if (parts[0] === "cluster") return {page: "cluster", build: clusterPage};
    if (parts[0] === "access") return {page: "access", build: accessPage};
    return {page: "overview", build: overviewPage};
  }

  async function render(first) {
    clearTimeout(timer);
    const current = route;
    try {
      const nodes = await current.build(first);
      if (current !== route) return;  // the reader moved on meanwhile
      // Keep the reader's place in the message browser's form across refreshes.
      const page = document.getElementById("page");
      const focused = document.activeElement && page.contains(document.activeElement) ? document.activeElement.id : null;
      const oldForm = document.getElementById("browser");
      if (oldForm && !first) {
        const newForm = nodes.find(n => n instanceof Node && n.id === "browser");
        if (newForm) nodes[nodes.indexOf(newForm)] = oldForm;
        const oldMessages = document.getElementById("messages");
        const slot = nodes.findIndex(n => n instanceof Node && n.id === "messages");
        if (oldMessages && slot >= 0) nodes[slot] = oldMessages;
      }
      page.replaceChildren(...nodes);
      if (focused && document.getElementById(focused)) document.getElementById(focused).focus();
      document.getElementById("logout").hidden = !sessionStorage.getItem(TOKEN_KEY);
      setStatus("updated " + new Date().toLocaleTimeString());
    } catch (err) {
      if (err instanceof AuthNeeded) {
        showLogin(sessionStorage.getItem(TOKEN_KEY) ? "That token was refused." : "");
        sessionStorage.removeItem(TOKEN_KEY);
        return;
      }
      if (first) document.getElementById("page").replaceChildren(el("p", {class: "error", text: err.message}));
      setStatus("error: " + err.message);
    }
    if (current === route) timer = setTimeout(() => render(false), pollMs);
  }

  function navigate() {
    route = parseRoute();
    for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.page === route.page);
    render(true);
  }

  document.addEventListener("DOMContentLoaded", () => {
    setupLogin();
    window.addEventListener("hashchange", navigate);
    navigate();
  });
})();
