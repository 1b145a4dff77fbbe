// paylab console: polls /api/state every second and fills the page; the
// chaos token lives in this script's memory only, and goes with every
// action (payments, verify, toggles, kills, the switch) as "Authorization:
// Bearer …" — the processes decide.
"use strict";

let token = "";
const $ = (sel, el = document) => el.querySelector(sel);
const $$ = (sel, el = document) => Array.from(el.querySelectorAll(sel));

function get(obj, path) {
  return path.split(".").reduce((o, k) => (o == null ? undefined : o[k]), obj);
}

function fmt(v, kind) {
  if (v === undefined || v === null) return "";
  if (typeof v === "boolean") return v ? "on" : "off";
  if (typeof v !== "number") return String(v);
  if (kind === "rate") return v.toFixed(1);
  if (kind === "age") return v < 1 ? (v * 1000).toFixed(0) + " ms" : v.toFixed(1) + " s";
  if (kind === "bytes") { // as PostgreSQL counts them (pg_size_pretty, max_slot_wal_keep_size)
    const units = ["bytes", "kB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? count(v, "byte", "bytes") : v.toFixed(1) + " " + units[i];
  }
  return Number.isInteger(v) ? String(v) : v.toFixed(0);
}

// count is n followed by the noun, singular for exactly one.
function count(n, one, many) {
  return `${fmt(n)} ${n === 1 ? one : many}`;
}

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => "&#" + c.charCodeAt(0) + ";");
}

function log(msg, ok) {
  const li = document.createElement("li");
  li.textContent = new Date().toLocaleTimeString() + "  " + msg;
  li.className = ok ? "ok" : "bad";
  const list = $("#log");
  list.prepend(li);
  while (list.children.length > 8) list.lastChild.remove();
}

// call sends a request to the console; actions carry the token.
async function call(method, url, body, withToken) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (withToken && token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = {};
  try { data = await res.json(); } catch (e) { /* empty answer */ }
  return { status: res.status, ok: res.ok, data };
}

function render(st) {
  document.body.dataset.mode = st.settings.mode;
  document.body.dataset.relay = st.settings.relay_mode;
  for (const el of $$("[data-k]")) {
    const v = get(st, el.dataset.k);
    el.textContent = fmt(v, el.dataset.fmt);
  }
  // The noun after a count: data-one for exactly one, the page's text
  // (kept in data-many) otherwise.
  for (const el of $$("[data-unit]")) {
    if (el.dataset.many === undefined) el.dataset.many = el.textContent;
    el.textContent = get(st, el.dataset.unit) === 1 ? el.dataset.one : el.dataset.many;
  }
  for (const el of $$("[data-up]")) el.classList.toggle("up", !!get(st, el.dataset.up));

  const probs = $("#problems");
  probs.hidden = !(st.problems && st.problems.length);
  probs.textContent = (st.problems || []).join(" · ");

  const relays = (st.procs || []).filter((p) => p.role === "relay");
  $("#relays").innerHTML = relays.length
    ? relays.map((p) => `<li data-relay="${esc(p.name)}"><span class="dot${p.up ? " up" : ""}"></span>${esc(p.name)}` +
        (p.wal_role ? ` <span class="role ${esc(p.wal_role)}">${esc(p.wal_role)}</span>` : "") +
        `: ${fmt(p.published)} published, ${fmt(p.rate, "rate")}/s</li>`).join("")
    : `<li class="muted">none reachable</li>`;
  if (st.wal) renderWAL(st.wal);
  $("#leases").innerHTML = (st.leases || []).length
    ? st.leases.map((l) => `<li>${esc(l.owner)}: ${l.held}${l.expired ? ` (${l.expired} expired)` : ""}</li>`).join("")
    : `<li class="muted">none</li>`;
  const parts = st.kafka.partitions || [];
  const top = Math.max(1, ...parts);
  $("#partitions").innerHTML = parts.map((end, i) =>
    `<li><span class="bar" style="width:${Math.round((end / top) * 100)}%"></span><span>p${i}: ${end}</span></li>`).join("");

  const seen = new Set();
  for (const p of st.procs || []) {
    seen.add(p.name);
    const card = $(`.proc[data-proc="${CSS.escape(p.name)}"]`);
    if (!card) { $("#reload").hidden = false; continue; }
    $(".dot", card).classList.toggle("up", p.up);
    $(".restarts", card).textContent = p.restarts ? `restarted ${p.restarts}×` : "";
  }
  if ($$(".proc").some((c) => !seen.has(c.dataset.proc))) $("#reload").hidden = false;

  const load = st.load;
  if (load.count) {
    const codes = Object.entries(load.status_codes || {}).map(([c, n]) => `${c === "0" ? "no answer" : c}×${n}`).join(" ");
    $("#load-state").textContent = load.running
      ? `placing ${load.count} at ${load.rate}/s: ${load.created} created`
      : `placed ${load.count} at ${load.rate}/s: ${load.created} created${codes ? " (" + codes + ")" : ""}${load.error ? " — " + load.error : ""}`;
  }
  $("#load-go").disabled = !token || load.running || !!st.switching;
  $("#mode-state").textContent = st.switching ? `switching to ${st.switching}: settling, then restarting the API…` : "";

  const v = st.verify;
  $("#verify-go").disabled = !token || v.running;
  const verdict = $("#verify-verdict");
  const table = $("#verify-table");
  if (v.running) {
    verdict.className = "muted";
    verdict.textContent = "waiting for the pipeline to settle…";
  } else if (v.error) {
    verdict.className = "bad";
    verdict.textContent = v.error;
  } else if (!v.report) {
    verdict.className = "muted";
    verdict.textContent = "not run yet";
    table.hidden = true;
    $("#verify-wire").textContent = "";
  } else {
    const r = v.report;
    verdict.dataset.at = r.at;
    table.hidden = false;
    verdict.className = r.violations.length ? "bad verdict" : "ok verdict";
    verdict.textContent = r.violations.length
      ? `HOLE OPEN — ${r.violations.join(", ")} (of ${count(r.captures, "capture", "captures")})`
      : r.captures === 1 ? "closed — the one capture applied exactly once"
      : `closed — every one of ${r.captures} captures applied exactly once`;
    $("#verify-wire").textContent = `${count(r.wire_duplicates, "duplicate", "duplicates")} on the wire, ${r.inbox_absorbed} absorbed by the inboxes` +
      (r.before && r.before.length ? ` · before: ${r.before.join(", ")}` : "");
  }
}

