import type { Series } from "../lib/section.js";

/*
 * A hand-written SVG so the chart needs no dependency: two log-log panels, calls/s against
 * concurrency and recovery time against interrupted runs. Log scales because both the x values
 * (1, 8, 64; 1k, 10k) and the gap to the targets span decades.
 */

const W = 460;
const H = 320;
const M = { left: 84, right: 36, top: 40, bottom: 90 };
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

const escapeXml = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const label = (v: number): string =>
  v >= 1e6 ? `${v / 1e6}M` : v >= 1e3 ? `${v / 1e3}k` : v >= 1 ? String(v) : v.toPrecision(1);

/** A measured value, to three significant figures. */
const valueLabel = (v: number): string =>
  v >= 1e6
    ? `${Number((v / 1e6).toPrecision(3))}M`
    : v >= 1e3
      ? `${Number((v / 1e3).toPrecision(3))}k`
      : String(Number(v.toPrecision(3)));

/** The 1-2-5 step at or below `v`, and at or above it: axis bounds that hug the data. */
const niceBelow = (v: number): number => {
  const e = 10 ** Math.floor(Math.log10(v));
  return [5, 2, 1].map((k) => k * e).find((c) => c <= v) ?? e;
};
const niceAbove = (v: number): number => {
  const e = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 5, 10].map((k) => k * e).find((c) => c >= v) ?? 10 * e;
};

/** 1-2-5 ticks between the decades around [min, max]. */
const logTicks = (min: number, max: number): number[] => {
  const ticks: number[] = [];
  for (let e = Math.floor(Math.log10(min)); e <= Math.ceil(Math.log10(max)); e++) {
    for (const k of [1, 2, 5]) {
      const v = k * 10 ** e;
      if (v >= min / 1.0001 && v <= max * 1.0001) ticks.push(v);
    }
  }
  return ticks;
};

