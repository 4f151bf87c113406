/**
 * Issue 35 (fault-harness record seed 35090): a run ended `failed` with "WrongExpectedVersion:
 * stream run-… is at version 22, expected version 21" — one commit of its own writer that the
 * writer did not count. The path: an outcome whose append answered `JournalUnavailable` (a COMMIT
 * whose reply was lost and could not be read back in time) is recorded again after a re-read of the
 * stream (`recordOutcome` → `RunWriter.refresh`); a sibling's outcome commits through the same
 * writer while that read is on its way; the read, older than the sibling's commit, was folded over
 * it, and the next append of the run (an intent, a checkpoint) met the writer's own commit as a
 * version conflict, which reached the agent and was recorded as `run.failed`.
 *
 * A second way: an old owner fenced out (a partition, a clock step) keeps its late outcome as
 * `conflict.recorded` without a claim, on the stream of the run the new owner is executing. And
 * whatever moves the stream, a conflict on the run's own stream that reaches the end of the
 * execution records nothing: the execution ends `elsewhere` and recovery goes on.
 *
 * The journal underneath is the real store (libSQL, PostgreSQL); the wrapper only loses one append's
 * reply after its commit (as the commit-lost proxy does) and holds one read back until the sibling
 * committed, so the interleaving the harness met by chance happens every time.
 */
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { type AnyEvent, runStreamId } from "../../src/events/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { contextOf, RUN_MACHINE_VERSION } from "../../src/machines/index.js";
import { type Outcome, RunWriter, recordOutcome } from "../../src/runtime/dispatch.js";
import { JournalUnavailable } from "../../src/runtime/errors.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { storedDigest } from "../../src/runtime/json.js";
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
const completed = (seq: number): Outcome => ({
  type: "call.completed",
  runId,
  callId: `${runId}/${seq}`,
  attempt: 1,
  result: seq,
  resultDigest: D,
});

