import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import type { AnyEvent } from "../../src/events/index.js";
import { contextOf, RUN_MACHINE_VERSION, type RunFold } from "../../src/machines/index.js";
import { RunWriter } from "../../src/runtime/dispatch.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const D = "d".repeat(64);
const runId = "r1";
const intent = (seq: number): AnyEvent => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt: 1,
  kind: "tool",
  name: "t",
  args: {},
  fingerprint: D,
  disposition: "hold",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/${seq}#1`,
});

describe.each(["libsql", "postgres"] as const)(
  "the owner's writer learns control requests on %s",
  (engine) => {
    const open = async () => {
      if (engine === "postgres") await requirePg();
      return openStore(engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db"));
    };

    it("5: streamHeads reads the heads of several streams in one read, leaving out those with no events", async () => {
      const journal = await open();
      try {
        for (const [streamId, count] of [
          ["run-a", 1],
          ["run-b", 3],
        ] as const) {
          const writer = new RunWriter(journal, streamId.slice(4), undefined, RUN_MACHINE_VERSION);
          await writer.append([
            {
              type: "run.admitted",
              runId: streamId.slice(4),
              chatId: streamId,
              inputId: "i",
              inputDigest: D,
              agent: { name: "a", version: "1" },
              machine: RUN_MACHINE_VERSION,
              input: null,
            },
          ]);
          for (let n = 1; n < count; n++)
            await writer.append([
              {
                ...intent(n - 1),
                runId: streamId.slice(4),
                callId: `${streamId.slice(4)}/${n - 1}`,
                idempotencyKey: `${streamId.slice(4)}/${n - 1}#1`,
              } as AnyEvent,
            ]);
        }
        const heads = await journal.streamHeads(["run-a", "run-b", "run-none"]);
        const byId = new Map(heads.map((h) => [h.streamId, h]));
        expect(heads).toHaveLength(2);
        for (const id of ["run-a", "run-b"]) expect(byId.get(id)).toEqual(await journal.streamHead(id));
        expect(byId.get("run-b")?.version).toBe(3);
        expect(await journal.streamHeads([])).toEqual([]);
      } finally {
        await journal.close();
      }
    });

    it("an append that meets a cancel request appended by another process folds it in, tells onControl, and appends after it", async () => {
      const journal = await open();
      try {
        const owner = new RunWriter(journal, runId, undefined, RUN_MACHINE_VERSION);
        await owner.append([
          {
            type: "run.admitted",
            runId,
            chatId: "c",
            inputId: "i",
            inputDigest: D,
            agent: { name: "a", version: "1" },
            machine: RUN_MACHINE_VERSION,
            input: null,
          },
          intent(0),
        ]);
        // Another process: no fence, the version it read.
        const other = new RunWriter(journal, runId, owner.fold, RUN_MACHINE_VERSION);
        await other.append([{ type: "run.cancel-requested", runId, by: "ops", note: "runaway" }]);
        const told: RunFold[] = [];
        owner.onControl = (fold) => told.push(fold);
        await owner.append([
          { type: "call.completed", runId, callId: `${runId}/0`, attempt: 1, result: null, resultDigest: D },
        ]);
        expect(told).toHaveLength(1);
        expect(contextOf(owner.fold).cancelRequested).toEqual({ by: "ops", note: "runaway" });
        expect(contextOf(owner.fold).version).toBe(4);
        const types = (await journal.readStream(`run-${runId}`)).map((e) => e.event.type);
        expect(types).toEqual(["run.admitted", "call.intended", "run.cancel-requested", "call.completed"]);
        // Once the request is known, the run cannot complete: it ends cancelled.
        await expect(
          owner.append([{ type: "run.completed", runId, output: null, outputDigest: D }]),
        ).rejects.toMatchObject({ _tag: "TransitionRejected" });
      } finally {
        await journal.close();
      }
    });

    it("a move that is not a control request is still a WrongExpectedVersion", async () => {
      const journal = await open();
      try {
        const owner = new RunWriter(journal, runId, undefined, RUN_MACHINE_VERSION);
        await owner.append([
          {
            type: "run.admitted",
            runId,
            chatId: "c",
            inputId: "i",
            inputDigest: D,
            agent: { name: "a", version: "1" },
            machine: RUN_MACHINE_VERSION,
            input: null,
          },
        ]);
        const other = new RunWriter(journal, runId, owner.fold, RUN_MACHINE_VERSION);
        await other.append([intent(0)]);
        await expect(owner.append([intent(0)])).rejects.toMatchObject({ _tag: "WrongExpectedVersion" });
      } finally {
        await journal.close();
      }
    });
  },
);
