// RMQ dashboard: live charts of the overview, drawn as SVG from JSON
// snapshots the page polls (api/overview). Hand-written, no dependency.
"use strict";
(function () {
  const section = document.getElementById("charts");
  if (!section) return;
  const src = section.dataset.src;
  const every = 2000;   // ms between samples
  const keep = 90;      // samples kept: 3 minutes
  const colors = ["#2f6fde", "#c9372c", "#1f845a", "#b26b00", "#6c2bb0", "#0b7f8f", "#8a5a44", "#5b6477"];
  const samples = [];   // {t: ms, topics: {name: apiTopic}}
  const names = [];     // topic names in first-seen order, for stable colors

  const svgNS = "http://www.w3.org/2000/svg";
  function el(name, attrs) {
    const e = document.createElementNS(svgNS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  function fmt(v) {
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M";
    if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k";
    return Number.isInteger(v) ? String(v) : v.toFixed(1);
  }

  // nice rounds a maximum up to 1, 2 or 5 times a power of ten.
  function nice(v) {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  // series returns, per topic, the points [t, value] of one field, or of
  // its rate of increase per second (a count that fell gives 0: requeued
  // or purged messages are not negative deaths).
  function series(field, rate) {
    const out = {};
    for (const name of names) {
      const pts = [];
      for (let i = 0; i < samples.length; i++) {
        const cur = samples[i].topics[name];
        if (!cur) continue;
        // A counter the snapshot leaves out is zero.
        if (!rate) { pts.push([samples[i].t, cur[field] || 0]); continue; }
        const prev = i > 0 ? samples[i - 1].topics[name] : null;
        if (!prev) continue;
        const dt = (samples[i].t - samples[i - 1].t) / 1000;
        if (dt > 0) pts.push([samples[i].t, Math.max(0, (cur[field] || 0) - (prev[field] || 0)) / dt]);
      }
      out[name] = pts;
    }
    return out;
  }

  function draw(svg) {
    const W = 400, H = 120, L = 34, B = 14;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const data = series(svg.dataset.series, svg.dataset.rate === "1");
    let tmax = 0, vmax = 0;
    for (const name in data) for (const [t, v] of data[name]) { tmax = Math.max(tmax, t); vmax = Math.max(vmax, v); }
    if (tmax === 0) {
      svg.appendChild(el("text", {x: L, y: H / 2})).textContent = "collecting samples…";
      return;
    }
    vmax = nice(vmax);
    // The x axis spans the samples taken, at least 30 s, at most the 3
    // minutes kept.
    let tfirst = tmax;
    for (const name in data) if (data[name].length) tfirst = Math.min(tfirst, data[name][0][0]);
    const tmin = tmax - Math.max(30000, tmax - tfirst);
    const x = t => L + (W - L - 4) * (t - tmin) / (tmax - tmin);
    const y = v => (H - B) - (H - B - 6) * v / vmax;
    svg.appendChild(el("line", {class: "axis", x1: L, y1: H - B, x2: W, y2: H - B}));
    svg.appendChild(el("line", {class: "axis", x1: L, y1: 4, x2: L, y2: H - B}));
    svg.appendChild(el("text", {x: 2, y: 12})).textContent = fmt(vmax);
    svg.appendChild(el("text", {x: 2, y: H - B})).textContent = "0";
    svg.appendChild(el("text", {x: L, y: H - 2})).textContent = "−" + Math.round((tmax - tmin) / 1000) + " s";
    svg.appendChild(el("text", {x: W - 24, y: H - 2})).textContent = "now";
    names.forEach((name, i) => {
      const pts = data[name];
      if (!pts || pts.length === 0) return;
      const p = pts.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
      svg.appendChild(el("polyline", {points: p, stroke: colors[i % colors.length]}));
    });
  }

  function legend() {
    const box = document.getElementById("legend");
    if (!box || box.childElementCount === names.length) return;
    box.textContent = "";
    names.forEach((name, i) => {
      const s = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = colors[i % colors.length]; // CSSOM, allowed by the CSP
      s.appendChild(sw);
      s.appendChild(document.createTextNode(name));
      box.appendChild(s);
    });
  }

  // The table's counts follow the samples too.
  function updateTable(snap) {
    for (const tp of snap.topics) {
      const row = document.querySelector('tr[data-topic="' + CSS.escape(tp.name) + '"]');
      if (!row || tp.error) continue;
      const set = (k, v) => { const c = row.querySelector('[data-k="' + k + '"]'); if (c) c.textContent = v; };
      set("waiting", tp.waiting); set("due", tp.due); set("delayed", tp.delayed);
      set("inflight", tp.inflight); set("dead", tp.dead);
      set("lag", tp.lag_ms > 0 ? (tp.lag_ms / 1000).toFixed(1) + "s" : "–");
      const st = row.querySelector('[data-k="state"] .badge');
      if (st) { st.textContent = tp.paused ? "paused" : "running"; st.className = "badge " + (tp.paused ? "paused" : "ok"); }
    }
  }

  async function tick() {
    try {
      const res = await fetch(src, {cache: "no-store", credentials: "same-origin"});
      if (res.ok) {
        const snap = await res.json();
        const topics = {};
        for (const tp of snap.topics) {
          topics[tp.name] = tp;
          if (!names.includes(tp.name)) names.push(tp.name);
        }
        samples.push({t: snap.time_ms || Date.now(), topics: topics});
        while (samples.length > keep) samples.shift();
        updateTable(snap);
        legend();
        section.querySelectorAll("svg.chart").forEach(draw);
        section.dataset.samples = String(samples.length);
      }
    } catch (e) {
      // A failed poll leaves a gap; the next one tries again.
    }
    setTimeout(tick, every);
  }
  tick();
})();

// The live event feed (events?topic=…): each Server-Sent Event of the
// page's stream becomes the top row of the list. The browser reconnects by
// itself, resuming after the last event's id.
(function () {
  const feed = document.getElementById("feed");
  if (!feed) return;
  const state = document.getElementById("feed-state");
  const keep = 500; // rows kept
  const src = new EventSource(feed.dataset.src);
  const cell = (tr, text, cls) => {
    const td = tr.insertCell();
    if (cls) td.className = cls;
    td.textContent = text;
    return td;
  };
  src.onopen = () => { state.textContent = "live"; feed.dataset.open = "1"; };
  src.onerror = () => { state.textContent = "reconnecting…"; };
  // The stream's own failure (a bad cursor, Redis refusing): say it, and
  // stop, rather than reconnect into it again.
  src.addEventListener("failure", (m) => {
    src.close();
    state.textContent = "stopped: " + JSON.parse(m.data);
    state.className = "error";
  });
  src.onmessage = (m) => {
    const ev = JSON.parse(m.data);
    const tr = feed.insertRow(0);
    tr.className = "event ev-" + ev.type;
    tr.dataset.type = ev.type;
    tr.dataset.id = ev.id;
    cell(tr, new Date(ev.time_ms).toISOString().replace("T", " ").replace("Z", ""));
    cell(tr, ev.type);
    const a = document.createElement("a");
    a.className = "mid";
    a.href = "message?" + new URLSearchParams({topic: feed.dataset.topic, id: ev.id});
    a.textContent = ev.id;
    tr.insertCell().appendChild(a);
    cell(tr, String(ev.attempt), "n");
    cell(tr, ev.data || "", "err");
    while (feed.rows.length > keep) feed.deleteRow(feed.rows.length - 1);
  };
})();

// The history charts (#history): buckets of per-minute counts every client
// wrote to Redis, from api/history, drawn as soon as the page loads; then
// the newest buckets are read again every 2 s and replace or follow the
// last points.
(function () {
  const section = document.getElementById("history");
  if (!section) return;
  const src = section.dataset.src;
  const range = section.dataset.range;
  const span = {"1h": 3600e3, "24h": 86400e3, "72h": 259200e3}[range] || 3600e3;
  const colors = ["#2f6fde", "#c9372c", "#1f845a", "#b26b00", "#6c2bb0", "#0b7f8f", "#8a5a44", "#5b6477"];
  const ALL = "all topics";
  const series = new Map(); // name -> Map(bucket start -> point)
  const names = [];         // topic names in first-seen order, for stable colors
  let step = 60e3, now = 0, last = 0;
  const svgNS = "http://www.w3.org/2000/svg";
  const el = (name, attrs) => {
    const e = document.createElementNS(svgNS, name);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  };
  const fmt = v => Math.abs(v) >= 1e6 ? (v / 1e6).toFixed(1) + "M" : Math.abs(v) >= 1e3 ? (v / 1e3).toFixed(1) + "k" :
    Number.isInteger(v) ? String(v) : v.toFixed(1);
  const nice = v => {
    if (v <= 0) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  };
  // value of a field, or of fields joined by "+".
  const value = (p, field) => field.split("+").reduce((s, f) => s + (p[f] || 0), 0);
  const color = name => name === ALL ? "#1d2433" : colors[names.indexOf(name) % colors.length];
  const shown = () => (names.length > 1 && series.has(ALL)) ? names.concat([ALL]) : names;

  function merge(name, points) {
    if (!series.has(name)) {
      series.set(name, new Map());
      if (name !== ALL) names.push(name);
    }
    const m = series.get(name);
    for (const p of points) { m.set(p.t, p); last = Math.max(last, p.t); }
    for (const t of m.keys()) if (t < now - span - step) m.delete(t);
  }

  function draw(svg) {
    const W = 400, H = 120, L = 34, B = 14;
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const field = svg.dataset.field;
    const tmin = now - span, tmax = now;
    let vmax = 0, any = false;
    const data = {};
    for (const name of shown()) {
      const pts = [...series.get(name).values()].filter(p => p.t >= tmin - step).sort((a, b) => a.t - b.t)
        .map(p => [Math.max(p.t, tmin), value(p, field)]);
      for (const [, v] of pts) { vmax = Math.max(vmax, v); any = true; }
      data[name] = pts;
    }
    if (!any) {
      svg.appendChild(el("text", {x: L, y: H / 2})).textContent = "nothing recorded in this range";
      return;
    }
    vmax = nice(vmax);
    const x = t => L + (W - L - 4) * (t - tmin) / (tmax - tmin);
    const y = v => (H - B) - (H - B - 6) * v / vmax;
    svg.appendChild(el("line", {class: "axis", x1: L, y1: H - B, x2: W, y2: H - B}));
    svg.appendChild(el("line", {class: "axis", x1: L, y1: 4, x2: L, y2: H - B}));
    svg.appendChild(el("text", {x: 2, y: 12})).textContent = fmt(vmax);
    svg.appendChild(el("text", {x: 2, y: H - B})).textContent = "0";
    svg.appendChild(el("text", {x: L, y: H - 2})).textContent = "−" + range;
    svg.appendChild(el("text", {x: W - 24, y: H - 2})).textContent = "now";
    for (const name of shown()) {
      const pts = data[name];
      if (!pts.length) continue;
      const attrs = {stroke: color(name), "data-name": name};
      if (pts.length === 1) { // one bucket: a dot, not an invisible line
        svg.appendChild(el("circle", Object.assign(attrs, {cx: x(pts[0][0]).toFixed(1), cy: y(pts[0][1]).toFixed(1), r: 2, fill: color(name)})));
        continue;
      }
      attrs.points = pts.map(([t, v]) => x(t).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
      if (name === ALL) attrs.class = "all";
      svg.appendChild(el("polyline", attrs));
    }
  }

  function legend() {
    const box = document.getElementById("history-legend");
    if (!box) return;
    box.textContent = "";
    for (const name of shown()) {
      const s = document.createElement("span");
      const sw = document.createElement("i");
      sw.style.background = color(name); // CSSOM, allowed by the CSP
      s.appendChild(sw);
      s.appendChild(document.createTextNode(name));
      box.appendChild(s);
    }
  }

  async function load() {
    const q = "range=" + encodeURIComponent(range) + (last ? "&since=" + last : "");
    const res = await fetch(src + (src.includes("?") ? "&" : "?") + q, {cache: "no-store", credentials: "same-origin"});
    if (!res.ok) return;
    const h = await res.json();
    now = h.now_ms;
    step = h.step_ms;
    for (const tp of h.topics) if (!tp.error) merge(tp.name, tp.points || []);
    if (h.total) merge(ALL, h.total);
    section.querySelectorAll("svg.hchart").forEach(draw);
    legend();
    // For tests and for a glance in the inspector: buckets with traffic.
    let busy = 0, sent = 0;
    for (const name of names) for (const p of series.get(name).values()) {
      if (p.sent || p.completed) busy++;
      sent += p.sent || 0;
    }
    section.dataset.busy = String(busy);
    section.dataset.sent = String(sent);
    section.dataset.loaded = "1";
  }

  async function tick() {
    try { await load(); } catch (e) { /* a failed read leaves the charts as they are; the next one tries again */ }
    setTimeout(tick, 2000);
  }
  tick();
})();
