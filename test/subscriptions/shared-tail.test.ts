import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { AnyEvent, RecordedEvent } from "../../src/events/index.js";
import type { JournalReader } from "../../src/runtime/Journal.js";
import { SharedTail } from "../../src/runtime/sharedTail.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { useTempDir } from "../support/tmp.js";

/*
 * One shared tail for many subscribers (decision 0079): each subscriber gets what a subscription of
 * its own would — every event after its position that passes its filter, once, in position order —
 * while the journal is read once per page for all of them.
 */

const tempDir = useTempDir();

const opened = (engine: string): AnyEvent => ({ type: "journal.opened", schemaVersion: 1, engine });

/** The real journal, with its `readAll` calls counted (instrumentation, not a fake). */
const counted = (journal: LibsqlJournal): { reader: JournalReader; reads: () => number } => {
  let reads = 0;
  const reader = new Proxy(journal, {
    get(target, key, receiver) {
      if (key === "readAll")
        return (options: { after: number; limit: number }) => {
          reads += 1;
          return target.readAll(options);
        };
      const value = Reflect.get(target, key, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { reader, reads: () => reads };
};

const take = async (it: AsyncIterableIterator<RecordedEvent>, n: number): Promise<RecordedEvent[]> => {
  const out: RecordedEvent[] = [];
  while (out.length < n) {
    const next = await it.next();
    if (next.done) break;
    out.push(next.value);
  }
  return out;
};

/** Append `n` events, one commit each, to streams s0…s3 in turn. */
const appendMany = async (journal: LibsqlJournal, n: number, versions: Map<string, number>) => {
  for (let i = 0; i < n; i++) {
    const streamId = `s${i % 4}`;
    const version = versions.get(streamId) ?? 0;
    await journal.append({
      streamId,
      expectedVersion: version === 0 ? "no-stream" : version,
      events: [opened(`e${i}`)],
    });
    versions.set(streamId, version + 1);
  }
};

const everything = async (journal: LibsqlJournal): Promise<ReadonlyArray<RecordedEvent>> =>
  journal.readAll({ after: 0, limit: 100_000 });

describe("a shared tail", () => {
  it("twenty subscribers at different positions and filters each get what their own subscription would, while appends go on; the ring is read once per page for all", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const versions = new Map<string, number>();
    await appendMany(journal, 40, versions);
    const { reader, reads } = counted(journal);
    // A small ring, so some subscribers fall behind it and read their own pages.
    const tail = new SharedTail(reader, { pollMs: 20, pageSize: 8, ringSize: 16 });
    const specs = Array.from({ length: 20 }, (_, i) => ({
      after: (i * 7) % 45,
      streamIds: i % 3 === 0 ? [`s${i % 4}`] : undefined,
    }));
    const subs = specs.map((spec) =>
      tail.subscribe({
        after: spec.after,
        ...(spec.streamIds ? { filter: { streamIds: spec.streamIds } } : {}),
      }),
    );
    const appending = appendMany(journal, 60, versions);
    await appending;
    const all = await everything(journal);
    const wanted = specs.map((spec) =>
      all.filter((e) => e.position > spec.after && (!spec.streamIds || spec.streamIds.includes(e.streamId))),
    );
    const got = await Promise.all(subs.map((sub, i) => take(sub, wanted[i]!.length)));
    for (const [i, events] of got.entries())
      expect(
        events.map((e) => e.position),
        `subscriber ${i}`,
      ).toEqual(wanted[i]!.map((e) => e.position));
    for (const sub of subs) await sub.return?.();
    expect(tail.subscribers).toBe(0);
    // The same twenty as subscriptions of their own, over the same journal, read more pages.
    const own = counted(journal);
    const subscriptions = specs.map((spec) =>
      subscribe(own.reader, {
        after: spec.after,
        bufferSize: 8,
        ...(spec.streamIds ? { filter: { streamIds: spec.streamIds } } : {}),
      }),
    );
    const ownGot = await Promise.all(subscriptions.map((sub, i) => take(sub, wanted[i]!.length)));
    for (const sub of subscriptions) await sub.return?.();
    expect(ownGot.map((events) => events.length)).toEqual(wanted.map((events) => events.length));
    expect(reads()).toBeLessThan(own.reads());
    await journal.close();
  });

  it("live: subscribers waiting at the head are woken by a commit and get it once; one read serves all of them", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const versions = new Map<string, number>();
    await appendMany(journal, 5, versions);
    const head = (await everything(journal)).at(-1)!.position;
    const { reader, reads } = counted(journal);
    const tail = new SharedTail(reader, { pollMs: 60_000 });
    const subs = Array.from({ length: 50 }, () => tail.subscribe({ after: head }));
    const waiting = subs.map((sub) => sub.next());
    // The tail has looked once (and found nothing) before the commit.
    while (reads() === 0) await new Promise((r) => setTimeout(r, 5));
    const before = reads();
    await appendMany(journal, 1, versions);
    const results = await Promise.all(waiting);
    expect(results.map((r) => (r.done ? null : r.value.position))).toEqual(subs.map(() => head + 1));
    // One read for all fifty (a subscription each would read fifty times); at most one more if
    // the commit raced the tail's first look.
    expect(reads() - before).toBeLessThanOrEqual(2);
    for (const sub of subs) await sub.return?.();
    await journal.close();
  });

  it("a subscriber ahead of the tail moves it on; one behind the new floor still gets every event, once", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const versions = new Map<string, number>();
    await appendMany(journal, 30, versions);
    const all = await everything(journal);
    const tail = new SharedTail(journal, { pollMs: 20, pageSize: 4, ringSize: 8 });
    const early = tail.subscribe({ after: 0 });
    const firstFew = await take(early, 3);
    const late = tail.subscribe({ after: all[25]!.position });
    await appendMany(journal, 10, versions);
    const full = await everything(journal);
    const rest = await take(early, full.length - 3);
    expect([...firstFew, ...rest].map((e) => e.position)).toEqual(full.map((e) => e.position));
    const lateGot = await take(late, full.length - 26);
    expect(lateGot.map((e) => e.position)).toEqual(full.slice(26).map((e) => e.position));
    await early.return?.();
    await late.return?.();
    await journal.close();
  });

  it("a subscriber resuming from past every commit does not take the tail from the others: commits still cost one read for all; the last to leave empties the ring", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const versions = new Map<string, number>();
    await appendMany(journal, 5, versions);
    const head = (await everything(journal)).at(-1)!.position;
    const { reader, reads } = counted(journal);
    const tail = new SharedTail(reader, { pollMs: 60_000 });
    const subs = Array.from({ length: 30 }, () => tail.subscribe({ after: head }));
    const bogus = tail.subscribe({ after: Number.MAX_SAFE_INTEGER });
    const bogusNext = bogus.next();
    for (let round = 1; round <= 3; round++) {
      const waiting = subs.map((sub) => sub.next());
      while (reads() === 0) await new Promise((r) => setTimeout(r, 5));
      const before = reads();
      await appendMany(journal, 1, versions);
      const results = await Promise.all(waiting);
      expect(results.map((r) => (r.done ? null : r.value.position))).toEqual(subs.map(() => head + round));
      // One read for the thirty, one for the subscriber past the end (it reads its own), and at
      // most one more where a commit raced a look.
      expect(reads() - before, `round ${round}`).toBeLessThanOrEqual(4);
    }
    await bogus.return?.();
    expect(await bogusNext).toEqual({ done: true, value: undefined });
    for (const sub of subs) await sub.return?.();
    expect(tail.subscribers).toBe(0);
    expect(tail.held).toBe(0);
    await journal.close();
  });

  it("return() while a subscriber reads a page of its own ends it when the read is back, not a poll later", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const versions = new Map<string, number>();
    await appendMany(journal, 5, versions);
    const head = (await everything(journal)).at(-1)!.position;
    const tail = new SharedTail(journal, { pollMs: 60_000 });
    const atHead = tail.subscribe({ after: head });
    // Past every commit while another holds the tail: it reads its own page, then would wait.
    const ahead = tail.subscribe({ after: head + 1_000 });
    const pending = ahead.next();
    // Closed while that read is in flight, before any wait began: the wait it goes on to must not
    // start (a minute, with this pollMs; the test's own timeout fails first).
    await ahead.return?.();
    expect(await pending).toEqual({ done: true, value: undefined });
    await atHead.return?.();
    expect(tail.subscribers).toBe(0);
    await journal.close();
  });

  it("return() ends a subscriber waiting for a commit at once", async () => {
    const journal = LibsqlJournal.open(join(tempDir(), "j.db"));
    const tail = new SharedTail(journal, { pollMs: 60_000 });
    const sub = tail.subscribe({ after: 0 });
    const pending = sub.next();
    await new Promise((r) => setTimeout(r, 20));
    await sub.return?.();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(tail.subscribers).toBe(0);
    await journal.close();
  });
});
