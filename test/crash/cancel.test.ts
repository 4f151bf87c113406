import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openRuntime, type QueuedHandle } from "../../src/index.js";
import { startOwner } from "../support/control-owner.js";
import { stubborn, stuck } from "../support/control-worker.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

describe.each(["libsql", "postgres"] as const)(
  "a SIGKILL of the owner after a cancel request on %s",
  (engine) => {
    const store = async () => {
      if (engine === "postgres") await requirePg();
      return engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db");
    };

    it.each([
      ["tool", "held", "a call in doubt holds the run cancelled-in-doubt"],
      ["model", "cancelled", "a replayable model call is authorized and the run ends cancelled"],
    ] as const)("%s call: recovery never re-executes it; %s (%s)", async (kind, status, _why) => {
      const at = await store();
      const witness = join(tempDir(), "witness.jsonl");
      const owner = startOwner({ HF_DB: at, HF_WITNESS: witness, HF_KIND: kind });
      let killed = false;
      const runtime = await openRuntime({
        store: at,
        agents: [stubborn],
        tools: [stuck],
        workerId: "operator",
        recovery: { onOpen: false, leaseMs: 3_000 },
      });
      try {
        const { runId } = (await owner.waitFor("started")) as { runId: string };
        // The owner is alive: the request is recorded and left to it.
        expect(await runtime.cancel(runId, { by: "ops", note: "runaway" })).toMatchObject({
          accepted: true,
          status: "cancel-requested",
        });
        // It learnt the request (the call's signal is aborted); the call ignores it. Killed in the grace.
        await owner.waitFor("aborted");
        owner.child.kill("SIGKILL");
        killed = true;
        expect(await owner.exited).toBe("SIGKILL");

        const report = await runtime.recover();
        expect(report.resumed).toEqual([]);
        await report.done;
        const result = await runtime.wait(runId);
        expect(result.status).toBe(status);
        if (result.status === "held")
          expect(result.reasons).toEqual([
            expect.objectContaining({ code: "cancelled-in-doubt", callId: `${runId}/0` }),
          ]);
        const events = (await runtime.events(runId)).map((e) => e.event.type);
        expect(events.filter((t) => t === "call.intended")).toHaveLength(1);
        expect(events).toContain("run.interrupted");
        // The effect started once, in the killed owner: never again.
        expect(readFileSync(witness, "utf8").trim().split("\n")).toHaveLength(1);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        if (!killed) owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });

    it("1/2: a repeated cancel of a run whose owner died after the request carries the cancel out and admits the chat's next queued input", async () => {
      const at = await store();
      const witness = join(tempDir(), "witness.jsonl");
      const owner = startOwner({ HF_DB: at, HF_WITNESS: witness, HF_KIND: "model" });
      let killed = false;
      const runtime = await openRuntime({
        store: at,
        agents: [stubborn],
        tools: [stuck],
        workerId: "operator",
        recovery: { onOpen: false, leaseMs: 3_000 },
      });
      try {
        const { runId } = (await owner.waitFor("started")) as { runId: string };
        expect((await runtime.cancel(runId, { by: "ops" })).status).toBe("cancel-requested");
        await owner.waitFor("aborted");
        owner.child.kill("SIGKILL");
        killed = true;
        expect(await owner.exited).toBe("SIGKILL");
        const queued = await runtime.submit({
          chatId: "c",
          inputId: "next",
          agent: "stubborn",
          content: { kind: "model" },
          whenBusy: "queue",
        });
        expect("queued" in queued && queued.queued).toBe(true);
        // Asked already, owner gone: the second cancel takes the run and carries the cancel out.
        const again = await runtime.cancel(runId, { by: "ops" });
        expect(again).toMatchObject({ accepted: true, status: "cancelled" });
        expect((await runtime.wait(runId)).status).toBe("cancelled");
        // Its end admitted the chat's next input.
        expect((await runtime.queue("c")).items).toEqual([]);
        const next = await (queued as QueuedHandle).admitted;
        expect(next).not.toBeNull();
        // The next input's run blocks as the first did; cancelled so the runtime closes: it ends
        // cancelled, held for its call, or stopped (held before the cancel came: the stop decision).
        await runtime.cancel(next!, { by: "test" });
        expect(["cancelled", "held", "stopped"]).toContain((await runtime.wait(next!)).status);
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        if (!killed) owner.child.kill("SIGKILL");
        await runtime.close();
      }
    });
  },
);
