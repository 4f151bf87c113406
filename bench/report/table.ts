import Table from "cli-table3";
import type { Metric } from "../lib/metric.js";

const number = (value: number | null): string =>
  value === null ? "—" : value.toLocaleString("en-US", { maximumSignificantDigits: 4 });

const verdict = (metric: Metric): string =>
  metric.note?.startsWith("skipped:") ? "skipped" : metric.pass === null ? "" : metric.pass ? "PASS" : "FAIL";

/** The human table: one row per metric; the note (why, or what was skipped) on its own line. */
export const renderTable = (metrics: ReadonlyArray<Metric>): string => {
  const table = new Table({
    head: ["metric", "value", "unit", "p95 / range", "ratio", "target", "result"],
    style: { head: [], border: [] },
    wordWrap: true,
    colWidths: [44, 10, 11, 30, 9, 16, 9],
  });
  for (const m of metrics) {
    const spread = m.spread
      ? `p95 ${number(m.spread.p95)} (${number(m.spread.min)}–${number(m.spread.max)}, n=${m.spread.n})`
      : "";
    table.push([m.name, number(m.value), m.unit, spread, number(m.ratio), m.target ?? "", verdict(m)]);
  }
  const notes = metrics
    .filter((m) => m.note)
    .map((m) => `  ${m.name}: ${m.note}`)
    .join("\n");
  return `${table.toString()}\n${notes}`;
};
