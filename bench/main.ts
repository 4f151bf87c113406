import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus, freemem, loadavg, totalmem } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Metric } from "./lib/metric.js";
import { progress } from "./lib/progress.js";
import type { BenchContext, Section, Series } from "./lib/section.js";
import { TempRoot } from "./lib/temp.js";
import { captionOf, renderChart } from "./report/chart.js";
import { renderTable } from "./report/table.js";
import { auditSection } from "./sections/audit.js";
import { concurrencySection } from "./sections/concurrency.js";
import { featuresSection } from "./sections/features.js";
import { FloorProbe } from "./sections/floor.js";
import { postgresSection } from "./sections/postgres.js";
import { recoverySection } from "./sections/recovery.js";
import { searchSection } from "./sections/search.js";
import { sequentialSection } from "./sections/sequential.js";
import { serverSection } from "./sections/server.js";
import { subscriptionsSection } from "./sections/subscriptions.js";

/**
 * `npm run bench [-- --json] [--quick] [--only a,b]`: every figure of DESIGN §12 in one process
 * run, so that each ratio compares measurements taken side by side on the same machine.
 */

const SECTIONS: ReadonlyArray<Section> = [
  sequentialSection,
  featuresSection,
  concurrencySection,
  recoverySection,
  auditSection,
  subscriptionsSection,
  postgresSection,
  serverSection,
  searchSection,
];

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");

interface Args {
  readonly json: boolean;
  readonly quick: boolean;
  readonly only: ReadonlySet<string> | null;
}

const parseArgs = (argv: ReadonlyArray<string>): Args => {
  let json = false;
  let quick = false;
  let only: Set<string> | null = null;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--json") json = true;
    else if (arg === "--quick") quick = true;
    else if (arg === "--only" || arg.startsWith("--only=")) {
      const value = arg === "--only" ? argv[++i] : arg.slice("--only=".length);
      only = new Set((value ?? "").split(",").filter(Boolean));
      const unknown = [...only].filter((name) => !SECTIONS.some((s) => s.name === name));
      if (unknown.length > 0 || only.size === 0) {
        throw new Error(`--only takes section names: ${SECTIONS.map((s) => s.name).join(", ")}`);
      }
    } else if (arg === "--help" || arg === "-h") {
      process.stdout.write(
        `usage: npm run bench -- [--json] [--quick] [--only ${SECTIONS.map((s) => s.name).join(",")}]\n`,
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${arg} (try --help)`);
  }
  return { json, quick, only };
};

const git = (...args: string[]): string => {
  try {
    return execFileSync("git", args, {
      cwd: ROOT,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "unknown";
  }
};

const machine = () => ({
  commit: git("rev-parse", "--short", "HEAD"),
  dirty: git("status", "--porcelain", "--untracked-files=no", "src") !== "",
  node: process.version,
  cpus: cpus().length,
  cpuModel: cpus()[0]?.model ?? "unknown",
  memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
  freeMemoryGiB: Math.round((freemem() / 2 ** 30) * 10) / 10,
  platform: `${process.platform} ${process.arch}`,
});

const main = async (): Promise<void> => {
  const args = parseArgs(process.argv.slice(2));
  const started = performance.now();
  // The load average says how busy the (shared) machine was: absolute figures need it to be read.
  const meta = {
    ...machine(),
    date: new Date().toISOString(),
    quick: args.quick,
    loadAverageAtStart: loadavg(),
  };
  progress(
    "main",
    `${args.quick ? "quick" : "full"} run on ${meta.cpus} CPU(s), node ${meta.node}, commit ${meta.commit}${meta.dirty ? " (src has uncommitted changes)" : ""}, load average ${meta.loadAverageAtStart.map((l) => l.toFixed(1)).join(" ")}`,
  );
  const temp = new TempRoot();
  const floor = new FloorProbe(temp.folder("floor"));
  const context: BenchContext = { options: { quick: args.quick }, temp, floor, logs: new Map() };
  const metrics: Metric[] = [];
  const series: Series[] = [];
  try {
    for (const section of SECTIONS) {
      if (args.only && !args.only.has(section.name)) continue;
      const sectionStarted = performance.now();
      progress(section.name, "start");
      const result = await section.run(context);
      metrics.push(...result.metrics);
      series.push(...(result.series ?? []));
      for (const m of result.metrics) {
        if (m.note?.startsWith("skipped:")) process.stderr.write(`${m.name}: ${m.note}\n`);
      }
      progress(section.name, `done in ${((performance.now() - sectionStarted) / 1000).toFixed(1)} s`);
    }
  } finally {
    floor.close();
    temp.remove();
  }
  // The floor is sampled throughout, between the measurements it is compared with; reported first.
  // Fixed key order: the documented shape first, then the spread and the note.
  const all = [...floor.metrics(), ...metrics].map(
    ({ name, value, unit, ratio, target, pass, ...rest }): Metric => ({
      name,
      value,
      unit,
      ratio,
      target,
      pass,
      ...rest,
    }),
  );
  const seconds = Math.round((performance.now() - started) / 100) / 10;
  const report = { meta: { ...meta, seconds, loadAverageAtEnd: loadavg() }, metrics: all, series };

  const reports = join(ROOT, "reports");
  mkdirSync(reports, { recursive: true });
  writeFileSync(join(reports, "bench.json"), `${JSON.stringify(report, null, 2)}\n`);
  const svg = renderChart(series, captionOf(meta));
  writeFileSync(join(reports, "bench.svg"), svg);
  // Only a full run of every section replaces the chart the documentation shows.
  if (!args.quick && !args.only) {
    mkdirSync(join(ROOT, "docs", "performance"), { recursive: true });
    writeFileSync(join(ROOT, "docs", "performance", "bench.svg"), svg);
  }

  const table = renderTable(all);
  if (args.json) {
    process.stdout.write(`${JSON.stringify(all)}\n`);
    process.stderr.write(`${table}\n`);
  } else {
    process.stdout.write(`${table}\n`);
  }
  const failed = all.filter((m) => m.pass === false).map((m) => m.name);
  process.stderr.write(
    `bench finished in ${seconds} s; reports/bench.json written${failed.length ? `; targets missed: ${failed.join(", ")}` : ""}\n`,
  );
};

main().catch((error: unknown) => {
  process.stderr.write(
    `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