// renderWAL shows the WAL relays' reader lease and replication slot.
function renderWAL(w) {
  const lease = $("#wal-lease");
  lease.className = w.owner ? "" : "muted";
  if (!w.owner) lease.textContent = w.slot ? "none held: a standby takes it at its next poll" : "none";
  else if (w.lease_left_s > 0) lease.textContent = `${w.owner}, ${fmt(w.lease_left_s, "age")} left`;
  else lease.textContent = `${w.owner}, expired ${fmt(-w.lease_left_s, "age")} ago: a standby may take it over`;
  $("#wal-slot-name").textContent = w.slot;
  const rows = [];
  if (!w.slot) rows.push(`<li class="muted">not set up yet: the relays create it when they start</li>`);
  else if (!w.exists) rows.push(`<li class="bad">missing: nothing is streamed until a relay creates it again</li>`);
  else {
    rows.push(`<li class="${w.active ? "ok" : "muted"}">${w.active ? "streamed by the reader" : "not streamed: no reader connected"}</li>`);
    rows.push(`<li>confirmed <code>${esc(w.confirmed_flush_lsn)}</code>, lag ${fmt(w.lag_bytes, "bytes")}</li>`);
    rows.push(`<li>restart <code>${esc(w.restart_lsn)}</code>, ${fmt(w.retained_bytes, "bytes")} of WAL kept</li>`);
    const safe = w.safe_wal_bytes === undefined ? "" : `, ${fmt(w.safe_wal_bytes, "bytes")} more before it is lost`;
    rows.push(`<li class="${w.wal_status === "lost" || w.wal_status === "unreserved" ? "bad" : ""}">WAL ${esc(w.wal_status)}${safe}</li>`);
  }
  $("#wal-slot").innerHTML = rows.join("");
}

async function poll() {
  try {
    const res = await fetch("/api/state", { cache: "no-store" });
    if (res.ok) render(await res.json());
  } catch (e) { /* the console restarting; next second */ }
  if (token) await pollFaults();
}

