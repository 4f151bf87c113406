import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { RecordedEvent } from "../../src/events/index.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { subscribe } from "../../src/runtime/subscribe.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const echo = defineTool({ name: "echo", args: Schema.Struct({ n: Schema.Number }), run: async ({ n }) => n });
const worker = defineAgent({
  name: "worker",
  version: "1",
  run: async (turn, input: { calls: number }) => {
    let total = 0;
    for (let i = 0; i < input.calls; i++) total += await turn.tool(echo, { n: i });
    await turn.checkpoint({ total });
    return total;
  },
});

const readEverything = async (journal: Journal): Promise<RecordedEvent[]> => {
  const all: RecordedEvent[] = [];
  for (;;) {
    const page = await journal.readAll({ after: all.at(-1)?.position ?? 0, limit: 500 });
    if (page.length === 0) return all;
    all.push(...page);
  }
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

describe("subscriptions", () => {
  it("with 8 runs appending concurrently, a subscriber from 0 gets every event once, in position order, as readAll has them", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({ store: db, agents: [worker], tools: [echo] });
    const sub = rt.subscribe({ after: 0, bufferSize: 16 });
    const handles = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        rt.submit({ chatId: `c${i}`, inputId: "m", agent: "worker", content: { calls: 10 } }),
      ),
    );
    const results = await Promise.all(handles.map((h) => h.result));
    expect(results.every((r) => r.status === "completed")).toBe(true);
    const journal = LibsqlJournal.open(db);
    const expected = await readEverything(journal);
    await journal.close();
    const received = await take(sub, expected.length);
    await sub.return?.();
    expect(received.map((e) => e.position)).toEqual(expected.map((e) => e.position));
    expect(received.map((e) => e.hash)).toEqual(expected.map((e) => e.hash));
    await rt.close();
  });

  it("resumed from a saved position after a restart, it continues with no gap and no duplicate", async () => {
    const db = join(tempDir(), "j.db");
    const first = await openRuntime({ store: db, agents: [worker], tools: [echo] });
    await (await first.submit({ chatId: "a", inputId: "m", agent: "worker", content: { calls: 5 } })).result;
    const sub = first.subscribe();
    const seen = await take(sub, 6);
    await sub.return?.();
    const saved = seen.at(-1)!.position;
    await first.close();

    const second = await openRuntime({ store: db, agents: [worker], tools: [echo] });
    await (await second.submit({ chatId: "b", inputId: "m", agent: "worker", content: { calls: 5 } })).result;
    const journal = LibsqlJournal.open(db);
    const all = await readEverything(journal);
    await journal.close();
    const resumed = second.subscribe({ after: saved });
    const rest = await take(resumed, all.length - seen.length);
    await resumed.return?.();
    expect([...seen, ...rest].map((e) => e.position)).toEqual(all.map((e) => e.position));
    await second.close();
  });

  it("a stalled consumer never has more than the buffer bound read ahead of it", async () => {
    const db = join(tempDir(), "j.db");
    const journal = LibsqlJournal.open(db);
    let fetched = 0;
    // Counts what the subscription reads; storage is the real journal.
    const counting: Journal = Object.assign(Object.create(journal) as Journal, {
      readAll: async (o: { after: number; limit: number }) => {
        const page = await journal.readAll(o);
        fetched += page.length;
        return page;
      },
      onCommitted: (l: () => void) => journal.onCommitted(l),
    });
    const opened = { type: "journal.opened", schemaVersion: 1, engine: "libsql" } as const;
    for (let i = 0; i < 50; i++)
      await journal.append({
        streamId: `s${i}`,
        expectedVersion: "any",
        events: [opened, opened, opened, opened],
      });
    const sub = subscribe(counting, { bufferSize: 8 });
    const consumed = await take(sub, 3);
    // The consumer stalls; more events keep arriving.
    for (let i = 0; i < 50; i++)
      await journal.append({ streamId: `t${i}`, expectedVersion: "any", events: [opened, opened] });
    await new Promise((r) => setTimeout(r, 300));
    expect(fetched - consumed.length).toBeLessThanOrEqual(8);
    const later = await take(sub, 8);
    expect(later.map((e) => e.position)).toEqual(
      Array.from({ length: 8 }, (_, i) => consumed.length + i + 1),
    );
    await sub.return?.();
    await journal.close();
  });

  it("live events arrive after catch-up, also from another journal connection (another process)", async () => {
    const db = join(tempDir(), "j.db");
    const reader = LibsqlJournal.open(db);
    const writer = LibsqlJournal.open(db);
    const sub = subscribe(reader, { pollMs: 50 });
    const opened = { type: "journal.opened", schemaVersion: 1, engine: "libsql" } as const;
    const pending = take(sub, 3);
    await writer.append({ streamId: "x", expectedVersion: "no-stream", events: [opened, opened] });
    await reader.append({ streamId: "y", expectedVersion: "no-stream", events: [opened] });
    const got = await pending;
    expect(got.map((e) => e.streamId).sort()).toEqual(["x", "x", "y"]);
    await sub.return?.();
    // After return(), the iterator is done and holds nothing.
    expect(await sub.next()).toEqual({ done: true, value: undefined });
    await reader.close();
    await writer.close();
  });

  it("filters by run, by chat and by event type", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({ store: db, agents: [worker], tools: [echo] });
    const a = await rt.submit({ chatId: "ca", inputId: "m", agent: "worker", content: { calls: 2 } });
    const b = await rt.submit({ chatId: "cb", inputId: "m", agent: "worker", content: { calls: 2 } });
    await Promise.all([a.result, b.result]);
    await rt.documents.replace("cb", { expectedRevision: 0, value: { title: "t", items: [] }, by: "ada" });
    const total = async (options: Parameters<typeof rt.subscribe>[0]) => {
      const sub = rt.subscribe({ ...options, pollMs: 20 });
      const out: RecordedEvent[] = [];
      const deadline = Date.now() + 500;
      while (Date.now() < deadline) {
        const next = await Promise.race([
          sub.next(),
          new Promise<null>((r) => setTimeout(() => r(null), 100)),
        ]);
        if (next === null) break;
        if (!next.done) out.push(next.value);
      }
      await sub.return?.();
      return out;
    };
    const byRun = await total({ filter: { runIds: [a.runId] } });
    expect(new Set(byRun.map((e) => e.streamId))).toEqual(new Set([`run-${a.runId}`]));
    const byChat = await total({ filter: { chatIds: ["cb"] } });
    expect(new Set(byChat.map((e) => e.streamId))).toEqual(new Set([`run-${b.runId}`, "chat-cb"]));
    const byType = await total({ filter: { types: ["run.completed"] } });
    expect(byType.map((e) => e.event.type)).toEqual(["run.completed", "run.completed"]);
    await rt.close();
  });
});
