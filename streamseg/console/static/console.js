// The streamseg console: a live grid of cameras and a small zone/line editor.
// Our own code, no framework: it talks to /api (see streamseg/console/server.py).
"use strict";

const params = new URLSearchParams(location.search);
if (params.get("token")) sessionStorage.setItem("streamseg-token", params.get("token"));
const tokenInput = document.getElementById("token");
tokenInput.value = sessionStorage.getItem("streamseg-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("streamseg-token", tokenInput.value));

function token() { return tokenInput.value.trim(); }
function withToken(url) { return token() ? `${url}?token=${encodeURIComponent(token())}` : url; }
// A tile's live view; `n` changes the address when the camera changes hands (a new stream).
function liveUrl(id, n) {
  const url = withToken(`/api/cameras/${encodeURIComponent(id)}/live.mjpg`);
  return n ? `${url}${url.includes("?") ? "&" : "?"}n=${n}` : url;
}

async function api(method, path, body) {
  const headers = { "Content-Type": "application/json" };
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const data = await response.json().catch(() => ({}));
  return { status: response.status, data };
}

const tiles = new Map();

function tile(id) {
  if (tiles.has(id)) return tiles.get(id);
  const el = document.createElement("article");
  el.className = "tile";
  el.dataset.camera = id;
  el.innerHTML = `<div class="view"><img alt="live view of ${id}"></div>
    <div class="caption"><span class="id"></span><span class="state"></span><span class="fps"></span>
    <a class="owner"></a><button class="draw-btn" type="button">draw</button><span class="url"></span></div>`;
  el.querySelector(".id").textContent = id;
  el.querySelector("img").src = liveUrl(id, 0);
  el.querySelector(".draw-btn").addEventListener("click", () => editor.open(id));
  document.getElementById("grid").appendChild(el);
  tiles.set(id, el);
  return el;
}

async function refresh() {
  const { status, data } = await api("GET", "/api/cameras");
  const summary = document.getElementById("summary");
  if (status !== 200) { summary.textContent = data.error || `error ${status}`; return; }
  const cams = Object.values(data.cameras);
  summary.textContent = `${cams.length} camera(s); ${cams.filter(c => c.state === "streaming").length} streaming`;
  for (const cam of cams) {
    const el = tile(cam.id);
    const state = el.querySelector(".state");
    state.textContent = cam.state;
    state.className = `state state-${cam.state}`;
    el.querySelector(".fps").textContent = cam.fps == null ? "" : `${cam.fps.toFixed(1)} fps`;
    el.querySelector(".url").textContent = cam.url;
    el.dataset.state = cam.state;
    showOwner(el, cam);
  }
  for (const [id, el] of tiles) {
    if (!data.cameras[id]) { el.remove(); tiles.delete(id); }
  }
  fillChoices("camera", Object.keys(data.cameras));
  fillChoices("kind", data.alert_kinds || []);
}

// In a fleet: who serves the camera, a link to its console when another worker does;
// when the camera changes hands the tile opens its live view anew (through its new owner).
function showOwner(el, cam) {
  const owner = el.querySelector(".owner");
  owner.textContent = cam.owner ? `on ${cam.owner}` : "";
  if (cam.remote && cam.console) owner.href = cam.console; else owner.removeAttribute("href");
  el.dataset.remote = cam.remote ? "true" : "false";
  const was = el.dataset.owner;
  el.dataset.owner = cam.owner || "";
  if (was !== undefined && was !== el.dataset.owner) {
    el.dataset.handovers = String(Number(el.dataset.handovers || 0) + 1);
    el.querySelector("img").src = liveUrl(cam.id, el.dataset.handovers);
  }
}

// The events filter's choices: the cameras served now, the alert kinds there are.
function fillChoices(name, values) {
  const select = document.querySelector(`#event-filter select[name="${name}"]`);
  const have = Array.from(select.options).slice(1).map(o => o.value);
  if (have.join("\n") === values.join("\n")) return;
  const chosen = select.value;
  select.replaceChildren(new Option("all", ""), ...values.map(v => new Option(v, v)));
  select.value = values.includes(chosen) ? chosen : "";
}

const editor = {
  camera: null, points: [], canvas: null,
  open(id) {
    this.close();
    this.camera = id;
    this.points = [];
    const view = tiles.get(id).querySelector(".view");
    const canvas = document.createElement("canvas");
    canvas.className = "draw";
    view.appendChild(canvas);
    canvas.addEventListener("click", (e) => this.add(e));
    this.canvas = canvas;
    document.getElementById("editor-camera").textContent = id;
    document.getElementById("editor").hidden = false;
    this.draw();
  },
  close() {
    if (this.canvas) this.canvas.remove();
    this.canvas = null;
    document.getElementById("editor").hidden = true;
  },
  add(e) {
    const img = tiles.get(this.camera).querySelector("img");
    const rect = this.canvas.getBoundingClientRect();
    const sx = img.naturalWidth / rect.width, sy = img.naturalHeight / rect.height;
    this.points.push([Math.round((e.clientX - rect.left) * sx), Math.round((e.clientY - rect.top) * sy)]);
    this.draw();
  },
  draw() {
    const c = this.canvas, img = tiles.get(this.camera).querySelector("img");
    c.width = img.naturalWidth || 320; c.height = img.naturalHeight || 240;
    const g = c.getContext("2d");
    g.clearRect(0, 0, c.width, c.height);
    g.strokeStyle = "#f0f"; g.fillStyle = "#f0f"; g.lineWidth = 2;
    g.beginPath();
    this.points.forEach(([x, y], i) => (i ? g.lineTo(x, y) : g.moveTo(x, y)));
    if (document.getElementById("editor-shape").value === "zones" && this.points.length > 2) g.closePath();
    g.stroke();
    for (const [x, y] of this.points) g.fillRect(x - 2, y - 2, 4, 4);
    document.getElementById("editor-points").textContent = `${this.points.length} points`;
  },
  async save() {
    const kind = document.getElementById("editor-shape").value;
    const name = document.getElementById("editor-name").value.trim();
    const base = `/api/cameras/${encodeURIComponent(this.camera)}`;
    const shape = kind === "zones" ? { name, polygon: this.points } : { name, points: this.points };
    const out = document.getElementById("editor-result");
    let r = await api("POST", `${base}/${kind}`, shape);
    if (r.status === 409 && r.data.issues && r.data.issues[0].message === "already exists") {
      r = await api("PUT", `${base}/${kind}/${encodeURIComponent(name)}`, shape);
    }
    if (r.status >= 300) { out.textContent = describe(r); return; }
    if (document.getElementById("editor-rule").value === "auto") {
      const rule = kind === "zones" ? { name: `${name}-rule`, type: "zone", zone: name }
                                    : { name: `${name}-rule`, type: "line", line: name };
      r = await api("POST", `${base}/rules`, rule);
      if (r.status === 409) r = await api("PUT", `${base}/rules/${encodeURIComponent(rule.name)}`, rule);
      if (r.status >= 300) { out.textContent = describe(r); return; }
    }
    out.textContent = "saved";
    this.points = [];
    this.draw();
  },
};

function describe({ status, data }) {
  const lines = [`${status}: ${data.error || "refused"}`];
  for (const i of data.issues || []) lines.push(`${i.field || ""}: ${i.message}${i.hint ? ` (${i.hint})` : ""}`);
  return lines.join("\n");
}

document.getElementById("editor-save").addEventListener("click", () => editor.save());
document.getElementById("editor-clear").addEventListener("click", () => { editor.points = []; editor.draw(); });
document.getElementById("editor-close").addEventListener("click", () => editor.close());
document.getElementById("editor-shape").addEventListener("change", () => editor.draw());

// -- events timeline -------------------------------------------------------
const shown = new Map();
const latest = new Map();  // event id -> the event as last listed (its clip appears later)
let openId = null;

async function refreshEvents() {
  const form = new FormData(document.getElementById("event-filter"));
  const q = new URLSearchParams();
  for (const key of ["camera", "rule", "kind", "label"]) if (form.get(key)) q.set(key, form.get(key));
  if (form.get("window")) q.set("since", String(Date.now() / 1000 - Number(form.get("window"))));
  const { status, data } = await api("GET", `/api/events?${q}`);
  if (status !== 200) return;
  document.getElementById("event-count").textContent =
    `${data.events.length}${data.events.length >= 100 ? "+" : ""} shown`;
  const list = document.getElementById("event-list");
  const ids = new Set(data.events.map(e => e.id));
  for (const [id, li] of shown) if (!ids.has(id)) { li.remove(); shown.delete(id); }
  for (const id of latest.keys()) if (!ids.has(id)) latest.delete(id);
  let before = list.firstChild;
  for (const e of data.events) {
    latest.set(e.id, e);
    if (e.id === openId) showClip(e);
    if (shown.has(e.id)) { before = shown.get(e.id).nextSibling; continue; }
    const li = document.createElement("li");
    li.dataset.event = e.id;
    li.dataset.rule = e.rule;
    li.dataset.kind = e.kind;
    li.dataset.camera = e.camera_id;
    if (e.worker) li.dataset.worker = e.worker;
    const what = `${e.label_name || ""}${e.track_id != null ? ` #${e.track_id}` : ""}` +
      `${e.count != null ? ` (${e.count})` : ""}`;
    const cells = [
      ["time", new Date(e.time * 1000).toLocaleTimeString()], ["camera", e.camera_id],
      ["rule", e.rule], ["kind", e.kind], ["what", what],
      ["where", e.zone ? `zone ${e.zone}` : e.line ? `line ${e.line}` : ""],
    ];
    for (const [cls, text] of cells) {
      const span = document.createElement("span");
      span.className = cls; span.textContent = text; span.title = text;
      li.appendChild(span);
    }
    li.addEventListener("click", () => openEvent(e, li));
    list.insertBefore(li, before);
    shown.set(e.id, li);
  }
}

function openEvent(e, li) {
  for (const other of shown.values()) other.classList.remove("selected");
  li.classList.add("selected");
  document.getElementById("event-detail").hidden = false;
  const snapshot = document.getElementById("event-snapshot");
  if (e.snapshot) snapshot.src = withToken(e.snapshot); else snapshot.removeAttribute("src");
  openId = e.id;
  showClip(latest.get(e.id) || e);
  const why = {
    rule: e.rule_config, event: e.kind, zone: e.zone, line: e.line, count: e.count,
    track: e.track_id, class: e.label_name, score: e.score, extra: e.extra, path: e.path,
  };
  document.getElementById("event-why").textContent = JSON.stringify(why, null, 1);
}

// The alert's recorded clip (record.clips): a link once written, a note while it records.
function showClip(e) {
  const a = document.getElementById("event-clip");
  a.hidden = !e.clip;
  if (e.clip && e.clip_ready) { a.href = withToken(e.clip); a.textContent = "clip"; }
  else { a.removeAttribute("href"); a.textContent = "clip (recording...)"; }
}

document.getElementById("event-filter").addEventListener("input", () => {
  for (const li of shown.values()) li.remove();
  shown.clear();
  refreshEvents();
});

// -- health ----------------------------------------------------------------
function sparkline(values, width = 140, height = 28) {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  const points = values.map((v, i) => [i, v]).filter(([, v]) => v != null);
  if (points.length > 1) {
    const max = Math.max(...points.map(([, v]) => v), 1e-9);
    const n = values.length - 1;
    const path = document.createElementNS(svg.namespaceURI, "polyline");
    path.setAttribute("class", "spark");
    path.setAttribute("points", points.map(([i, v]) =>
      `${(i / n * (width - 2) + 1).toFixed(1)},${(height - 2 - v / max * (height - 4)).toFixed(1)}`).join(" "));
    svg.appendChild(path);
    const label = document.createElementNS(svg.namespaceURI, "title");
    label.textContent = `now ${points[points.length - 1][1]}, max ${max}`;
    svg.appendChild(label);
  }
  return svg;
}

async function refreshHealth() {
  const { status, data } = await api("GET", "/api/health");
  if (status !== 200) return;
  const col = Object.fromEntries(data.fields.map((f, i) => [f, i]));
  const rows = document.getElementById("health-rows");
  rows.replaceChildren();
  for (const cam of Object.values(data.cameras)) {
    const tr = document.createElement("tr");
    tr.dataset.camera = cam.id;
    // record.retention: a full disk stops recording (serving goes on); say so next to the state
    let state = cam.recording === "disk_full" ? `${cam.state}, RECORDING STOPPED: disk full` : cam.state;
    if (cam.remote) state += ` (on ${cam.owner || "no worker"})`;  // a fleet's camera another worker serves
    const cells = [cam.id, state, null, null, `${cam.skipped} / ${cam.lost}`, String(cam.reconnects ?? ""), String(cam.stalls ?? ""), cam.last_error || ""];
    cells.forEach((text, i) => {
      const td = document.createElement("td");
      if (i === 2) td.appendChild(sparkline(cam.history.map(p => p[col.fps])));
      else if (i === 3) td.appendChild(sparkline(cam.history.map(p => p[col.lag_s])));
      else td.textContent = text;
      if (i === 7) td.className = "error";
      tr.appendChild(td);
    });
    rows.appendChild(tr);
  }
  const m = data.model;
  const s = m.last_swap;
  const swap = !s ? (m.hot_swap ? "; no hot swap yet" : "; hot swap off")
    : `; last swap ${new Date(s.time * 1000).toLocaleTimeString()} (${s.source}): ` +
      (s.ok ? `loaded ${s.weights} in ${s.load_s} s` : `FAILED ${s.weights}: ${s.error}`);
  const p = m.process;
  const health = (m.state && m.state !== "running" && m.state !== "loading" ? ` ${m.state.toUpperCase()}` : "") +
    (p ? `; own process pid ${p.pid ?? "-"}, ${p.restarts} restarts` : "") +
    (m.failed_batches ? `; ${m.failed_batches} failed batches, last: ${m.last_error}` : "");
  document.getElementById("model-line").textContent =
    `model ${m.arch} (${m.backend}, ${m.precision}, ${m.device}) weights ${m.weights || "none"}${m.loaded ? "" : " (loading)"}${health}${swap}`;
  document.getElementById("sinks-line").textContent = "sinks: " + Object.entries(data.sinks).map(([name, s]) =>
    `${name} ${s.connected ? "connected" : "DOWN"} (${s.published ?? 0} published, ${s.buffered ?? 0} buffered, ${s.lost ?? 0} lost)`).join("; ");
  // Parts that are off while the rest runs (rules disabled because they failed).
  const off = Object.entries((data.degraded || {}).rules || {}).flatMap(([cam, rules]) =>
    Object.entries(rules).map(([rule, why]) => `rule ${rule} of ${cam} is off (${why})`));
  document.getElementById("degraded-line").textContent = off.length ? "DEGRADED: " + off.join("; ") : "";
}

refreshHealth();
setInterval(refreshHealth, 5000);
refresh();
setInterval(refresh, 2000);
refreshEvents();
setInterval(refreshEvents, 500);