// pollFaults shows each point's armed fault and how often it fired.
async function pollFaults() {
  const r = await call("GET", "/api/faults", undefined, true);
  if (!r.ok) return;
  for (const [name, f] of Object.entries(r.data)) {
    const card = $(`.proc[data-proc="${CSS.escape(name)}"]`);
    if (!card) continue;
    for (const row of $$(".point", card)) {
      const s = (f.points || []).find((p) => p.point === row.dataset.point);
      const el = $(".status", row);
      row.classList.toggle("armed", !!(s && s.armed));
      if (f.status !== 200) { el.textContent = f.error || ""; continue; }
      if (!s || !s.armed) { el.textContent = s && s.fired ? `fired ${s.fired}` : ""; continue; }
      const fault = s.fault;
      el.textContent = `armed: ${fault.action}` + (fault.delay ? " " + fault.delay : "") +
        (s.remaining !== undefined ? `, ${s.remaining} left` : "") + (fault.probability ? `, p ${fault.probability}` : "") + `, fired ${s.fired}`;
    }
  }
}

function enableToggles(on) {
  for (const el of $$(".needs-token")) el.disabled = !on || el.dataset.fixed === "true";
}

$("#token-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  token = $("#token").value.trim();
  $("#token").value = "";
  const state = $("#token-state");
  if (!token) { enableToggles(false); state.textContent = "no token: the actions are disabled"; state.className = "muted"; return; }
  const r = await call("GET", "/api/faults", undefined, true);
  const answers = r.ok ? Object.values(r.data) : [];
  if (!answers.some((a) => a.status === 200)) {
    token = "";
    enableToggles(false);
    state.textContent = answers.some((a) => a.status === 401) ? "token refused by the processes"
      : answers.length && answers.every((a) => a.status === 404) ? "the deployment runs without chaos controls (CHAOS_ENABLED=false): the actions are disabled"
      : "no process answers: try again once they are up";
    state.className = "bad";
    return;
  }
  enableToggles(true);
  state.textContent = "token accepted (kept in this page only)";
  state.className = "ok";
  pollFaults();
});

async function toggle(method, proc, path, body, what) {
  const r = await call(method, `/api/procs/${encodeURIComponent(proc)}/${path}`, body, true);
  log(`${proc}: ${what}: ${r.ok ? "done" : r.status + " " + (r.data.error || "")}`, r.ok);
  pollFaults();
}

$("#faults").addEventListener("click", (ev) => {
  const btn = ev.target.closest("button");
  if (!btn) return;
  const card = btn.closest(".proc");
  const proc = card.dataset.proc;
  const row = btn.closest(".point");
  if (btn.classList.contains("kill")) return toggle("POST", proc, "kill", undefined, "kill");
  if (btn.classList.contains("disarm-all")) return toggle("DELETE", proc, "faults", undefined, "disarm all");
  if (!row) return;
  const point = row.dataset.point;
  if (btn.classList.contains("disarm")) return toggle("DELETE", proc, "faults/" + encodeURIComponent(point), undefined, "disarm " + point);
  const fault = { action: $(".action", row).value };
  const count = parseInt($(".count", row).value, 10);
  const p = parseFloat($(".probability", row).value);
  const delay = $(".delay", row).value.trim();
  if (count > 0) fault.count = count;
  if (p > 0) fault.probability = p;
  if (fault.action === "delay") fault.delay = delay || "2s";
  toggle("PUT", proc, "faults/" + encodeURIComponent(point), fault, `arm ${point} (${fault.action})`);
});

$("#load-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const r = await call("POST", "/api/load", { count: +$("#load-count").value, rate: +$("#load-rate").value }, true);
  if (!r.ok) log(`place payments: ${r.status} ${r.data.error || ""}`, false);
  poll();
});

$("#mode-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const mode = $("#mode-select").value;
  const r = await call("POST", "/api/mode", { mode }, true);
  log(`switch to ${mode}: ${r.ok ? "started" : r.status + " " + (r.data.error || "")}`, r.ok);
  poll();
});

$("#verify-go").addEventListener("click", async () => {
  const r = await call("POST", "/api/verify", {}, true);
  if (!r.ok) log(`verify: ${r.status} ${r.data.error || ""}`, false);
  poll();
});

poll();
setInterval(poll, 1000);
