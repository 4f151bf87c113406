/**
 * Would a writer thread pay? (issue 15 item 1, decision 0030.) The real `LibsqlJournal` runs in a
 * `worker_threads` worker that owns the connection; the main thread sends each append over
 * `postMessage` and waits for the result (the recorded events, cloned back, as a runtime would
 * need them). Compared, alternating, with the same journal on the main thread:
 *
 * - 64 streams appending at once (the bench's journal-only c64 workload): events/s, and how busy
 *   the main thread's event loop was (its utilisation × wall, per event) — what is left for the
 *   runtime above the journal;
 * - one stream appending one event at a time (the sequential path): µs per append.
 *
 *   npx tsx bench/tools/writer-thread.ts [--rounds 3] [--pairs 50] [--streams 64] [--sequential 400]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { isMainThread, parentPort, Worker, workerData } from "node:worker_threads";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { AppendRequest, AppendResult } from "../../src/runtime/Journal.js";
import { benchStreams } from "../fixtures.js";

type Append = (request: AppendRequest) => Promise<AppendResult>;

interface Mode {
  readonly name: string;
  readonly fingerprintKey: Uint8Array;
  readonly append: Append;
  /** Commits so far. */
  readonly commits: () => number;
  /** Event-loop utilisation of the thread that runs the journal, when it is not the main one. */
  readonly writerElu?: () => ReturnType<typeof performance.eventLoopUtilization>;
  readonly close: () => Promise<void>;
}

const inMain = (path: string): Mode => {
  let commits = 0;
  const journal = LibsqlJournal.open(path, { onBeforeCommit: () => commits++ });
  return {
    name: "main thread",
    commits: () => commits,
    fingerprintKey: journal.fingerprintKey,
    append: (request) => journal.append(request),
    close: () => journal.close(),
  };
};

const inWorker = async (path: string): Promise<Mode> => {
  // tsx's loader is not inherited by workers: the worker registers it, then loads this file.
  const worker = new Worker(
    `import("tsx/esm/api").then((tsx) => { tsx.register(); return import(${JSON.stringify(import.meta.url)}); })`,
    { eval: true, workerData: { path } },
  );
  const pending = new Map<number, { resolve: (r: AppendResult) => void; reject: (e: Error) => void }>();
  let next = 0;
  let commits = 0;
  let outbox: Array<{ id: number; request: AppendRequest }> = [];
  const ready = new Promise<Uint8Array>((resolve, reject) => {
    worker.once("error", reject);
    type Reply =
      | { kind: "done"; id: number; result: AppendResult; commits: number }
      | { kind: "failed"; id: number; message: string };
    worker.on("message", (message: { kind: "ready"; key: Uint8Array } | Reply[]) => {
      if (!Array.isArray(message)) return resolve(message.key);
      for (const one of message) {
        const waiter = pending.get(one.id)!;
        pending.delete(one.id);
        if (one.kind === "done") {
          commits = one.commits;
          waiter.resolve(one.result);
        } else waiter.reject(new Error(one.message));
      }
    });
  });
  const key = await ready;
  return {
    name: "writer thread",
    commits: () => commits,
    fingerprintKey: key,
    // The appends asked for in one turn of the event loop go in one message.
    append: (request) =>
      new Promise((resolve, reject) => {
        const id = next++;
        pending.set(id, { resolve, reject });
        outbox.push({ id, request });
        if (outbox.length === 1)
          setImmediate(() => {
            worker.postMessage(outbox);
            outbox = [];
          });
      }),
    writerElu: () => worker.performance.eventLoopUtilization(),
    close: async () => {
      worker.postMessage({ close: true });
      await new Promise((resolve) => worker.once("exit", resolve));
    },
  };
};