/** A real journal whose next append loses its reply after committing, and whose next run read waits for a gate. */
const lossy = (journal: Journal) => {
  let loseReply = false;
  let gate: { reached: () => void; open: Promise<void> } | null = null;
  const wrapped = new Proxy(journal, {
    get(target, prop) {
      if (prop === "append")
        return async (request: Parameters<Journal["append"]>[0]) => {
          const result = await target.append(request);
          if (loseReply) {
            loseReply = false;
            throw new JournalUnavailable({
              location: target.location,
              reason: "the connection failed during the COMMIT, and its events could not be read back",
              hint: "test",
              written: "unknown",
            });
          }
          return result;
        };
      if (prop === "readStream")
        return async (...args: Parameters<Journal["readStream"]>) => {
          const events = await target.readStream(...args);
          const held = gate;
          if (held && args[0] === `run-${runId}` && args[1] === undefined) {
            gate = null;
            held.reached();
            await held.open;
          }
          return events;
        };
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return {
    journal: wrapped,
    loseNextReply: () => {
      loseReply = true;
    },
    /** Hold the next full read of the run's stream after it read; resolves once it did. */
    holdNextRead: () => {
      let reached!: () => void;
      let open!: () => void;
      const read = new Promise<void>((resolve) => {
        reached = resolve;
      });
      gate = { reached, open: new Promise<void>((resolve) => (open = resolve)) };
      return { read, release: () => open() };
    },
  };
};

describe.each(["libsql", "postgres"] as const)(
  "a writer's re-read beside its own commits on %s",
  (engine) => {
    const open = async () => {
      if (engine === "postgres") await requirePg();
      return openStore(engine === "postgres" ? pgUrl(schemas.fresh()) : join(tempDir(), "j.db"));
    };

    it("a re-read older than a commit of the same writer is not folded over it: the next append goes on", async () => {
      const store = await open();
      try {
        const faults = lossy(store);
        const writer = new RunWriter(faults.journal, runId, undefined, RUN_MACHINE_VERSION);
        await writer.append([
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
          intent(1),
        ]);
        // Call 0's outcome commits, but its reply is lost: recordOutcome re-reads the stream to learn it.
        faults.loseNextReply();
        const held = faults.holdNextRead();
        const first = recordOutcome(writer, completed(0));
        await held.read;
        // While that read is on its way, the sibling's outcome commits through the same writer.
        expect(await recordOutcome(writer, completed(1))).toBe("recorded");
        expect(contextOf(writer.fold).version).toBe(5);
        held.release();
        expect(await first).toBe("duplicate");
        // The writer still counts every commit of its own: the next intent is appended after them.
        expect(contextOf(writer.fold).version).toBe(5);
        await writer.append([intent(2)]);
        const types = (await store.readStream(`run-${runId}`)).map((e) => e.event.type);
        expect(types).toEqual([
          "run.admitted",
          "call.intended",
          "call.intended",
          "call.completed",
          "call.completed",
          "call.intended",
        ]);
      } finally {
        await store.close();
      }
    });

    it("the conflict a fenced-out old owner records on the run is folded in by the new owner, whose next append goes on", async () => {
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
        // The old owner, fenced out after its lease ran out, still holds call 0's failure.
        const old = new RunWriter(journal, runId, owner.fold, RUN_MACHINE_VERSION);
        await owner.append([completed(0), intent(1)]);
        const late: Outcome = {
          type: "call.failed",
          runId,
          callId: `${runId}/0`,
          attempt: 1,
          definite: true,
          error: { name: "Error", message: "late" },
        };
        expect(await recordOutcome(old, late)).toBe("conflict");
        // The new owner goes on: the conflict changes nothing of the run's course.
        await owner.append([completed(1)]);
        const types = (await journal.readStream(`run-${runId}`)).map((e) => e.event.type);
        expect(types).toEqual([
          "run.admitted",
          "call.intended",
          "call.completed",
          "call.intended",
          "conflict.recorded",
          "call.completed",
        ]);
        expect(contextOf(owner.fold).version).toBe(6);
      } finally {
        await journal.close();
      }
    });
  },
);

describe("a version conflict on the run's own stream is never the agent's failure", () => {
  it("a checkpoint that meets an event another writer appended ends the execution elsewhere, with no run.failed; recovery goes on", async () => {
    const db = join(tempDir(), "j.db");
    let executions = 0;
    const agent = defineAgent({
      name: "moved",
      version: "1",
      run: async (turn) => {
        executions += 1;
        await turn.checkpoint({ step: 0 });
        if (executions === 1) {
          // Another writer (an old owner, an operator's tool) appends to the run's stream under it.
          const other = LibsqlJournal.open(db);
          try {
            const streamId = runStreamId(turn.runId);
            const head = (await other.readStream(streamId)).at(-1)!.version;
            await other.append({
              streamId,
              expectedVersion: head,
              events: [
                {
                  type: "checkpoint.saved",
                  runId: turn.runId,
                  chatId: turn.chatId,
                  afterSeq: -1,
                  state: 1,
                  digest: storedDigest(1),
                },
              ],
            });
          } finally {
            await other.close();
          }
        }
        // The agent does not handle the conflict: it reaches the end of the execution as its error.
        await turn.checkpoint({ step: 1 });
        return "done";
      },
    });
    const rt = await openRuntime({ store: db, agents: [agent] });
    try {
      const run = await rt.submit({ chatId: "c", inputId: "i", agent: "moved", content: null });
      const result = await run.result;
      expect(result).toMatchObject({ status: "elsewhere", runId: run.runId });
      expect((result as { state: string }).state).toContain("moved under this execution");
      const types = (await rt.events(run.runId)).map((e) => e.event.type);
      expect(types).not.toContain("run.failed");
      // Nothing was lost: the next recovery re-executes the run from the journal, and it completes.
      const report = await rt.recover();
      await report.done;
      const after = await rt.wait(run.runId);
      expect(after).toMatchObject({ status: "completed", output: "done" });
    } finally {
      await rt.close();
    }
  });
});
