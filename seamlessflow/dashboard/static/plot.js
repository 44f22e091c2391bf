// Plain SVG plots for the dashboard: line charts with their points, and the role timeline. No library.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];
// core.accounting's kinds: the useful two, the overheads, the waits (pale) and the dead
const KIND_COLOURS = {rollout: "#2ca02c", train: "#1f77b4", switch: "#ff7f0e", sync: "#9467bd",
                      "wait-data": "#c6dbef", "wait-load": "#c7e9c0", held: "#d9d9d9", failed: "#d62728"};

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function niceTicks(lo, hi, count) {
  if (hi === lo) { hi = lo + 1; }
  const raw = (hi - lo) / count, mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = [1, 2, 5, 10].map(m => m * mag).find(s => s >= raw) || raw;
  const ticks = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi + 1e-9; t += step) ticks.push(+t.toFixed(10));
  return ticks;
}

function fmt(v) {
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);  // a small figure (a mismatch of 0.002, a KL) keeps two significant digits
  return a >= 1000 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : a >= 0.1 ? v.toFixed(2) : String(Number(v.toPrecision(2)));
}

// series: [{name, label?, line?, dash?, colour?, points: [[x, y], ...]}]; draws axes, a polyline and a circle per
// point. opts: xLabel, yMin, yMax, threshold ({y, label}: a dashed horizontal line, kept in view).
function lineChart(svg, series, opts) {
  opts = opts || {};
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const w = svg.clientWidth || 480, h = svg.clientHeight || 220, m = {l: 46, r: 10, t: 26, b: 34};
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const all = series.flatMap(s => s.points);
  if (!all.length) {
    el("text", {x: w / 2, y: h / 2, "text-anchor": "middle", class: "empty"}, svg).textContent = "no points yet";
    return;
  }
  const xs = all.map(p => p[0]), ys = all.map(p => p[1]);
  let [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  if (opts.yMin !== undefined) y0 = Math.min(y0, opts.yMin);
  if (opts.yMax !== undefined) y1 = Math.max(y1, opts.yMax);
  const threshold = opts.threshold;
  if (threshold) y1 = Math.max(y1, threshold.y);
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) y1 = y0 + 1;
  const X = x => m.l + (x - x0) / (x1 - x0) * (w - m.l - m.r);
  const Y = y => h - m.b - (y - y0) / (y1 - y0) * (h - m.t - m.b);
  for (const t of niceTicks(y0, y1, 4)) {
    el("line", {x1: m.l, x2: w - m.r, y1: Y(t), y2: Y(t), class: "grid"}, svg);
    el("text", {x: m.l - 4, y: Y(t) + 4, "text-anchor": "end", class: "tick"}, svg).textContent = fmt(t);
  }
  for (const t of niceTicks(x0, x1, 6)) {
    el("text", {x: X(t), y: h - m.b + 14, "text-anchor": "middle", class: "tick"}, svg).textContent = fmt(t);
  }
  el("text", {x: (w + m.l) / 2, y: h - 4, "text-anchor": "middle", class: "axis"}, svg).textContent = opts.xLabel || "step";
  if (threshold) {
    el("line", {x1: m.l, x2: w - m.r, y1: Y(threshold.y), y2: Y(threshold.y), class: "threshold"}, svg);
    el("text", {x: w - m.r, y: Y(threshold.y) - 3, "text-anchor": "end", class: "threshold-label"}, svg)
      .textContent = `${threshold.label} ${fmt(threshold.y)}`;
  }
  let legendX = m.l;
  series.forEach((s, i) => {
    const colour = s.colour || PALETTE[i % PALETTE.length];  // a moving mean: its series' colour
    const label = s.label || s.name;  // the legend's words; `name` (the tag) marks the points
    el("text", {x: legendX, y: 14, fill: colour, class: "legend-label"}, svg).textContent = (s.dash ? "╌ " : "● ") + label;
    legendX += 6.5 * label.length + 28;
    if (!s.points.length) return;
    el("polyline", {points: s.points.map(p => `${X(p[0])},${Y(p[1])}`).join(" "), fill: "none",
                    stroke: colour, "stroke-width": s.line ? 2.5 : 1.2, "stroke-dasharray": s.dash ? "5 3" : "none"}, svg);
    for (const p of (s.line ? [] : s.points)) {  // a derived line (a moving mean) has no points of its own
      const dot = el("circle", {cx: X(p[0]), cy: Y(p[1]), r: 2.5, fill: colour, class: "point",
                                "data-series": s.name}, svg);
      el("title", {}, dot).textContent = `${s.name} @ ${p[0]}: ${fmt(p[1])}`;
    }
  });
}

// intervals: [{resource, start, end, kind}] in seconds; one row per resource.
function timelineChart(svg, intervals) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const resources = [...new Set(intervals.map(i => i.resource))].sort();
  const w = svg.clientWidth || 960, row = 22, m = {l: 90, r: 10, t: 6, b: 22};
  const h = m.t + m.b + row * Math.max(resources.length, 1);
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.style.height = `${h}px`;
  if (!intervals.length) {
    el("text", {x: w / 2, y: h / 2, "text-anchor": "middle", class: "empty"}, svg).textContent = "no heartbeats yet";
    return;
  }
  const end = Math.max(...intervals.map(i => i.end)), X = t => m.l + t / (end || 1) * (w - m.l - m.r);
  resources.forEach((r, k) => {
    el("text", {x: m.l - 6, y: m.t + row * k + 15, "text-anchor": "end", class: "tick"}, svg).textContent = r;
  });
  for (const i of intervals) {
    const bar = el("rect", {x: X(i.start), y: m.t + row * resources.indexOf(i.resource) + 3,
                            width: Math.max(X(i.end) - X(i.start), 0.5), height: row - 6,
                            fill: KIND_COLOURS[i.kind] || "#999", class: `bar kind-${i.kind}`}, svg);
    el("title", {}, bar).textContent = `${i.resource} ${i.kind} ${i.start.toFixed(1)}–${i.end.toFixed(1)} s`;
  }
  for (const t of niceTicks(0, end, 8)) {
    el("text", {x: X(t), y: h - 6, "text-anchor": "middle", class: "tick"}, svg).textContent = `${fmt(t)} s`;
  }
}
