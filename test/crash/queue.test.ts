import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStoreReader } from "../../src/adapters/store.js";
import { queueStreamId } from "../../src/events/index.js";
import { openRuntime } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { lineOf, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());
const WORKER = join(import.meta.dirname, "..", "support", "queue-worker.ts");

describe.each(["libsql", "postgres"] as const)("a chat's queue across crashes (%s)", (engine) => {
  it("a queue of 5 inputs survives 3 SIGKILLs and runs 5 runs in order, each once", async () => {
    const dir = tempDir();
    let store = join(dir, "journal.db");
    if (engine === "postgres") {
      await requirePg();
      store = pgUrl(schemas.fresh());
    }
    const witness = join(dir, "witness.txt");
    const base = { HF_DB: store, HF_WITNESS: witness };

    // 1. Five inputs queued; killed once the first run's call has its outcome (the run executing).
    const first = await runScript(WORKER, {
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-outcome",
    });
    expect(first.signal, first.stderr).toBe("SIGKILL");
    expect(first.lines.filter((l) => l.kind === "submitted").map((l) => l.queued)).toEqual([
      false,
      true,
      true,
      true,
      true,
    ]);
    // 2. Recovery ends the first run; killed before the next input is admitted.
    const second = await runScript(WORKER, {
      ...base,
      HF_ACTION: "recover",
      HOLDFAST_CRASH_AT: "before-queue-admit",
    });
    expect(second.signal, second.stderr).toBe("SIGKILL");
    // 3. Recovery finds the idle queue by its index and admits m2; killed before m2 starts.
    const third = await runScript(WORKER, {
      ...base,
      HF_ACTION: "recover",
      HOLDFAST_CRASH_AT: "after-queue-admit",
    });
    expect(third.signal, third.stderr).toBe("SIGKILL");
    // 4. Recovery takes m2 over; the rest of the queue runs.
    const fourth = await runScript(WORKER, { ...base, HF_ACTION: "recover" });
    expect(fourth.code, fourth.stderr).toBe(0);
    expect(lineOf(fourth, "drained")).toBeDefined();

    expect(witnessLines(witness)).toEqual(["m1", "m2", "m3", "m4", "m5"]);
    const reader = await openStoreReader(store);
    try {
      const queue = (await reader.readStream(queueStreamId("c"))).map((e) => e.event);
      expect(queue.filter((e) => e.type === "input.queued").map((e) => e.inputId)).toEqual([
        "m2",
        "m3",
        "m4",
        "m5",
      ]);
      expect(queue.filter((e) => e.type === "input.admitted").map((e) => e.inputId)).toEqual([
        "m2",
        "m3",
        "m4",
        "m5",
      ]);
      const admissions = await Promise.all(
        ["m1", "m2", "m3", "m4", "m5"].map((i) => reader.admission("c", i)),
      );
      const statuses = await Promise.all(
        admissions.map(async (a) => (await reader.projection<{ status: string }>("runs", a!.runId))?.status),
      );
      expect(statuses).toEqual(["completed", "completed", "completed", "completed", "completed"]);
      // Admitted in queue order: each run's `run.admitted` after the one before.
      const admittedAt = await Promise.all(
        admissions.map(async (a) => (await reader.readStream(`run-${a!.runId}`))[0]!.position),
      );
      expect(admittedAt).toEqual([...admittedAt].sort((x, y) => x - y));
      expect(new Set(admissions.map((a) => a!.runId)).size).toBe(5);
    } finally {
      await reader.close();
    }
    const runtime = await openRuntime({ store, agents: [], tools: [], recovery: { onOpen: false } });
    try {
      expect(await runtime.runs()).toHaveLength(5);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
