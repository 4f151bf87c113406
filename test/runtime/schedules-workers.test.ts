import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openRuntime, type RunRow } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";

const WORKER = join(import.meta.dirname, "..", "support", "schedule-worker.ts");

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const engines: ReadonlyArray<readonly [string, () => Promise<string>]> = [
  ["libSQL (two processes on one file)", async () => join(tempDir(), "journal.db")],
  [
    "PostgreSQL (two worker processes)",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

describe.each(engines)("a schedule every 2 s run by two workers for 20 s: %s", (_name, storeOf) => {
  it("makes exactly one run per tick, with none lost and none doubled across a SIGKILL and restart", async () => {
    const store = await storeOf();
    const witness = join(tempDir(), "witness.txt");
    const admin = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
    await admin.schedules.upsert({ id: "every2", everyMs: 2_000, agent: "ticker", input: { hello: 1 } });
    await admin.close();
    const env = { HF_DB: store, HF_WITNESS: witness };
    const started = Date.now();
    let workers = [startScript(WORKER, env), startScript(WORKER, env)];
    try {
      await Promise.all(workers.map((w) => w.waitFor("open")));
      await sleep(8_000);
      // Between two ticks (runs take milliseconds), so the kill leaves no run in doubt.
      await sleep((3_000 - (Date.now() % 2_000)) % 2_000);
      // Mid-way one worker dies by SIGKILL and comes back: no tick is made twice, none is lost.
      await workers[0]!.kill();
      workers = [startScript(WORKER, env), workers[1]!];
      await workers[0]!.waitFor("open");
      await sleep(Math.max(0, 20_000 - (Date.now() - started)));
    } finally {
      await Promise.all(workers.map((w) => w.kill()));
    }
    const reader = await openRuntime({ store, tracing: false, recovery: { onOpen: false } });
    try {
      const runs = (await reader.runs()).filter((r: RunRow) => r.chatId === "schedule-every2");
      const schedule = (await reader.schedules.get("every2"))!;
      const inputIds = runs.map((r) => r.inputId);
      // One run per tick: no input id twice.
      expect(new Set(inputIds).size).toBe(inputIds.length);
      // None lost: every 2-second boundary between the first and the last tick has its run.
      const times = inputIds.map((id) => Date.parse(id.slice("every2@".length))).sort((a, b) => a - b);
      expect(times.length).toBeGreaterThanOrEqual(8);
      for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBe(2_000);
      // Each run's effect happened once (its run id once in the witness), for runs that completed.
      const lines = witnessLines(witness);
      expect(new Set(lines).size).toBe(lines.length);
      for (const line of lines) expect(runs.map((r) => r.runId)).toContain(line);
      expect(schedule.ticks.admitted).toBe(runs.length);
      expect(schedule.ticks.skipped).toBe(0);
      expect((await reader.audit()).findings).toEqual([]);
    } finally {
      await reader.close();
    }
  }, 60_000);
});
