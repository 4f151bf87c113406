import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Annotation, END, START, StateGraph } from "@langchain/langgraph";
import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { graphStreamId, SYSTEM_STREAM } from "../../src/events/index.js";
import { HoldfastSaver } from "../../src/langgraph.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { forgeChained, rowsOf, tamper } from "../audit/tamper.js";
import { freshKey } from "../support/keys.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const SECRET = "sk-live-graph-4f9a2c7e1b";

afterEach(() => {
  delete process.env.HOLDFAST_ENCRYPTION_KEY;
});

/** A thread with two checkpoints (the second a child of the first) and a task's writes on the second. */
const givenThread = async (saver: HoldfastSaver, threadId: string): Promise<string> => {
  const first = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [`key is ${SECRET}`] } };
  const config = await saver.put(
    { configurable: { thread_id: threadId, checkpoint_ns: "" } },
    first,
    { source: "input", step: -1, parents: {} },
    { messages: 1 },
  );
  const second = { ...emptyCheckpoint(), id: uuid6(-1), channel_versions: { messages: 1 } };
  const child = await saver.put(config, second, { source: "loop", step: 0, parents: {} }, {});
  await saver.putWrites(child, [["messages", `again ${SECRET}`]], "task-1", "~__pregel_pull, agent");
  return child.configurable?.checkpoint_id as string;
};

const audit = async (db: string) => {
  const reader = LibsqlJournal.openReadOnly(db);
  try {
    return await auditJournal(reader);
  } finally {
    await reader.close();
  }
};

