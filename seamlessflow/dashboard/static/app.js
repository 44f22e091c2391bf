// The dashboard page: polls the JSON endpoints and draws curves, timeline, tables and sessions.
"use strict";

const REFRESH_MS = 3000;
let openSession = null;

async function getJSON(path) {
  const response = await fetch(path);
  if (!response.ok) throw new Error(`${path}: ${response.status}`);
  return response.json();
}

function cell(row, text, cls) {
  const td = row.insertCell();
  td.textContent = text === null || text === undefined ? "" : String(text);
  if (cls) td.className = cls;
  return td;
}

function series(curves, tags) {
  return tags.filter(t => curves[t]).map(t => ({name: t, points: curves[t]}));
}

// An adapters stack's teams: each team's adapter trainer has tags of its own, `train/<team>/<figure>` and
// `eval/<team>/<figure>` (the base's are `train/<figure>`); [] in a stack that trains the base.
function teamsIn(curves) {
  const teams = new Set();
  for (const tag of Object.keys(curves)) {
    const parts = tag.split("/");
    if (parts.length === 3 && (parts[0] === "train" || parts[0] === "eval")) teams.add(parts[1]);
  }
  return [...teams].sort();
}

// Every team's `<group>/<team>/<figure>` there is, labelled by team.
function teamSeries(curves, teams, group, figures) {
  const out = [];
  for (const team of teams) {
    for (const f of figures) {
      const tag = `${group}/${team}/${f}`;
      if (curves[tag]) out.push({name: tag, label: `${team} ${f}`, points: curves[tag]});
    }
  }
  return out;
}

// The base's `<group>/<figure>` for each figure, then every team's.
function withTeams(curves, teams, group, figures) {
  return series(curves, figures.map(f => `${group}/${f}`)).concat(teamSeries(curves, teams, group, figures));
}

// The base's reward and its moving mean; in an adapters stack each team's reward and moving mean, all at once.
function rewardSeries(curves, teams) {
  const reward = series(curves, ["train/reward_mean"]);
  if (reward.length) reward.push({name: "mean of the last 10 steps", points: movingMean(reward[0].points, 10), line: true});
  const perTeam = teamSeries(curves, teams, "train", ["reward_mean"]).map((s, i) =>
    ({...s, label: s.name.split("/")[1], colour: PALETTE[(reward.length + i) % PALETTE.length]}));
  return reward.concat(perTeam, perTeam.map(s => ({name: `${s.name} (mean of 10)`, label: `${s.label}, mean of 10`,
                                                   colour: s.colour, points: movingMean(s.points, 10), line: true})));
}

// Each agent pool's own `pool/<pool>/<figure>` (tracking/pools.py), one colour per pool: a point per step and, a
// step's few sessions of one pool making a noisy point, its moving mean of 10 steps.
function poolSeries(curves, figure) {
  const tags = Object.keys(curves).filter(t => t.startsWith("pool/") && t.endsWith(`/${figure}`)).sort();
  return tags.flatMap((tag, i) => {
    const pool = tag.slice("pool/".length, -(figure.length + 1)), colour = PALETTE[i % PALETTE.length];
    return [{name: tag, label: pool, colour, points: curves[tag]},
            {name: `${tag} (mean of 10)`, label: `${pool}, mean of 10`, colour, points: movingMean(curves[tag], 10),
             line: true}];
  });
}

// The train-inference mismatch, one colour per trainer: the base's (mismatch, stale dashed, the mismatch's KL) and
// each team's adapter trainer's (mismatch, stale dashed). `mismatch`: tokens of the version the trainer held, ~0
// when healthy; `stale`: older versions' tokens, grows with staleness.
function mismatchSeries(curves, teams) {
  const figures = [["mismatch_abs_mean", "mismatch |Δ|", false], ["stale_abs_mean", "stale |Δ|", true]];
  const out = [];
  [null, ...teams].forEach((team, i) => {
    const colour = PALETTE[team === null ? 0 : (i + 1) % PALETTE.length];  // PALETTE[1]: the KL's
    for (const [figure, words, dash] of figures) {
      const tag = team === null ? `train/${figure}` : `train/${team}/${figure}`;
      if (curves[tag]) out.push({name: tag, label: team === null ? words : `${team} ${words}`, colour, dash,
                                 points: curves[tag]});
    }
    if (team === null && curves["train/mismatch_kl"])
      out.push({name: "train/mismatch_kl", label: "mismatch KL", colour: PALETTE[1], points: curves["train/mismatch_kl"]});
  });
  return out;
}

