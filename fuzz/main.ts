/**
 * The fuzzer: fast-check drives the event decoder, the masker, the public API, the CLI's argument
 * handling and the HTTP API with generated inputs (docs/fuzz.md).
 *
 *   npm run fuzz                         every target, full counts (520,000 inputs, ~9 min on 2 cores)
 *   npm run fuzz -- --seed 7 --json      fixed seed, one JSON document on stdout
 *   npm run fuzz -- --runs 500           500 inputs per target
 *   npm run fuzz -- --runs 20000 --total 20,000 inputs shared out in the full run's proportions
 *   npm run fuzz -- --target masker      one target (repeatable)
 *
 * Progress goes to stderr. A failure prints the shrunk counterexample and exits 1.
 */
import { parseArgs } from "node:util";
import { runTarget, type TargetReport } from "./target.js";
import { TARGETS } from "./targets.js";

const { values } = parseArgs({
  options: {
    seed: { type: "string" },
    runs: { type: "string" },
    total: { type: "boolean", default: false },
    target: { type: "string", multiple: true },
    json: { type: "boolean", default: false },
  },
});

const fail = (message: string): never => {
  process.stderr.write(`fuzz: ${message}\n`);
  process.exit(2);
};
const seed = values.seed === undefined ? Date.now() % 1_000_000 : Number(values.seed);
if (!Number.isSafeInteger(seed)) fail("--seed takes a whole number");
const runs = values.runs === undefined ? undefined : Number(values.runs);
if (runs !== undefined && !(Number.isSafeInteger(runs) && runs > 0))
  fail("--runs takes a positive whole number");
const chosen = values.target ?? TARGETS.map((t) => t.name);
const unknown = chosen.filter((name) => !TARGETS.some((t) => t.name === name));
if (unknown.length > 0)
  fail(`no target ${unknown.join(", ")}; targets: ${TARGETS.map((t) => t.name).join(", ")}`);
const targets = TARGETS.filter((t) => chosen.includes(t.name));
const fullTotal = targets.reduce((sum, t) => sum + t.defaultRuns, 0);
const runsOf = (defaultRuns: number): number =>
  runs === undefined
    ? defaultRuns
    : values.total
      ? Math.max(1, Math.round((runs * defaultRuns) / fullTotal))
      : runs;

const reports: Record<string, TargetReport> = {};
const started = performance.now();
for (const [i, target] of targets.entries()) {
  const count = runsOf(target.defaultRuns);
  // Each target gets its own seed from the run's, so one can be replayed alone with --target.
  const targetSeed = seed + i;
  process.stderr.write(`fuzz: ${target.name}: ${count} inputs, seed ${targetSeed}\n`);
  const report = await runTarget(target, {
    seed: targetSeed,
    runs: count,
    progress: (done) => process.stderr.write(`fuzz: ${target.name}: ${done}/${count}\n`),
  });
  reports[target.name] = report;
  process.stderr.write(
    `fuzz: ${target.name}: ${report.runs} inputs, ${report.failures} failures, ${report.partialWrites} partial writes${report.secretsFound === undefined ? "" : `, ${report.secretsFound} files with the secret`}, ${report.ms} ms\n`,
  );
  if (report.counterexample !== undefined) {
    process.stderr.write(
      `fuzz: ${target.name} failed: ${report.error}\ncounterexample (shrunk): ${report.counterexample}\n`,
    );
  }
}
const all = Object.values(reports);
const totals = {
  runs: all.reduce((sum, r) => sum + r.runs, 0),
  failures: all.reduce((sum, r) => sum + r.failures, 0),
  partialWrites: all.reduce((sum, r) => sum + r.partialWrites, 0),
  /** Files holding the registered secret after the targets that write (api, cli, http). */
  secretsFound: all.reduce((sum, r) => sum + (r.secretsFound ?? 0), 0),
  ms: Math.round(performance.now() - started),
};
const summary = { seed, node: process.version, targets: reports, totals };
if (values.json) process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
else
  process.stdout.write(
    `fuzz: ${totals.runs} inputs, ${totals.failures} failures, ${totals.partialWrites} partial writes, ${totals.secretsFound} files with the secret in ${totals.ms} ms (seed ${seed})\n`,
  );
process.exit(totals.failures > 0 || totals.partialWrites > 0 || totals.secretsFound > 0 ? 1 : 0);