describe("the LangGraph saver on the journal", () => {
  it("checkpoints and writes are chained events of the thread's stream, and the journal audits clean", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db, secrets: { openai: SECRET } });
    const id = await givenThread(saver, "t-1");
    const tuple = await saver.getTuple({ configurable: { thread_id: "t-1" } });
    expect(tuple?.checkpoint.id).toBe(id);
    expect(tuple?.checkpoint.channel_values).toEqual({ messages: ["key is «secret:openai»"] });
    expect(tuple?.pendingWrites).toEqual([["task-1", "messages", "again «secret:openai»"]]);
    await saver.close();
    const reader = LibsqlJournal.openReadOnly(db);
    const events = await reader.readStream(graphStreamId("t-1"));
    await reader.close();
    expect(events.map((e) => e.event.type)).toEqual([
      "graph.checkpointed",
      "graph.checkpointed",
      "graph.writes-recorded",
    ]);
    expect(events[1]?.prevHash).toBe(events[0]?.hash);
    const report = await audit(db);
    expect(report.findings).toEqual([]);
    expect(report.clean).toBe(true);
  });

  it("a registered secret never reaches the database file", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db, secrets: { openai: SECRET } });
    await givenThread(saver, "t-secret");
    await saver.close();
    for (const file of [db, `${db}-wal`]) {
      let bytes: Buffer;
      try {
        bytes = readFileSync(file);
      } catch {
        continue;
      }
      expect(bytes.includes(Buffer.from(SECRET))).toBe(false);
    }
  });

  it("R7: bytes a serializer stores are masked when they are text, and refused when they are binary holding a secret", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db, secrets: { openai: SECRET } });
    const text = new TextEncoder().encode(`key is ${SECRET}`);
    const config = await saver.put(
      { configurable: { thread_id: "t-bytes", checkpoint_ns: "" } },
      { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { file: text }, channel_versions: { file: 1 } },
      { source: "input", step: -1, parents: {} },
      { file: 1 },
    );
    await saver.putWrites(config, [["file", text]], "task-1");
    const binary = Uint8Array.from([0xff, 0xfe, ...Buffer.from(SECRET)]);
    await expect(saver.putWrites(config, [["file", binary]], "task-2")).rejects.toThrow(
      /binary \("bytes"\) that holds the registered secret "openai"/,
    );
    const tuple = await saver.getTuple({ configurable: { thread_id: "t-bytes" } });
    const masked = new TextEncoder().encode("key is «secret:openai»");
    expect(tuple?.checkpoint.channel_values).toEqual({ file: masked });
    expect(tuple?.pendingWrites).toEqual([["task-1", "file", masked]]);
    await saver.close();
    const stored = storedBytes(db);
    for (const form of [SECRET, Buffer.from(text).toString("base64"), Buffer.from(SECRET).toString("base64")])
      expect(stored.includes(Buffer.from(form)), form).toBe(false);
  });

  it("R11: a state key named like a secret is masked in every checkpoint, write and lookup row, and its channel keeps working", async () => {
    const db = join(tempDir(), "journal.db");
    const password = "correct-horse-battery-staple";
    const saver = await HoldfastSaver.open({ store: db });
    const State = Annotation.Root({
      password: Annotation<string>,
      steps: Annotation<number>({ reducer: (a, b) => a + b, default: () => 0 }),
    });
    const graph = new StateGraph(State)
      .addNode("check", (state) => ({ steps: 1, password: state.password }))
      .addNode("answer", () => ({ steps: 1 }))
      .addEdge(START, "check")
      .addEdge("check", "answer")
      .addEdge("answer", END)
      .compile({ checkpointer: saver });
    const config = { configurable: { thread_id: "t-password" } };
    await graph.invoke({ password, steps: 0 }, config);
    await graph.invoke({ steps: 1 }, config);
    expect((await graph.getState(config)).values).toEqual({ password: "«secret:password»", steps: 5 });
    await saver.close();
    expect(storedBytes(db).includes(Buffer.from(password))).toBe(false);
    expect((await audit(db)).findings).toEqual([]);
  });

  it("with a payload key, checkpoints and writes are stored sealed, and read back whole", async () => {
    process.env.HOLDFAST_ENCRYPTION_KEY = freshKey();
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db });
    await givenThread(saver, "t-sealed");
    const tuple = await saver.getTuple({ configurable: { thread_id: "t-sealed" } });
    expect(tuple?.pendingWrites).toHaveLength(1);
    await saver.close();
    const bytes = readFileSync(db).toString("latin1") + readWal(db);
    expect(bytes).not.toContain("again");
    expect(bytes).not.toContain("key is");
    const report = await audit(db);
    expect(report.findings).toEqual([]);
  });

  it("deleteThread removes the thread and leaves its head in retention.pruned; the journal still audits clean", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db });
    await givenThread(saver, "gone");
    await givenThread(saver, "kept");
    await saver.deleteThread("gone");
    expect(await saver.getTuple({ configurable: { thread_id: "gone" } })).toBeUndefined();
    expect(await saver.getTuple({ configurable: { thread_id: "kept" } })).toBeDefined();
    await saver.close();
    const reader = LibsqlJournal.openReadOnly(db);
    expect(await reader.readStream(graphStreamId("gone"))).toEqual([]);
    const system = await reader.readStream(SYSTEM_STREAM);
    await reader.close();
    expect(system.at(-1)?.event).toMatchObject({
      type: "retention.pruned",
      streams: [{ streamId: graphStreamId("gone"), version: 3 }],
    });
    const report = await audit(db);
    expect(report.findings).toEqual([]);
  });

  it("R6: a thread id used again after deleteThread starts a new stream from genesis; reads see only it, and the journal audits clean", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db });
    const listed = async () => {
      const ids: string[] = [];
      for await (const tuple of saver.list({ configurable: { thread_id: "reused" } }))
        ids.push(tuple.checkpoint.id);
      return ids;
    };
    const before: string[] = [];
    for (const _ of [1, 2]) {
      await givenThread(saver, "reused");
      before.push(...(await listed()));
      await saver.deleteThread("reused");
    }
    const latest = await givenThread(saver, "reused");
    const now = await listed();
    expect(now).toHaveLength(2);
    expect(now[0]).toBe(latest);
    expect(now.filter((id) => before.includes(id))).toEqual([]);
    expect((await saver.getTuple({ configurable: { thread_id: "reused" } }))?.checkpoint.id).toBe(latest);
    await saver.close();
    const reader = LibsqlJournal.openReadOnly(db);
    const events = await reader.readStream(graphStreamId("reused"));
    const system = await reader.readStream(SYSTEM_STREAM);
    await reader.close();
    expect(events.map((e) => e.version)).toEqual([1, 2, 3]);
    expect(system.filter((e) => e.event.type === "retention.pruned")).toHaveLength(2);
    const report = await audit(db);
    expect(report.findings).toEqual([]);
    expect(report.clean).toBe(true);
  });

  it("a deleted thread whose events are still there is pruned-stream-present, also when its id is used again", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db });
    await givenThread(saver, "kept-back");
    await saver.close();
    tamper(db, (sql) => {
      const last = rowsOf(sql, graphStreamId("kept-back")).at(-1)!;
      forgeChained(sql, SYSTEM_STREAM, {
        type: "retention.pruned",
        streams: [
          {
            streamId: graphStreamId("kept-back"),
            version: last.version,
            hash: last.hash,
            position: last.position,
          },
        ],
      });
    });
    const reopened = await HoldfastSaver.open({ store: db });
    await givenThread(reopened, "kept-back");
    await reopened.close();
    const findings = (await audit(db)).findings.filter((f) => f.kind === "pruned-stream-present");
    expect(findings.map((f) => f.version)).toEqual([3, 4, 5, 6]);
  });

  it("rebuilt projections equal the inline ones, so retention's rebuild keeps every thread", async () => {
    const db = join(tempDir(), "journal.db");
    const saver = await HoldfastSaver.open({ store: db });
    await givenThread(saver, "t-rebuild");
    await saver.close();
    const journal = LibsqlJournal.open(db);
    const rebuilt = await journal.rebuildProjections();
    expect(rebuilt.filter((p) => p.name.startsWith("graph-"))).toEqual([
      { name: "graph-checkpoints", rows: 2, changed: false },
      { name: "graph-threads", rows: 1, changed: false },
      { name: "graph-channels", rows: 1, changed: false },
    ]);
    const pruned = await journal.prune({ keepRuns: 0, keepDays: 0 });
    expect(pruned.pruned).toEqual([]);
    await journal.close();
    const reopened = await HoldfastSaver.open({ store: db });
    const tuples = [];
    for await (const tuple of reopened.list({ configurable: { thread_id: "t-rebuild" } })) tuples.push(tuple);
    expect(tuples).toHaveLength(2);
    await reopened.close();
  });
});

/** The database file and its WAL, as stored. */
const storedBytes = (db: string): Buffer =>
  Buffer.concat([db, `${db}-wal`].flatMap((file) => (existsSync(file) ? [readFileSync(file)] : [])));

const readWal = (db: string): string => {
  try {
    return readFileSync(`${db}-wal`).toString("latin1");
  } catch {
    return "";
  }
};