function movingMean(points, n) {
  return points.map((p, i) => {
    const window = points.slice(Math.max(0, i - n + 1), i + 1);
    return [p[0], window.reduce((sum, q) => sum + q[1], 0) / window.length];
  });
}

async function refreshCurves() {
  const data = await getJSON("/api/curves");
  const c = data.curves, teams = teamsIn(c);
  lineChart(document.getElementById("chart-reward"), rewardSeries(c, teams));
  // a team's eval: its accuracy only (two figures a team would crowd the chart); the base's both
  lineChart(document.getElementById("chart-eval"),
            series(c, ["eval/accuracy", "eval/mean_reward"]).concat(teamSeries(c, teams, "eval", ["accuracy"])),
            {yMin: 0});
  lineChart(document.getElementById("chart-pool-reward"), poolSeries(c, "reward_mean"), {yMin: 0});
  lineChart(document.getElementById("chart-pool-sessions"), poolSeries(c, "sessions_per_min"), {yMin: 0});
  lineChart(document.getElementById("chart-throughput"),
            withTeams(c, teams, "throughput", ["rollout_tokens_per_s", "trained_tokens_per_s"]), {yMin: 0});
  lineChart(document.getElementById("chart-loss"), withTeams(c, teams, "train", ["loss", "kl_mean"]));
  lineChart(document.getElementById("chart-mismatch"), mismatchSeries(c, teams), {yMin: 0,
            threshold: data.mismatch_warn === null || data.mismatch_warn === undefined ? null :
              {y: data.mismatch_warn, label: "trainer.mismatch_warn"}});
  const steps = Object.entries(data.steps || {});  // each team's adapter trainer counts its own steps
  document.getElementById("step").textContent = steps.length ?
    steps.map(([team, step]) => `${team} step ${step}`).join(" · ") : `step ${data.step}`;
}

async function refreshOverview() {
  const data = await getJSON("/api/overview");
  document.getElementById("run").textContent = `team ${data.team} · run ${data.run}`;
  const body = document.querySelector("#resources tbody");
  body.innerHTML = "";
  for (const r of data.resources) {
    const row = body.insertRow();
    cell(row, r.adapter_team ? `${r.id} (${r.adapter_team}'s adapter)` : r.id); cell(row, r.kind);
    cell(row, r.capability_tags.join(", ")); cell(row, r.hardware_tags.join(", "));
    cell(row, r.active_tag, `tag tag-${r.active_tag}`); cell(row, r.state);
    cell(row, r.weight_version); cell(row, `${r.heartbeat_age_s.toFixed(1)} s ago`);
    const figures = Object.entries(r.figures).filter(([, v]) => v !== null)
      .sort(([a], [b]) => (b === "stage") - (a === "stage")).slice(0, 8)  // the task mix's stage (SRPO) first
      .map(([k, v]) => `${k}=${Math.abs(v) >= 100 ? v.toFixed(0) : v.toFixed(3)}`).join(" ");
    cell(row, r.note ? `${r.note} · ${figures}` : figures, "figures");  // a note: the autoscaler's advice and why
  }
  const services = document.querySelector("#services tbody");
  services.innerHTML = "";
  for (const s of data.services) {
    const row = services.insertRow();
    cell(row, s.name); cell(row, s.state); cell(row, s.pid); cell(row, s.restarts);
    const td = cell(row, "");
    if (s.metrics) {
      const a = document.createElement("a");
      a.href = s.metrics; a.textContent = s.metrics;
      td.appendChild(a);
    }
  }
}

