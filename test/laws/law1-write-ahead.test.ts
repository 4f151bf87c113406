import { join } from "node:path";
import { Schema } from "effect";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";

const tempDir = useTempDir();

describe("law 1 — write-ahead", () => {
  it("no effect starts before its call.intended is committed: another connection already sees the intent", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const seen: Array<{ callId: string; intents: number }> = [];
    const probe = defineTool({
      name: "probe",
      args: Schema.Struct({ n: Schema.Number }),
      run: async (_args, { callId }) => {
        // A separate connection sees only committed data.
        const other = new Database(db);
        const row = other
          .prepare("SELECT count(*) AS n FROM events WHERE type = 'call.intended' AND data LIKE ?")
          .get(`%"callId":"${callId}"%`) as { n: number };
        other.close();
        seen.push({ callId, intents: Number(row.n) });
        return "ok";
      },
    });
    const agent = defineAgent({
      name: "probing",
      version: "1",
      run: async (turn) => {
        await turn.tool(probe, { n: 1 });
        await turn.tool(probe, { n: 2 });
        return "done";
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent], tools: [probe] });
    const run = await rt.submit({ chatId: "c", inputId: "i", agent: "probing", content: null });
    expect((await run.result).status).toBe("completed");
    await rt.close();
    expect(seen).toHaveLength(2);
    for (const s of seen) expect(s.intents).toBe(1);
  });

  it("the journal runs in WAL mode with synchronous=FULL, so a commit is durable before the effect", async () => {
    const dir = tempDir();
    const journal = LibsqlJournal.open(join(dir, "journal.db"));
    const db = journal.unsafeDatabase();
    const value = (pragma: string) =>
      Object.values((db.prepare(`PRAGMA ${pragma}`).all() as object[])[0]!)[0];
    expect(value("journal_mode")).toBe("wal");
    expect(value("synchronous")).toBe(2); // FULL
    expect(value("foreign_keys")).toBe(1);
    expect(value("secure_delete")).toBe(1);
    // SQLite never waits for a lock inside a call (that would stop the event loop); the journal
    // waits on timers instead (test/store/lock-wait.test.ts, decision 0011).
    expect(Number(value("busy_timeout"))).toBe(0);
    await journal.close();
  });

  it("a SIGKILL before the intent leaves no intent and no effect; a SIGKILL after it leaves the intent and no effect", async () => {
    for (const point of ["before-intent", "after-intent"] as const) {
      const dir = tempDir();
      const witness = join(dir, "witness.txt");
      const db = join(dir, "journal.db");
      const result = await runWorker({
        HF_DB: db,
        HF_WITNESS: witness,
        HF_ACTION: "submit",
        HF_CHAT: "c",
        HF_INPUT: "i",
        HF_PREFIX: "p",
        HOLDFAST_CRASH_AT: point,
        HOLDFAST_CRASH_CALL: "record",
      });
      const context = `${point}: ${result.stderr} ${JSON.stringify(result.lines)}`;
      expect(result.signal, context).toBe("SIGKILL");
      expect(countOf(witness, "p-a"), context).toBe(0);
      const raw = new Database(db);
      const intents = raw.prepare("SELECT count(*) AS n FROM events WHERE type = 'call.intended'").get() as {
        n: number;
      };
      raw.close();
      expect(Number(intents.n), context).toBe(point === "before-intent" ? 0 : 1);
    }
  });
});
