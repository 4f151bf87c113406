import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, openRuntime, RebuildRefused } from "../../src/index.js";
import { forgeChained, tamper } from "../audit/tamper.js";
import { useTempDir } from "../support/tmp.js";
import { cli } from "./files.js";

const tempDir = useTempDir();

const projectionRows = (db: string): unknown[] => {
  const raw = new Database(`file:${db}?mode=ro`);
  try {
    return raw.prepare("SELECT name, key, value, position FROM projections ORDER BY name, key").all();
  } finally {
    raw.close();
  }
};

describe("rebuild folds every run through its machine", () => {
  it("an event the run's machine rejects is refused by rebuild, naming it, and no projection changes", async () => {
    const db = join(tempDir(), "journal.db");
    const echo = defineAgent({ name: "echo", version: "1", run: async (_turn, input: string) => input });
    const runtime = await openRuntime({ store: db, agents: [echo] });
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "echo", content: "hi" });
    expect((await handle.result).status).toBe("completed");
    await runtime.close();
    const streamId = `run-${handle.runId}`;
    // A call intended after the run completed: chained correctly, but no machine state accepts it.
    const { version } = tamper(db, (sql) =>
      forgeChained(sql, streamId, {
        type: "call.intended",
        runId: handle.runId,
        callId: `${handle.runId}/0`,
        seq: 0,
        attempt: 1,
        kind: "tool",
        name: "send_email",
        args: { to: "ada@example.com" },
        fingerprint: "f".repeat(64),
        disposition: "hold",
        pin: null,
        reconciler: null,
        idempotencyKey: `${handle.runId}/0#1`,
      }),
    );
    const before = projectionRows(db);

    const journal = LibsqlJournal.open(db);
    try {
      const error = await journal.rebuildProjections().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RebuildRefused);
      expect(error).toMatchObject({ streamId, version, eventType: "call.intended" });
      expect((error as RebuildRefused).reason).toBe("comes after the run ended (completed)");
    } finally {
      await journal.close();
    }
    expect(projectionRows(db)).toEqual(before);

    const command = await cli(["rebuild", "--db", db]);
    expect(command.code).toBe(1);
    expect(command.stderr).toContain(`rebuild refused: call.intended at ${streamId}@${version}`);
    expect(projectionRows(db)).toEqual(before);
  });
});
