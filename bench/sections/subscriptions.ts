import { join } from "node:path";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { benchStreams } from "../fixtures.js";
import { figure, type Metric, targeted } from "../lib/metric.js";
import type { Section } from "../lib/section.js";
import { round, spreadOf } from "../lib/stats.js";

export interface Delivery {
  /** From the COMMIT that holds an event to the live subscriber's `next()` yielding it, in ms. */
  readonly commitToDelivery: ReadonlyArray<number>;
  /** From `append()` being called to the same delivery (includes the commit itself), in ms. */
  readonly appendToDelivery: ReadonlyArray<number>;
}

/**
 * Append the events of `runs` bench runs (admission, intent/outcome pairs, completion) one append at
 * a time, as a run does, while a live subscriber started at the current end of the log consumes
 * them. The commit time comes from a commit listener registered before the subscriber's, so it
 * runs first, right after the COMMIT returns.
 */
export const measureDelivery = async (
  journal: Journal,
  key: Uint8Array,
  runs: number,
  callsPerRun: number,
  tag: string,
): Promise<Delivery> => {
  const committedAt = new Map<string, number>();
  const calledAt = new Map<string, number>();
  let inFlight: ReadonlyArray<string> = [];
  const unlisten = journal.onCommitted(() => {
    const now = performance.now();
    for (const k of inFlight) if (!committedAt.has(k)) committedAt.set(k, now);
  });
  const head = await journal.readAll({ after: 0, limit: 1 });
  let after = 0;
  // The subscriber starts live, at the end of whatever the journal already holds.
  for (let page = head; page.length > 0; page = await journal.readAll({ after, limit: 1000 }))
    after = page.at(-1)!.position;
  const subscription = subscribe(journal, { after });
  const commitToDelivery: number[] = [];
  const appendToDelivery: number[] = [];
  let expected = 0;
  let delivered = 0;
  const signal: { allDelivered: () => void } = { allDelivered: () => {} };
  const consumer = (async () => {
    for await (const e of subscription) {
      const now = performance.now();
      const k = `${e.streamId}@${e.version}`;
      const committed = committedAt.get(k);
      const called = calledAt.get(k);
      if (committed !== undefined) commitToDelivery.push(now - committed);
      if (called !== undefined) appendToDelivery.push(now - called);
      delivered++;
      if (delivered === expected) signal.allDelivered();
    }
  })();
  try {
    const streams = Array.from({ length: runs }, (_, r) => benchStreams(key, `${tag}-${r}`, callsPerRun));
    expected = streams.reduce((n, s) => n + s.appends.reduce((m, a) => m + a.length, 0), 0);
    const done = new Promise<void>((r) => {
      signal.allDelivered = r;
    });
    for (const stream of streams) {
      let version = 0;
      for (const events of stream.appends) {
        const keys = events.map((_, i) => `${stream.streamId}@${version + i + 1}`);
        const now = performance.now();
        for (const k of keys) calledAt.set(k, now);
        inFlight = keys;
        await journal.append({ streamId: stream.streamId, expectedVersion: version || "no-stream", events });
        version += events.length;
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      await Promise.race([
        done,
        new Promise((_, reject) => {
          timer = setTimeout(
            () => reject(new Error(`${expected - delivered} of ${expected} events never delivered`)),
            30_000,
          );
        }),
      ]);
    } finally {
      clearTimeout(timer);
    }
  } finally {
    unlisten();
    await subscription.return?.();
    await consumer.catch(() => undefined);
  }
  return { commitToDelivery, appendToDelivery };
};

/** The metrics of one delivery measurement, under `prefix` (`subscriptions` or `postgres.subscriptions`). */
export const deliveryMetrics = (
  prefix: string,
  d: Delivery,
  store: string,
  p99Target: number | null,
): Metric[] => {
  const c = spreadOf(d.commitToDelivery);
  const a = spreadOf(d.appendToDelivery);
  const p99 = [...d.commitToDelivery].sort((x, y) => x - y)[Math.min(c.n - 1, Math.floor(c.n * 0.99))]!;
  const note = `${c.n} events appended one append at a time (bench runs: admission, intent/outcome pairs, completion) to ${store}, consumed by a live subscribe() started at the end of the log; from the COMMIT to the consumer`;
  const p99Metric = {
    name: `${prefix}.delivery.p99`,
    value: round(p99),
    unit: "ms",
    spread: { n: c.n, p95: round(c.p95), min: round(c.min), max: round(c.max) },
    note,
  };
  return [
    figure({ name: `${prefix}.delivery.p50`, value: round(c.median), unit: "ms", note }),
    p99Target === null
      ? figure(p99Metric)
      : targeted({ ...p99Metric, ratio: null }, "<=", p99Target, "value"),
    figure({
      name: `${prefix}.append_to_delivery.p50`,
      value: round(a.median),
      unit: "ms",
      note: `from append() being called, so the commit itself included; p95 ${round(a.p95)} ms`,
    }),
  ];
};

/** 6. Subscriptions: append-to-delivery latency with a live subscriber, on libSQL. */
export const subscriptionsSection: Section = {
  name: "subscriptions",
  async run({ options, temp }) {
    const runs = options.quick ? 5 : 20;
    const journal = LibsqlJournal.open(join(temp.folder("subscriptions"), "journal.db"));
    try {
      await measureDelivery(journal, journal.fingerprintKey, 1, 10, "warm-up");
      const delivery = await measureDelivery(journal, journal.fingerprintKey, runs, 50, "sub");
      return { metrics: deliveryMetrics("subscriptions", delivery, "a libSQL journal", 5) };
    } finally {
      await journal.close();
    }
  },
};
