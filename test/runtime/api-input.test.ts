import { join } from "node:path";
import { Schema } from "effect";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { canonicalJson, chainHashOfText, GENESIS_HASH, type StoredRow } from "../../src/events/index.js";
import { defineAgent, defineTool, InputConflict, InvalidInput, openRuntime } from "../../src/index.js";
import { foldRun } from "../../src/machines/index.js";
import { LogAuditor } from "../../src/runtime/audit.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const rejection = async (promise: Promise<unknown>): Promise<unknown> =>
  promise.then(
    () => {
      throw new Error("expected a rejection");
    },
    (error: unknown) => error,
  );

describe("public API inputs are checked at the boundary", () => {
  it("F20: a lease below the minimum (0, NaN, negative, 2 s) is refused before anything is opened", async () => {
    const dir = tempDir();
    for (const leaseMs of [0, Number.NaN, -5, 2_000]) {
      const error = await rejection(openRuntime({ store: join(dir, "j.db"), recovery: { leaseMs } }));
      expect(error, String(leaseMs)).toBeInstanceOf(InvalidInput);
      expect((error as Error).message).toContain("recovery.leaseMs");
    }
    // Nothing was created by a refused open.
    const { existsSync } = await import("node:fs");
    expect(existsSync(join(dir, "j.db"))).toBe(false);
  });

  it("F20 (found by the fuzzer): a retention policy with keepDays -1, keepRuns 1.5 or a string is InvalidInput naming the field, not a RangeError", async () => {
    const dir = tempDir();
    for (const retention of [{ keepRuns: 0, keepDays: -1 }, { keepRuns: 1.5 }, "weekly"]) {
      const error = await rejection(openRuntime({ store: join(dir, "j.db"), retention: retention as never }));
      expect(error, JSON.stringify(retention)).toBeInstanceOf(InvalidInput);
      expect((error as Error).message).toContain("retention");
    }
    const { existsSync } = await import("node:fs");
    expect(existsSync(join(dir, "j.db"))).toBe(false);
  });

  it("F20: a secret that is not a string is refused (a numeric PIN would never be masked)", async () => {
    const error = await rejection(
      openRuntime({ store: join(tempDir(), "j.db"), secrets: { PIN: 1234 as unknown as string } }),
    );
    expect(error).toBeInstanceOf(InvalidInput);
    expect((error as Error).message).toContain("secrets.PIN");
  });

  it("law 8 (found by the fuzzer): a chatId or inputId carrying a registered secret is refused, shown masked, and nothing is written", async () => {
    const dir = tempDir();
    const agent = defineAgent({ name: "a", version: "1", run: async () => "ok" });
    const rt = await openRuntime({
      store: join(dir, "j.db"),
      agents: [agent],
      secrets: { PIN: "pin-4711-x" },
    });
    try {
      const before = (await rt.audit()).headDigest;
      for (const ids of [
        { chatId: "chat-pin-4711-x", inputId: "i" },
        { chatId: "c", inputId: "pin-4711-x" },
        { chatId: "c", inputId: encodeURIComponent("a b pin-4711-x") },
      ]) {
        const error = await rejection(rt.submit({ ...ids, agent: "a", content: null }));
        expect(error, JSON.stringify(ids)).toBeInstanceOf(InvalidInput);
        expect((error as Error).message).toContain("«secret:PIN»");
        expect((error as Error).message).not.toContain("pin-4711-x");
      }
      const replaced = await rejection(
        rt.documents.replace("pin-4711-x", {
          expectedRevision: 0,
          value: { title: "t", items: [] },
          by: "ada",
        }),
      );
      expect(replaced).toBeInstanceOf(InvalidInput);
      expect((await rt.audit()).headDigest).toBe(before);
      expect(await rt.runs()).toEqual([]);
    } finally {
      await rt.close();
    }
    const { readdirSync, readFileSync } = await import("node:fs");
    for (const file of readdirSync(dir))
      expect(readFileSync(join(dir, file)).includes("pin-4711-x"), file).toBe(false);
  });

  it("F20: submit(null), ids with surrounding spaces and a missing agent are InvalidInput naming the field", async () => {
    const agent = defineAgent({ name: "a", version: "1", run: async () => "ok" });
    const rt = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent] });
    expect(await rejection(rt.submit(null as never))).toBeInstanceOf(InvalidInput);
    const spaced = await rejection(rt.submit({ chatId: " c ", inputId: "i", agent: "a", content: null }));
    expect(spaced).toBeInstanceOf(InvalidInput);
    expect((spaced as Error).message).toContain("chatId");
    const noAgent = await rejection(rt.submit({ chatId: "c", inputId: "i", content: null } as never));
    expect((noAgent as Error).message).toContain("agent");
    expect(await rt.runs()).toEqual([]);
    await rt.close();
  });

  it("F20: a decision with a note that is not a string, and documents.replace with revision -1, are InvalidInput", async () => {
    const rt = await openRuntime({ store: join(tempDir(), "j.db") });
    const replaced = await rejection(
      rt.documents.replace("c", { expectedRevision: -1, value: { title: "t", items: [] }, by: "ada" }),
    );
    expect(replaced).toBeInstanceOf(InvalidInput);
    const decided = await rejection(
      rt.decide("r", { basedOnVersion: 1, decidedBy: "ada", decision: "stop", note: 5 as unknown as string }),
    );
    // Refused before the run is even looked up.
    expect(decided).toBeInstanceOf(InvalidInput);
    expect((decided as Error).message).toContain("note");
    await rt.close();
  });

  it("F20: subscribe refuses a buffer size that is not a whole number", async () => {
    const rt = await openRuntime({ store: join(tempDir(), "j.db") });
    expect(() => rt.subscribe({ bufferSize: Number.NaN })).toThrow(InvalidInput);
    await rt.close();
  });

  it("F23: the same ids and content submitted for another agent are an InputConflict naming the agent, not the other agent's run", async () => {
    const a = defineAgent({ name: "a", version: "1", run: async () => "from a" });
    const b = defineAgent({ name: "b", version: "1", run: async () => "from b" });
    const rt = await openRuntime({ store: join(tempDir(), "j.db"), agents: [a, b] });
    const first = await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: "x" });
    await first.result;
    const second = await rejection(rt.submit({ chatId: "c", inputId: "i", agent: "b", content: "x" }));
    expect(second).toBeInstanceOf(InputConflict);
    expect((second as Error).message).toContain("for agent a@1");
    // The same agent still reuses it.
    expect((await rt.submit({ chatId: "c", inputId: "i", agent: "a", content: "x" })).reused).toBe(true);
    await rt.close();
  });

  it("F21: a run.admitted naming machine 'constructor' is an unknown machine for the audit and the fold, never a crash", () => {
    const payload = {
      type: "run.admitted",
      runId: "r1",
      chatId: "c",
      inputId: "i",
      inputDigest: "0".repeat(64),
      agent: { name: "a", version: "1" },
      machine: "constructor",
      input: null,
    };
    const base = {
      streamId: "run-r1",
      version: 1,
      eventId: "e1",
      recordedAt: "2025-01-01T00:00:00.000Z",
      prevHash: GENESIS_HASH,
      schemaVersion: 1,
    };
    const data = canonicalJson(payload);
    const row: StoredRow = { ...base, position: 1, data, hash: chainHashOfText(base, data) };
    const auditor = new LogAuditor();
    auditor.feed(row);
    const report = auditor.finish(false);
    expect(report.findings.map((f) => f.kind)).toContain("unknown-machine");
    expect(() => foldRun([payload as never])).toThrow(RangeError);
  });

  it("a tool's result Schema typechecks under strict mode and is kept on the definition", () => {
    const pay = defineTool({
      name: "pay",
      args: Schema.Struct({ amount: Schema.Number }),
      result: Schema.Struct({ receipt: Schema.String }),
      run: async () => ({ receipt: "r-1" }),
    });
    expect(pay.result).not.toBeNull();
  });

  it("the journal stays readable after every refusal above (nothing half written)", async () => {
    const db = join(tempDir(), "j.db");
    const rt = await openRuntime({ store: db });
    await rejection(rt.submit({ chatId: "", inputId: "i", agent: "a", content: null }));
    await rt.close();
    const journal = LibsqlJournal.open(db);
    expect(await journal.readAll({ after: 0, limit: 10 })).toEqual([]);
    await journal.close();
  });
});
