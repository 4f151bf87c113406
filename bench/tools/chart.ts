import { readFileSync, writeFileSync } from "node:fs";
import type { Series } from "../lib/section.js";
import { type ChartMeta, captionOf, renderChart } from "../report/chart.js";

/**
 * Re-draw the chart of a saved report (e.g. after a change to the chart's layout), from the data
 * that run measured:
 *
 *   npx tsx bench/tools/chart.ts reports/bench.json docs/performance/bench.svg
 */
const [from, to] = process.argv.slice(2);
if (!from || !to) {
  process.stderr.write("usage: tsx bench/tools/chart.ts <bench.json> <out.svg>\n");
  process.exit(2);
}
const report = JSON.parse(readFileSync(from, "utf8")) as { meta: ChartMeta; series?: Series[] };
writeFileSync(to, renderChart(report.series ?? [], captionOf(report.meta)));