const concurrent = async (mode: Mode, streams: number, pairs: number) => {
  const plans = Array.from({ length: streams }, (_, s) =>
    benchStreams(mode.fingerprintKey, `c-${s}-${Math.random()}`, pairs),
  );
  const elu0 = performance.eventLoopUtilization();
  const w0 = mode.writerElu?.();
  const started = performance.now();
  const commits0 = mode.commits();
  let appends = 0;
  let events = 0;
  await Promise.all(
    plans.map(async (stream) => {
      let version = 0;
      for (const batch of stream.appends) {
        await mode.append({
          streamId: stream.streamId,
          expectedVersion: version || "no-stream",
          events: batch,
        });
        version += batch.length;
        events += batch.length;
        appends++;
      }
    }),
  );
  const ms = performance.now() - started;
  const elu = performance.eventLoopUtilization(elu0);
  const writer = w0 && mode.writerElu ? mode.writerElu() : undefined;
  const writerBusy = writer && w0 ? (writer.active - w0.active) / events : undefined;
  return {
    eventsPerS: events / (ms / 1000),
    appendsPerCommit: appends / (mode.commits() - commits0),
    mainBusyMicrosPerEvent: (elu.active * 1000) / events,
    writerBusyMicrosPerEvent: writerBusy === undefined ? undefined : writerBusy * 1000,
  };
};

const sequential = async (mode: Mode, appends: number) => {
  const stream = benchStreams(mode.fingerprintKey, `s-${Math.random()}`, Math.ceil(appends / 2));
  let version = 0;
  const times: number[] = [];
  for (const batch of stream.appends.slice(0, appends)) {
    const t = performance.now();
    await mode.append({ streamId: stream.streamId, expectedVersion: version || "no-stream", events: batch });
    times.push((performance.now() - t) * 1000);
    version += batch.length;
  }
  times.sort((a, b) => a - b);
  return { medianMicros: times[Math.floor(times.length / 2)]! };
};

const option = (name: string, fallback: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};

const main = async () => {
  const rounds = option("rounds", 3);
  const pairs = option("pairs", 50);
  const streams = option("streams", 64);
  const appends = option("sequential", 400);
  const dir = mkdtempSync(join(tmpdir(), "writer-thread-"));
  try {
    for (let round = 0; round < rounds; round++) {
      for (const which of round % 2 === 0 ? ["main", "worker"] : ["worker", "main"]) {
        const path = join(dir, `${which}-${round}.db`);
        const mode = which === "main" ? inMain(path) : await inWorker(path);
        try {
          await concurrent(mode, 8, 5); // warm-up
          const c = await concurrent(mode, streams, pairs);
          const s = await sequential(mode, appends);
          process.stdout.write(
            `round ${round + 1} ${mode.name.padEnd(13)}  c${streams}: ${Math.round(c.eventsPerS)} events/s, main thread busy ${c.mainBusyMicrosPerEvent.toFixed(1)} µs/event${c.writerBusyMicrosPerEvent === undefined ? "" : `, writer busy ${c.writerBusyMicrosPerEvent.toFixed(1)} µs/event`}, ${c.appendsPerCommit.toFixed(1)} appends/commit; sequential ${Math.round(s.medianMicros)} µs/append\n`,
          );
        } finally {
          await mode.close();
        }
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};

if (isMainThread) {
  await main();
} else {
  let commits = 0;
  const journal = LibsqlJournal.open((workerData as { path: string }).path, {
    onBeforeCommit: () => commits++,
  });
  const port = parentPort!;
  // The results of one group commit go back in one message.
  let replies: unknown[] = [];
  const reply = (message: unknown) => {
    replies.push(message);
    if (replies.length === 1)
      queueMicrotask(() => {
        port.postMessage(replies);
        replies = [];
      });
  };
  port.postMessage({ kind: "ready", key: journal.fingerprintKey });
  port.on("message", (message: Array<{ id: number; request: AppendRequest }> | { close: true }) => {
    if ("close" in message) {
      void journal.close().then(() => port.close());
      return;
    }
    for (const { id, request } of message)
      journal.append(request).then(
        (result) => reply({ kind: "done", id, result, commits }),
        (error: unknown) => reply({ kind: "failed", id, message: String(error) }),
      );
  });
}
