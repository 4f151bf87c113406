import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openRuntime } from "../../src/index.js";
import { startOwner } from "../support/control-owner.js";
import { pausable, step } from "../support/control-worker.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const until = async (what: string, check: () => Promise<boolean>): Promise<void> => {
  const deadline = Date.now() + 30_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe.each(["libsql", "postgres"] as const)("a SIGKILL of the owner of a paused run on %s", (engine) => {
  const store = async () => {
    if (engine === "postgres") await requirePg();
    return engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db");
  };

  it("the run stays paused through recovery and a restart; resumed, it goes on with its next call, every effect once", async () => {
    const at = await store();
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const release = join(dir, "release");
    const env = { HF_DB: at, HF_WITNESS: witness, HF_RELEASE: release, HF_KIND: "pause" };
    const owner = startOwner(env);
    // The step tool in this process (run after the resume) reads the same two files.
    Object.assign(process.env, { HF_WITNESS: witness, HF_RELEASE: release });
    let killed = false;
    const options = {
      store: at,
      agents: [pausable],
      tools: [step],
      recovery: { onOpen: false, leaseMs: 3_000 },
    } as const;
    let runtime = await openRuntime({ ...options, workerId: "operator" });
    try {
      const { runId } = (await owner.waitFor("started")) as { runId: string };
      // Asked during the first step: it finishes (a pause aborts nothing), then the run parks.
      expect(await runtime.pause(runId, { by: "ops", note: "checking the budget" })).toMatchObject({
        accepted: true,
      });
      writeFileSync(release, "");
      await until("the run is paused", async () => (await runtime.run(runId))?.status === "paused");
      owner.child.kill("SIGKILL");
      killed = true;
      expect(await owner.exited).toBe("SIGKILL");

      // Recovery by a process with the agent never resumes a paused run.
      const report = await runtime.recover();
      expect(report.resumed).toEqual([]);
      expect(report.interrupted).not.toContain(runId);
      await report.done;
      expect((await runtime.run(runId))?.status).toBe("paused");
      // Nor does a restart that recovers on open.
      await runtime.close();
      runtime = await openRuntime({ ...options, workerId: "restarted", recovery: { leaseMs: 3_000 } });
      await (runtime.recovery as { done?: Promise<unknown> }).done;
      expect((await runtime.run(runId))?.status).toBe("paused");
      const types = (await runtime.events(runId)).map((e) => e.event.type);
      expect(types.filter((t) => t === "call.intended")).toHaveLength(1);

      // Resumed: the second step runs, once; the first is served from the journal.
      expect(await runtime.resume(runId, { by: "ops" })).toMatchObject({ accepted: true });
      const ended = await runtime.wait(runId);
      expect(
        ended.status,
        JSON.stringify({
          ended,
          events: (await runtime.events(runId)).map((e) => [
            e.event.type,
            (e.event as { reason?: unknown }).reason ?? "",
          ]),
        }),
      ).toBe("completed");
      const effects = readFileSync(witness, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as { step: number; attempt: number });
      expect(effects).toEqual([
        { step: 1, attempt: 1 },
        { step: 2, attempt: 1 },
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      if (!killed) owner.child.kill("SIGKILL");
      await runtime.close();
      delete process.env.HF_WITNESS;
      delete process.env.HF_RELEASE;
    }
  }, 120_000);
});
