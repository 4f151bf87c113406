import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { AuditOptions, AuditReport } from "../runtime/audit.js";
import type { JournalReader } from "../runtime/Journal.js";
import { auditStore } from "./auditStore.js";

/** What the audit worker is given (all of it structured-cloneable). */
export interface WorkerAudit {
  /** The store as the command was given it (a path or a `postgres://` URL; undefined: the default). */
  readonly store: string | undefined;
  readonly options: Pick<AuditOptions, "expectHead" | "maxFindings" | "progressEvery">;
}

/**
 * How {@link auditInBoundedHeap} audits: the audit's own options (expected head, findings kept,
 * progress) and where it runs (the size past which a worker is used, the worker's heap), with what
 * it tells along the way.
 */
export interface BoundedAuditOptions
  extends Pick<AuditOptions, "expectHead" | "maxFindings" | "progressEvery" | "onProgress"> {
  /** A log whose positions stay at or below this is audited in this process (default 100 000). */
  readonly inProcessUpTo?: number;
  /** The worker's heap in MiB (default {@link boundedHeapMib} of the log's last position). */
  readonly heapMib?: number;
  /** Told when the audit runs in a worker thread, with the worker's heap in MiB. */
  readonly onWorker?: (heapMib: number) => void;
  /** Told when the audit ran in this process after all, and why (the worker failed or ran out of heap). */
  readonly onFallback?: (reason: string) => void;
}

/** The audit worker's libSQL page cache (KiB). */
export const WORKER_CACHE_KIB = 4 * 1024;

/** The audit worker's young generation (MiB): short-lived garbage per event dies there. */
const YOUNG_GENERATION_MIB = 8;

/** Below this many positions a log's audit stays well under its memory target without a worker. */
export const IN_PROCESS_UP_TO = 100_000;

/**
 * The heap an audit worker gets for a log whose last position is `lastPosition`: 80 MiB, and 48 MiB
 * more per million positions. The audit's live set is bounded by the number of streams (about
 * 60 MiB for 1M events in 94k streams, docs/performance.md); the rest is room for V8 to collect in.
 */
export const boundedHeapMib = (lastPosition: number): number =>
  80 + Math.ceil((48 * Math.max(0, lastPosition)) / 1_000_000);

/** Whether the log holds an event with a position above `position`. */
const beyond = async (journal: JournalReader, position: number): Promise<boolean> =>
  (await journal.readAllRows({ after: position, limit: 1 })).length > 0;

/**
 * The last position handed out, found with point reads (positions only grow): 0 for an empty log.
 * A log that grows meanwhile only makes it an underestimate, which the worker's heap allows for.
 */
export const lastPositionOf = async (journal: JournalReader): Promise<number> => {
  let low = 0;
  let high = 1024;
  while (await beyond(journal, high)) {
    low = high;
    high *= 2;
  }
  // Invariant: some position > low exists (or low = 0), none > high.
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (await beyond(journal, middle)) low = middle;
    else high = middle;
  }
  return (await beyond(journal, low)) ? high : low;
};

/** How to start the worker: its script next to this module (`.js` in the package). */
interface WorkerScript {
  readonly script: URL | string;
  readonly eval: boolean;
}

/**
 * The worker's script next to this module: `.js` in the package; from the TypeScript sources (tests,
 * tsx), a two-line bootstrap that registers tsx in the worker first (a worker does not inherit the
 * loader the process was started with). Null when the script is missing (a bundle without it).
 */
const workerScript = (): WorkerScript | null => {
  const fromSources = import.meta.url.endsWith(".ts");
  const url = new URL(`./auditWorker.${fromSources ? "ts" : "js"}`, import.meta.url);
  if (!existsSync(fileURLToPath(url))) return null;
  if (!fromSources) return { script: url, eval: false };
  const bootstrap = `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); });`;
  return { script: bootstrap, eval: true };
};

/**
 * The audit as `holdfast audit` runs it: a long log is audited in a worker thread whose heap is
 * capped for the log's size, so the process's memory stays bounded (V8 left to itself grows the
 * heap to several times what the audit holds live); a short one in this process. `journal` is the
 * caller's open reader of `store` (its open did the checks and says what is wrong with a journal);
 * the worker opens the same store read-only. A worker that runs out of its heap is tried once more
 * with twice the heap; if the worker cannot start, fails, or runs out again, the audit runs here
 * instead — same report, same errors — and `onFallback` says why each time.
 */
export const auditInBoundedHeap = async (
  store: string | undefined,
  journal: JournalReader,
  options: BoundedAuditOptions = {},
): Promise<AuditReport> => {
  const { onProgress, onFallback, onWorker, inProcessUpTo, heapMib, ...passed } = options;
  const inProcess: AuditOptions = { ...passed, ...(onProgress ? { onProgress } : {}) };
  if (!(await beyond(journal, inProcessUpTo ?? IN_PROCESS_UP_TO))) return auditStore(journal, inProcess);
  const script = workerScript();
  if (!script) {
    onFallback?.("the audit worker's script is not next to holdfast's modules; audited in this process");
    return auditStore(journal, inProcess);
  }
  const first = heapMib ?? boundedHeapMib(await lastPositionOf(journal));
  // A worker that runs out of its heap gets one more try with twice the heap: still bounded.
  for (const heap of [first, first * 2]) {
    onWorker?.(heap);
    try {
      return await inWorker(script, { store, options: passed }, heap, onProgress);
    } catch (error) {
      const outOfHeap = (error as { code?: string }).code === "ERR_WORKER_OUT_OF_MEMORY";
      const why = outOfHeap
        ? `the audit worker ran out of its ${heap} MiB heap`
        : `the audit worker failed (${error instanceof Error ? error.message : String(error)})`;
      if (outOfHeap && heap === first) {
        onFallback?.(`${why}; audited again in a worker with ${first * 2} MiB`);
        continue;
      }
      onFallback?.(`${why}; audited again in this process, without a heap cap`);
      break;
    }
  }
  return auditStore(journal, inProcess);
};

const inWorker = (
  script: WorkerScript,
  work: WorkerAudit,
  heapMib: number,
  onProgress: ((events: number) => void) | undefined,
): Promise<AuditReport> =>
  new Promise((resolve, reject) => {
    let report: AuditReport | null = null;
    const worker = new Worker(script.script, {
      eval: script.eval,
      // Not the process's own flags (`--input-type`, a loader, V8 flags): the worker needs none of them.
      execArgv: [],
      workerData: work,
      resourceLimits: { maxOldGenerationSizeMb: heapMib, maxYoungGenerationSizeMb: YOUNG_GENERATION_MIB },
    });
    worker.on(
      "message",
      (message: { kind: "progress"; events: number } | { kind: "report"; report: AuditReport }) => {
        if (message.kind === "progress") onProgress?.(message.events);
        else report = message.report;
      },
    );
    worker.once("error", reject);
    worker.once("exit", (code) => {
      if (report) resolve(report);
      else reject(new Error(`it exited with code ${code} before reporting`));
    });
  });
