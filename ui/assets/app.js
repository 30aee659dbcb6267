// regressd status page. It renders what the admin API's JSON endpoints
// answer (/api/v3/status, /api/v3/runs, /api/v3/triggers/<name>/series), so
// the page and scripts see the same facts. Read-only: it sends nothing but
// GET requests, and every value is written as text, never as markup.
"use strict";

(() => {
  const app = document.getElementById("app");
  const page = app.dataset.page;
  const name = app.dataset.name;

  // el builds an element; strings and numbers become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else e.setAttribute(k, v);
    }
    for (const c of children.flat(Infinity)) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  async function getJSON(url) {
    const res = await fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    let body = null;
    try { body = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) {
      const msg = (body && (body.error || body.message)) || `HTTP ${res.status}`;
      const err = new Error(msg);
      err.status = res.status;
      throw err;
    }
    return body;
  }

  const fmtTime = (s) => (s ? s.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—");
  const fmtNum = (n) => (n === undefined || n === null ? "—" : Number(n).toLocaleString("en-US"));
  const status = (s) => el("span", { class: `status status-${s}` }, s);
  const triggerLink = (t) => el("a", { href: `/ui/triggers/${encodeURIComponent(t)}` }, t);
  const runLink = (id) => el("a", { href: `/ui/runs/${encodeURIComponent(id)}` }, id);
  const errorBox = (msg) => el("p", { class: "error", role: "alert" }, msg);

  function table(headers, rows, empty) {
    if (rows.length === 0) return el("p", { class: "muted" }, empty);
    const head = el("tr", {}, headers.map(([h, cls]) => el("th", { class: cls, scope: "col" }, h)));
    const body = rows.map((cells) => el("tr", {}, cells.map((c, i) => el("td", { class: headers[i][1] }, c))));
    return el("div", { class: "wrap" }, el("table", {}, el("thead", {}, head), el("tbody", {}, body)));
  }

  function card(label, value, note) {
    return el("div", { class: "card" }, el("div", { class: "label" }, label), el("div", { class: "value" }, value),
      note ? el("div", { class: "note" }, note) : null);
  }

  function render(...nodes) {
    app.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false && n !== ""));
    app.dataset.ready = "true"; // tests wait for this
  }

  // --- overview: /ui/ --------------------------------------------------------

  function runsTable(runs, withTrigger) {
    const headers = [["Run"], ["Trigger"], ["Status"], ["Origin"], ["Window"], ["Read", "num"], ["Queries", "num"],
      ["Written", "num"], ["Skipped existing", "num"], ["Updated"], ["Message"]];
    if (!withTrigger) headers.splice(1, 1);
    const rows = runs.map((r) => {
      const cells = [runLink(r.task_id), triggerLink(r.trigger), status(r.status), r.origin || "—",
        `${fmtTime(r.window_start)} → ${fmtTime(r.window_end)}`, fmtNum(r.read_rows), fmtNum(r.query_rows),
        fmtNum(r.written), fmtNum(r.skipped_existing), fmtTime(r.updated), r.message || r.first_failure || ""];
      if (!withTrigger) cells.splice(1, 1);
      return cells;
    });
    return table(headers, rows, "No runs in the task ledger yet.");
  }

  async function overview() {
    const s = await getJSON("/api/v3/status");
    document.title = "regressd · status";
    const b = s.breaker;
    const workers = b.workers.map((w) => `${w.worker}: ${w.breaker}`).join(", ");
    const dl = s.dead_letters;
    const cards = el("div", { class: "cards" },
      card("Circuit breaker", status(b.state), b.message || (workers ? `workers: ${workers}` : "")),
      card("Dead letters", dl.count === null ? "unknown" : fmtNum(dl.count),
        dl.message || (dl.count > 0 ? "regressd dlq list shows them" : "nothing dead-lettered")),
      card("Triggers", fmtNum(s.triggers.length), ""),
    );
    const trows = s.triggers.map((t) => {
      const r = t.last_run;
      return [triggerLink(t.trigger_name), el("code", {}, t.trigger_specification),
        status(t.enabled ? "enabled" : "disabled"),
        r ? el("span", {}, status(r.status), " ", runLink(r.task_id)) : el("span", { class: "muted" }, "never run"),
        r ? fmtTime(r.updated) : "—", r ? fmtNum(r.written) : "—", r ? fmtNum(r.skipped_existing) : "—"];
    });
    render(
      el("h1", {}, "Status"),
      cards,
      s.ledger.available ? null : el("p", { class: "notice" }, s.ledger.message),
      el("h2", {}, "Triggers"),
      table([["Trigger"], ["Spec"], ["Enabled"], ["Last run"], ["Time"], ["Written", "num"], ["Skipped existing", "num"]],
        trows, "No triggers yet: create one with 'regressd trigger create'."),
      el("h2", {}, "Recent runs"),
      s.ledger.available ? runsTable(s.recent_runs, true) : el("p", { class: "muted" }, "Unavailable."),
      el("p", { class: "muted" }, `As of ${fmtTime(s.generated)}. Reload for newer facts.`),
    );
  }

  // --- a trigger: /ui/triggers/<name> --------------------------------------

  async function triggerPage() {
    document.title = `regressd · ${name}`;
    const [s, runs] = await Promise.all([getJSON("/api/v3/status"), getJSON(`/api/v3/runs?trigger=${encodeURIComponent(name)}&limit=20`).catch((e) => e)]);
    const t = s.triggers.find((x) => x.trigger_name === name);
    if (!t) {
      render(el("h1", {}, name), errorBox(`No trigger named "${name}".`));
      return;
    }
    const args = Object.entries(t.trigger_arguments || {}).sort(([a], [b]) => a.localeCompare(b));
    const chartBox = el("div", { id: "chart" });
    const chartNote = el("p", { class: "legend-note", id: "chart-note" }, "Loading the series…");
    render(
      el("h1", {}, "Trigger ", el("code", {}, name)),
      el("dl", { class: "report" },
        el("dt", {}, "spec"), el("dd", {}, el("code", {}, t.trigger_specification)),
        el("dt", {}, "enabled"), el("dd", {}, status(t.enabled ? "enabled" : "disabled")),
        el("dt", {}, "last run"), el("dd", {}, t.last_run ? el("span", {}, status(t.last_run.status), " ", runLink(t.last_run.task_id)) : "never"),
        args.map(([k, v]) => [el("dt", {}, k), el("dd", {}, el("code", {}, v))]),
      ),
      el("section", { id: "series" }, el("h2", {}, "Series"), chartNote, chartBox),
      el("h2", {}, "Runs"),
      runs instanceof Error ? errorBox(runs.message) : runsTable(runs.runs, false),
    );
    app.dataset.ready = "false";
    try {
      const series = await getJSON(`/api/v3/triggers/${encodeURIComponent(name)}/series`);
      drawChart(chartBox, chartNote, series);
    } catch (e) {
      chartNote.replaceChildren(errorBox(e.message));
    }
    app.dataset.ready = "true";
  }

  // chartData aligns the observed target and each model's filled points on
  // one time axis (seconds), as uPlot wants. With intervals, each model gets
  // a p10/p90 band that closes on the observed values beside its points.
  function chartData(s) {
    const ms = (t) => Date.parse(t);
    const times = new Set();
    s.observed.forEach((p) => times.add(ms(p.time)));
    s.filled.forEach((p) => times.add(ms(p.time)));
    const xs = [...times].sort((a, b) => a - b);
    const at = new Map(xs.map((t, i) => [t, i]));
    const blank = () => new Array(xs.length).fill(null);
    const observed = blank();
    s.observed.forEach((p) => { observed[at.get(ms(p.time))] = p.value; });
    const models = [...new Set(s.filled.map((p) => p.model))].sort();
    const perModel = models.map((m) => {
      const d = { model: m, value: blank(), lo: blank(), hi: blank() };
      s.filled.filter((p) => p.model === m).forEach((p) => {
        const i = at.get(ms(p.time));
        d.value[i] = p.value;
        if (p.p10 !== undefined && p.p90 !== undefined) { d.lo[i] = p.p10; d.hi[i] = p.p90; }
      });
      for (let i = 0; i < xs.length; i++) {
        // A band pinches to the observed value next to a filled point.
        if (d.lo[i] === null && observed[i] !== null && ((i > 0 && d.lo[i - 1] !== null && d.value[i - 1] !== null) || (i + 1 < xs.length && d.value[i + 1] !== null && d.lo[i + 1] !== null))) {
          d.lo[i] = d.hi[i] = observed[i];
        }
      }
      return d;
    });
    return { x: xs.map((t) => t / 1000), observed, perModel };
  }

  const palette = ["#ea580c", "#9333ea", "#0d9488", "#db2777"];

  function drawChart(box, note, s) {
    const d = chartData(s);
    const gaps = s.observed.filter((p) => p.value === null).length;
    const tags = Object.entries(s.tags || {}).map(([k, v]) => `${k}=${v}`).join(" ");
    note.replaceChildren(
      el("code", {}, `${s.measurement}.${s.target}`), tags ? ` {${tags}}` : "",
      ` from ${fmtTime(s.window_start)} to ${fmtTime(s.window_end)} (${s.window_from === "last_run" ? "the last run's window" : s.window_from === "trigger" ? "the trigger's window, ending now" : "as asked"}): `,
      el("span", { class: "swatch observed" }), `${fmtNum(s.observed.length - gaps)} observed, ${fmtNum(gaps)} empty; `,
      el("span", { class: "swatch filled" }), `${fmtNum(s.filled.length)} filled`,
      s.intervals ? el("span", {}, "; ", el("span", { class: "swatch band" }), "p10–p90 band") : "",
      s.observed_truncated || s.filled_truncated ? el("span", { class: "notice" }, ` (the newest ${fmtNum(s.limit)} rows shown)`) : "",
    );
    if (d.x.length === 0) {
      box.replaceChildren(el("p", { class: "muted" }, "No rows in this window."));
      return;
    }
    const series = [{}, { label: s.target, stroke: "#2563eb", width: 1.5, spanGaps: false, points: { show: false } }];
    const data = [d.x, d.observed];
    const bands = [];
    d.perModel.forEach((m, k) => {
      const color = palette[k % palette.length];
      series.push({ label: `filled (${m.model})`, stroke: color, fill: color, width: 0, paths: () => null,
        points: { show: true, size: 10, width: 1.5, stroke: "#fff", fill: color } });
      data.push(m.value);
      if (s.intervals) {
        const fillRGBA = color + "30";
        series.push({ label: `p90 (${m.model})`, stroke: fillRGBA, width: 1, points: { show: false }, spanGaps: false });
        series.push({ label: `p10 (${m.model})`, stroke: fillRGBA, width: 1, points: { show: false }, spanGaps: false });
        data.push(m.hi, m.lo);
        bands.push({ series: [data.length - 2, data.length - 1], fill: fillRGBA });
      }
    });
    const opts = {
      width: Math.max(320, box.clientWidth || 900), height: 340,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"),
      scales: { x: { time: true } },
      series, bands,
      axes: [{}, { label: s.target }],
      legend: { live: true },
    };
    box.replaceChildren();
    const u = new uPlot(opts, data, box);
    // Tests and curious people read the chart back from here.
    window.regressd = { chart: u, series: s, filledSeries: d.perModel.map((m, k) => 2 + k * (s.intervals ? 3 : 1)) };
    window.addEventListener("resize", () => u.setSize({ width: Math.max(320, box.clientWidth), height: 340 }));
  }

  // --- a run: /ui/runs/<task_id> --------------------------------------------

  async function runPage() {
    document.title = `regressd · ${name}`;
    const { run: r, batches } = await getJSON(`/api/v3/runs/${encodeURIComponent(name)}`);
    const fields = [
      ["status", status(r.status)], ["trigger", triggerLink(r.trigger)], ["origin", r.origin || "—"],
      ["dry run", r.dry_run ? "yes" : "no"], ["measurement", el("code", {}, r.measurement)], ["target", el("code", {}, r.target)],
      ["model", el("code", {}, r.model)], ["window", `${fmtTime(r.window_start)} → ${fmtTime(r.window_end)}`],
      ["rows read", fmtNum(r.read_rows) + (r.read_truncated ? " (cut at max_read_rows)" : "")],
      ["context rows", fmtNum(r.context_rows)], ["query rows", fmtNum(r.query_rows)],
      ["skipped existing", fmtNum(r.skipped_existing)], ["written", fmtNum(r.written)], ["remaining", fmtNum(r.remaining)],
      ["batches", `${fmtNum(r.batches)} (${fmtNum(r.batches_done)} done, ${fmtNum(r.batches_failed)} failed)`],
      ["message", r.message || r.first_failure || "—"], ["code", r.code ? String(r.code) : "—"],
      ["created", fmtTime(r.created)], ["updated", fmtTime(r.updated)],
    ];
    const brows = batches.map((b) => [b.batch < 0 ? "verdict" : String(b.batch), status(b.status), fmtNum(b.rows),
      fmtNum(b.written), b.message || "", b.code ? String(b.code) : "", fmtTime(b.committed)]);
    render(
      el("h1", {}, "Run ", el("code", {}, r.task_id)),
      el("dl", { class: "report" }, fields.map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)])),
      el("h2", {}, "Batches"),
      table([["Batch"], ["Status"], ["Rows", "num"], ["Written", "num"], ["Message"], ["Code"], ["Committed"]], brows, "No batches."),
    );
  }

  const pages = { overview, trigger: triggerPage, run: runPage };
  (pages[page] || overview)().catch((e) => render(el("h1", {}, "regressd"), errorBox(e.message)));
})();