async function refreshTimeline() {
  const data = await getJSON("/api/timeline");
  timelineChart(document.getElementById("timeline"), data.intervals);
  document.getElementById("bubble").textContent = data.bubble_ratio === null ? "" :
    `bubble ratio ${(100 * data.bubble_ratio).toFixed(1)} % · ${data.switches.length} role switches`;
  // every device-second in one account: its name and share of the whole (core.accounting)
  const legend = document.getElementById("timeline-legend");
  const total = Object.values(data.seconds_by_kind).reduce((a, b) => a + b, 0);
  legend.innerHTML = Object.entries(KIND_COLOURS).map(([k, c]) => {
    const share = total > 0 ? ` ${(100 * (data.seconds_by_kind[k] || 0) / total).toFixed(1)} %` : "";
    return `<span><i style="background:${c}"></i>${(data.accounts || {})[k] || k}${share}</span>`;
  }).join("");
}

async function refreshSessions() {
  const sessions = await getJSON("/api/sessions");
  const body = document.querySelector("#sessions tbody");
  body.innerHTML = "";
  for (const s of sessions) {
    const row = body.insertRow();
    row.className = "session-row" + (s.session_id === openSession ? " open" : "");
    row.dataset.session = s.session_id;
    cell(row, s.session_id.slice(0, 18)); cell(row, s.status);
    cell(row, s.reward === null ? "" : s.reward.toFixed(2));
    cell(row, s.calls); cell(row, s.generated); cell(row, s.versions.join(","));
    row.addEventListener("click", () => showSession(s.session_id));
  }
}

function tokenSpan(text, cls, title) {
  const span = document.createElement("span");
  span.className = cls;
  span.textContent = text;
  if (title) span.title = title;
  return span;
}

async function showSession(id) {
  openSession = id;
  const s = await getJSON(`/api/sessions/${encodeURIComponent(id)}`);
  const view = document.getElementById("session-view");
  view.innerHTML = "";
  const head = document.createElement("h3");
  head.className = "session-title";
  head.textContent = `session ${s.session_id} · ${s.status}` + (s.reward === null ? "" : ` · reward ${s.reward}`) +
    ` · ${s.turns.length} turns · ${s.forks} forks`;
  view.appendChild(head);
  if (s.info_json) view.appendChild(tokenSpan(`task ${s.task_id} · ${s.info_json.slice(0, 120)}`, "dim"));
  for (const t of s.turns) {
    const turn = document.createElement("div");
    turn.className = "turn";
    const meta = document.createElement("div");
    meta.className = "turn-meta";
    meta.textContent = `turn ${t.index} · ${t.outcome} · ${t.engine_id} · ${t.known} known, ` +
      `${t.fed.length} fed, ${t.generated.length} generated · ${t.finish_reason}`;
    if (t.outcome === "fork" || t.outcome === "restart") meta.classList.add("fork");
    turn.appendChild(meta);
    const body = document.createElement("div");
    body.className = "tokens";
    body.appendChild(tokenSpan(t.fed_text !== undefined ? t.fed_text : t.fed.join(" ") + " ", "fed"));
    let version = null;
    t.generated.forEach((token, i) => {
      if (t.versions[i] !== version) {
        version = t.versions[i];
        body.appendChild(tokenSpan(`⟨v${version}⟩`, "version"));
      }
      const text = t.generated_text ? t.generated_text[i] : `${token} `;
      body.appendChild(tokenSpan(text, "gen", `token ${token} · logprob ${t.logprobs[i].toFixed(3)} · v${version}`));
    });
    turn.appendChild(body);
    view.appendChild(turn);
  }
  document.querySelectorAll(".session-row").forEach(r => r.classList.toggle("open", r.dataset.session === id));
}

async function refresh() {
  const jobs = [refreshCurves(), refreshOverview(), refreshTimeline(), refreshSessions()];
  const results = await Promise.allSettled(jobs);
  const failed = results.filter(r => r.status === "rejected");
  document.getElementById("updated").textContent = failed.length ?
    `update failed: ${failed[0].reason}` : `updated ${new Date().toLocaleTimeString()}`;
  document.body.dataset.loaded = "1";
}

refresh();
setInterval(refresh, REFRESH_MS);
