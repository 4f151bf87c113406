import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
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
  /** The audit worker's heap (MiB), null when the audit ran in the child's own thread. */
  readonly heapMib: number | null;
  /** Why a bounded audit ran in the child's own thread after all, or null. */
  readonly fallback: string | null;
  readonly startRssKiB: number;
  readonly maxRssKiB: number;
}

const WORKER = join(ROOT, "src", "adapters", "auditWorker.ts");

/**
 * The child as JavaScript files, as `holdfast audit` runs from the compiled package: under the
 * tsx loader the process holds ~170 MiB of compiled TypeScript before the audit starts, which is
 * the loader's, not the audit's. The audit worker's script is bundled next to the child, where the
 * bounded audit looks for it. esbuild comes with tsx; without it the child runs under tsx.
 */
const bundleChild = async (): Promise<string | null> => {
  try {
    const esbuild = await import("esbuild");
    const outdir = join(ROOT, "reports", "bench-build");
    // Split chunks are named by their content: last run's must not pile up.
    rmSync(outdir, { recursive: true, force: true });
    await esbuild.build({
      entryPoints: { "audit-child": CHILD, auditWorker: WORKER },
      outdir,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      packages: "external",
      // A dynamic import stays one (the PostgreSQL journal, and with it `pg`, loads only for a
      // postgres:// store), as in the compiled package; without splitting esbuild inlines it.
      splitting: true,
      logLevel: "silent",
    });
    return join(outdir, "audit-child.js");
  } catch {
    return null;
  }
};

/** Audit `path` in a child process: plain Node on the bundled child, else Node with tsx. */
const auditInChild = (
  path: string,
  bundled: string | null,
  mode: "bounded" | "in-process",
): Promise<ChildReport> =>
  new Promise((resolvePromise, reject) => {
    const args = bundled ? [bundled, path, mode] : ["--import", "tsx", CHILD, path, mode];
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
    progress(
      "audit",
      `auditing ${log.events.toLocaleString("en-US")} events in a child process, as holdfast audit does`,
    );
    const report = await auditInChild(log.path, bundled, "bounded");
    // The same audit as a library call runs it: in the caller's thread, V8's heap left to grow.
    progress("audit", "auditing again in the child's own thread (auditStore, no heap cap)");
    const inProcess = await auditInChild(log.path, bundled, "in-process").catch((error: unknown) => ({
      error: error instanceof Error ? error.message : String(error),
    }));
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
            note: `holdfast audit's audit over ${report.events.toLocaleString("en-US")} events (every chain, every run folded, laws, projections rebuilt and compared) in ${round(report.seconds)} s; ${findings}`,
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
            note: `peak RSS of the child process (its own: VmHWM on Linux; ${runner}), auditing as holdfast audit does: ${report.heapMib === null ? `in its own thread${report.fallback ? ` (${report.fallback})` : ""}` : `in a worker thread with a ${report.heapMib} MiB heap`}; ${mib(report.startRssKiB)} MiB before it opened the journal; page cache 4 MiB in the worker, 32 MiB in one thread`,
          },
          "<=",
          256,
          "value",
        ),
        "error" in inProcess
          ? figure({
              name: "audit.peak_rss.in_process",
              value: Number.NaN,
              unit: "MiB",
              note: `the in-process audit failed: ${inProcess.error}`,
            })
          : figure({
              name: "audit.peak_rss.in_process",
              value: mib(inProcess.maxRssKiB),
              unit: "MiB",
              note: `peak RSS of the same audit run in the child's own thread (auditStore, as a library call runs it; V8 grows the heap as it likes), ${round(inProcess.events / inProcess.seconds)} events/s`,
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
