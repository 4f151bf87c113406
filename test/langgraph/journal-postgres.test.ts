import { emptyCheckpoint, uuid6 } from "@langchain/langgraph-checkpoint";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStoreReader } from "../../src/adapters/store.js";
import { graphStreamId, SYSTEM_STREAM } from "../../src/events/index.js";
import { HoldfastSaver } from "../../src/langgraph.js";
import { auditJournal } from "../../src/runtime/audit.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
beforeAll(() => requirePg());
afterAll(() => schemas.dropAll());

describe("the LangGraph saver on PostgreSQL", () => {
  it("deleteThread removes the thread and leaves its head in retention.pruned; the journal audits clean", async () => {
    const url = pgUrl(schemas.fresh());
    const saver = await HoldfastSaver.open({ store: url });
    for (const threadId of ["gone", "kept"]) {
      const config = await saver.put(
        { configurable: { thread_id: threadId, checkpoint_ns: "" } },
        { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: ["hello"] } },
        { source: "input", step: -1, parents: {} },
        { messages: 1 },
      );
      await saver.putWrites(config, [["messages", "again"]], "task-1");
    }
    await saver.deleteThread("gone");
    expect(await saver.getTuple({ configurable: { thread_id: "gone" } })).toBeUndefined();
    expect((await saver.getTuple({ configurable: { thread_id: "kept" } }))?.pendingWrites).toEqual([
      ["task-1", "messages", "again"],
    ]);
    await saver.close();

    const reader = await openStoreReader(url);
    try {
      expect(await reader.readStream(graphStreamId("gone"))).toEqual([]);
      const system = await reader.readStream(SYSTEM_STREAM);
      expect(system.at(-1)?.event).toMatchObject({
        type: "retention.pruned",
        streams: [{ streamId: graphStreamId("gone"), version: 2 }],
      });
      const report = await auditJournal(reader);
      expect(report.findings).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("R6: a thread id used again after deleteThread starts a new stream from genesis; reads see only it, and the journal audits clean", async () => {
    const url = pgUrl(schemas.fresh());
    const saver = await HoldfastSaver.open({ store: url });
    const put = async (value: string) => {
      const config = await saver.put(
        { configurable: { thread_id: "reused", checkpoint_ns: "" } },
        { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: [value] } },
        { source: "input", step: -1, parents: {} },
        { messages: 1 },
      );
      await saver.putWrites(config, [["messages", value]], "task-1");
    };
    await put("first");
    await saver.deleteThread("reused");
    await put("second");
    const tuples = [];
    for await (const tuple of saver.list({ configurable: { thread_id: "reused" } })) tuples.push(tuple);
    expect(tuples.map((t) => t.pendingWrites)).toEqual([[["task-1", "messages", "second"]]]);
    await saver.close();

    const reader = await openStoreReader(url);
    try {
      expect((await reader.readStream(graphStreamId("reused"))).map((e) => e.version)).toEqual([1, 2]);
      const report = await auditJournal(reader);
      expect(report.findings).toEqual([]);
    } finally {
      await reader.close();
    }
  });

  it("projection keys compare in byte order whatever the database's collation, so a thread's rows are one key range", async () => {
    const schema = schemas.fresh();
    const saver = await HoldfastSaver.open({ store: pgUrl(schema) });
    await saver.close();
    const admin = await adminClient();
    try {
      const { rows } = await admin.query(
        "SELECT collation_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'projections' AND column_name = 'key'",
        [schema],
      );
      expect(rows).toEqual([{ collation_name: "C" }]);
    } finally {
      await admin.end();
    }
  });
});
