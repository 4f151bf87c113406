import { spawn } from "node:child_process";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { writeRecoveryFixture } from "../fixtures.js";
import { figure, targeted } from "../lib/metric.js";
import { progress, throttled } from "../lib/progress.js";
import type { Section, SharedLog } from "../lib/section.js";
import { round } from "../lib/stats.js";

const CHILD = join(dirname(fileURLToPath(import.meta.url)), "..", "tools", "audit-child.ts");
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface ChildReport {
  readonly events: number;
  readonly seconds: number;
  readonly clean: boolean;
  readonly findings: number;
  readonly kinds: ReadonlyArray<string>;
  readonly startRssKiB: number;
  readonly maxRssKiB: number;
}

/**
 * The child as one JavaScript file, as `holdfast audit` runs from the compiled package: under the
 * tsx loader the process holds ~170 MiB of compiled TypeScript before the audit starts, which is
 * the loader's, not the audit's. esbuild comes with tsx; without it the child runs under tsx.
 */
const bundleChild = async (): Promise<string | null> => {
  try {
    const esbuild = await import("esbuild");
    const outfile = join(ROOT, "reports", "bench-build", "audit-child.mjs");
    await esbuild.build({
      entryPoints: [CHILD],
      outfile,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      logLevel: "silent",
    });
    return outfile;
  } catch {
    return null;
  }
};

/** Audit `path` in a child process: plain Node on the bundled child, else Node with tsx. */
const auditInChild = (
  path: string,
  bundled: string | null,
  nodeFlags: ReadonlyArray<string> = [],
): Promise<ChildReport> =>
  new Promise((resolvePromise, reject) => {
    const args = [...nodeFlags, ...(bundled ? [bundled, path] : ["--import", "tsx", CHILD, path])];
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => {
      if (code !== 0) {
        reject(new Error(`the audit child exited ${code}: ${err.trim().split("\n").slice(-5).join(" | ")}`));
        return;
      }
      resolvePromise(JSON.parse(out.trim().split("\n").at(-1)!) as ChildReport);
    });
  });

/** The old-space cap of the second audit run: the 1M-event audit finishes in it (it fails at 64). */
const CAPPED_HEAP_MIB = 128;

/** 5. Audit: events/s verified and peak RSS on the 1,000,000-event log. */
export const auditSection: Section = {
  name: "audit",
  async run({ options, temp, logs }) {
    const wanted = options.quick ? 40_000 : 1_000_000;
    // The recovery section's filler log when it ran; else one written here (it is the slow part).
    let log: SharedLog | undefined = logs.get("filler");
    const source = log ? "the recovery section's filler log (finished runs and its interrupted runs)" : "";
    if (!log) {
      const path = join(temp.folder("audit"), "log.db");
      const written = await writeRecoveryFixture(path, {
        interrupted: 100,
        fillerEvents: wanted,
        isHeld: (n) => n % 2 === 0,
        onProgress: throttled("audit", `writing a ${wanted.toLocaleString("en-US")}-event log (runs)`, 5000),
      });
      log = { path, events: written.totalEvents };
    }
    const bundled = await bundleChild();
    progress("audit", `auditing ${log.events.toLocaleString("en-US")} events in a child process`);
    const report = await auditInChild(log.path, bundled);
    // The same audit in a capped old space: what it needs live, not what V8 chose to grow to.
    progress("audit", `auditing again with --max-old-space-size=${CAPPED_HEAP_MIB}`);
    const capped = await auditInChild(log.path, bundled, [`--max-old-space-size=${CAPPED_HEAP_MIB}`]).catch(
      (error: unknown) => ({ error: error instanceof Error ? error.message : String(error) }),
    );
    const runner = bundled
      ? "Node on the bundled child script"
      : "Node with the tsx loader (esbuild missing)";
    const mib = (kib: number) => round(kib / 1024);
    const findings = report.clean
      ? "clean"
      : `${report.findings} finding(s) (${report.kinds.join(", ")}): the figure is still the audit's speed over the whole log`;
    const eventsPerS = report.events / report.seconds;
    return {
      metrics: [
        targeted(
          {
            name: "audit.events_per_s",
            value: round(eventsPerS),
            unit: "events/s",
            ratio: null,
            note: `auditJournal over ${report.events.toLocaleString("en-US")} events (every chain, every run folded, laws, projections rebuilt and compared) in ${round(report.seconds)} s; ${findings}`,
          },
          ">=",
          100_000,
          "value",
        ),
        targeted(
          {
            name: "audit.peak_rss",
            value: mib(report.maxRssKiB),
            unit: "MiB",
            ratio: null,
            note: `maxRSS of the child process (${runner}; the journal's page cache is 32 MiB), ${mib(report.startRssKiB)} MiB before it opened the journal`,
          },
          "<=",
          256,
          "value",
        ),
        "error" in capped
          ? figure({
              name: "audit.peak_rss.capped_heap",
              value: Number.NaN,
              unit: "MiB",
              note: `the audit did not finish with --max-old-space-size=${CAPPED_HEAP_MIB}: ${capped.error}`,
            })
          : figure({
              name: "audit.peak_rss.capped_heap",
              value: mib(capped.maxRssKiB),
              unit: "MiB",
              note: `maxRSS with --max-old-space-size=${CAPPED_HEAP_MIB} (the audit finishes within it: its live heap is bounded; uncapped, V8 grows the heap as it likes), ${round(capped.events / capped.seconds)} events/s`,
            }),
        figure({
          name: "audit.log_events",
          value: report.events,
          unit: "events",
          note: source || "a log of finished runs and 100 interrupted ones written for the audit",
        }),
      ],
    };
  },
};