const panel = (
  x0: number,
  title: string,
  xTitle: string,
  yTitle: string,
  series: ReadonlyArray<Series>,
  xTicks: ReadonlyArray<number>,
): string => {
  const points = series.flatMap((s) => s.points);
  if (points.length === 0) {
    return `<text x="${x0 + W / 2}" y="${H / 2}" text-anchor="middle" font-size="13">${escapeXml(title)}: not measured in this run</text>`;
  }
  const ys = points.map(([, y]) => y).filter((y) => y > 0);
  // Some room around the data, so the labels of the extreme points stay inside the frame.
  const yMin = niceBelow(Math.min(...ys) / 1.3);
  const yMax = niceAbove(Math.max(...ys) * 1.3);
  // Per x, the highest measured value: its label goes above the point, the others below.
  const top = new Map<number, number>();
  for (const s of series) {
    if (s.reference) continue;
    for (const [x, y] of s.points) top.set(x, Math.max(top.get(x) ?? 0, y));
  }
  const xMin = Math.min(...xTicks);
  const xMax = Math.max(...xTicks);
  const px = (x: number) =>
    x0 +
    M.left +
    ((Math.log(x) - Math.log(xMin)) / (Math.log(xMax) - Math.log(xMin) || 1)) * (W - M.left - M.right);
  const py = (y: number) =>
    M.top +
    (1 - (Math.log(y) - Math.log(yMin)) / (Math.log(yMax) - Math.log(yMin) || 1)) * (H - M.top - M.bottom);
  const out: string[] = [];
  out.push(
    `<text x="${x0 + W / 2}" y="22" text-anchor="middle" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
  );
  for (const t of logTicks(yMin, yMax)) {
    out.push(
      `<line x1="${px(xMin)}" y1="${py(t)}" x2="${px(xMax)}" y2="${py(t)}" stroke="#ddd"/>`,
      `<text x="${px(xMin) - 6}" y="${py(t) + 4}" text-anchor="end" font-size="11">${label(t)}</text>`,
    );
  }
  for (const t of xTicks) {
    out.push(
      `<line x1="${px(t)}" y1="${py(yMin)}" x2="${px(t)}" y2="${py(yMax)}" stroke="#eee"/>`,
      `<text x="${px(t)}" y="${py(yMin) + 16}" text-anchor="middle" font-size="11">${label(t)}</text>`,
    );
  }
  out.push(
    `<rect x="${px(xMin)}" y="${py(yMax)}" width="${px(xMax) - px(xMin)}" height="${py(yMin) - py(yMax)}" fill="none" stroke="#888"/>`,
    `<text x="${x0 + M.left + (W - M.left - M.right) / 2}" y="${py(yMin) + 34}" text-anchor="middle" font-size="12">${escapeXml(xTitle)}</text>`,
    `<text transform="translate(${x0 + 18},${M.top + (H - M.top - M.bottom) / 2}) rotate(-90)" text-anchor="middle" font-size="12">${escapeXml(yTitle)}</text>`,
  );
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]!;
    const path = s.points
      .map(([x, y], k) => `${k === 0 ? "M" : "L"}${px(x).toFixed(1)},${py(y).toFixed(1)}`)
      .join(" ");
    out.push(
      `<path d="${path}" fill="none" stroke="${color}" stroke-width="2"${s.reference ? ' stroke-dasharray="6 4"' : ""}/>`,
    );
    if (!s.reference) {
      for (const [x, y] of s.points) {
        // Labels of the last point go left of it, and each series on its own side of the line.
        const atEnd = x === xMax;
        const dx = atEnd ? -6 : 6;
        const dy = y >= (top.get(x) ?? y) ? -7 : 15;
        out.push(
          `<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="3.5" fill="${color}"/>`,
          `<text x="${(px(x) + dx).toFixed(1)}" y="${(py(y) + dy).toFixed(1)}" font-size="10" fill="${color}"${atEnd ? ' text-anchor="end"' : ""}>${valueLabel(y)}</text>`,
        );
      }
    }
    const ly = py(yMin) + 52 + i * 15;
    out.push(
      `<line x1="${x0 + M.left}" y1="${ly - 4}" x2="${x0 + M.left + 24}" y2="${ly - 4}" stroke="${color}" stroke-width="2"${s.reference ? ' stroke-dasharray="6 4"' : ""}/>`,
      `<text x="${x0 + M.left + 30}" y="${ly}" font-size="11">${escapeXml(s.label)}</text>`,
    );
  });
  return out.join("\n");
};

export interface ChartMeta {
  readonly commit: string;
  readonly dirty: boolean;
  readonly quick: boolean;
  readonly cpus: number;
  readonly node: string;
  readonly date: string;
}

/** Which run a chart comes from: commit ("+" when src had uncommitted changes), mode, machine, day. */
export const captionOf = (meta: ChartMeta): string =>
  `holdfast ${meta.commit}${meta.dirty ? "+" : ""} · ${meta.quick ? "--quick" : "full run"} · ${meta.cpus} CPU, node ${meta.node} · ${meta.date.slice(0, 10)}`;

/** The whole chart; `caption` says which run it comes from (commit, machine, mode). */
export const renderChart = (series: ReadonlyArray<Series>, caption: string): string => {
  const concurrency = series.filter((s) => s.chart === "concurrency");
  const recovery = series.filter((s) => s.chart === "recovery");
  const recoveryX = [...new Set(recovery.flatMap((s) => s.points.map(([x]) => x)))].sort((a, b) => a - b);
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${2 * W}" height="${H + 24}" viewBox="0 0 ${2 * W} ${H + 24}" font-family="sans-serif">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    panel(
      0,
      "Journaled calls/s against concurrency",
      "runs in parallel",
      "calls/s (log)",
      concurrency,
      [1, 8, 64],
    ),
    panel(
      W,
      "Recovery: open until every run classified",
      "interrupted runs",
      "ms (log)",
      recovery,
      recoveryX.length ? recoveryX : [1, 10],
    ),
    `<text x="${W}" y="${H + 16}" text-anchor="middle" font-size="11" fill="#555">${escapeXml(caption)}</text>`,
    "</svg>",
    "",
  ].join("\n");
};
