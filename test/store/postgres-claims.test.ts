import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import type { AnyEvent } from "../../src/events/index.js";
import { RUN_MACHINE_VERSION } from "../../src/machines/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const schemas = usePgSchemas();
beforeAll(() => requirePg());
afterAll(() => schemas.dropAll());

const D = "d".repeat(64);
const admitted = (runId: string): AnyEvent => ({
  type: "run.admitted",
  runId,
  chatId: `chat-${runId}`,
  inputId: "i",
  inputDigest: D,
  agent: { name: "a", version: "1" },
  machine: RUN_MACHINE_VERSION,
  input: null,
});
const intended = (runId: string, seq: number): AnyEvent => ({
  type: "call.intended",
  runId,
  callId: `${runId}/${seq}`,
  seq,
  attempt: 1,
  kind: "tool",
  name: "t",
  args: { seq },
  fingerprint: D,
  disposition: "hold",
  pin: null,
  reconciler: null,
  idempotencyKey: `${runId}/${seq}#1`,
});

describe("claims on PostgreSQL, several runs per worker", () => {
  it("renewing and releasing a worker's claims while a batch of its fenced appends commits never deadlocks", async () => {
    const journal = await openStore(pgUrl(schemas.fresh()));
    try {
      const runIds = Array.from({ length: 12 }, (_, i) => `r${String(i).padStart(2, "0")}`);
      const fences = [];
      for (const runId of runIds) {
        await journal.append({
          streamId: `run-${runId}`,
          expectedVersion: "no-stream",
          events: [admitted(runId)],
        });
        const claim = await journal.claim(runId, "w1", 60_000);
        fences.push({ runId, workerId: "w1", epoch: claim!.epoch });
      }
      // The group commit share-locks each run's claim row in request order (here: the reverse of the
      // rows' order); a renewal updates the same rows in its own order, at the same moment.
      for (let round = 0; round < 25; round++) {
        const appends = [...fences].reverse().map((fence) =>
          journal.append({
            streamId: `run-${fence.runId}`,
            expectedVersion: round + 1,
            events: [intended(fence.runId, round)],
            fence,
          }),
        );
        const renewals = [journal.renewClaims("w1", 60_000), journal.renewClaims("w1", 60_000)];
        const settled = await Promise.allSettled([...appends, ...renewals]);
        const failures = settled.flatMap((s) => (s.status === "rejected" ? [String(s.reason)] : []));
        expect(failures, `round ${round}`).toEqual([]);
      }
      await journal.releaseClaims("w1");
      expect(await journal.currentClaim("r00")).toBeNull();
    } finally {
      await journal.close();
    }
  }, 60_000);
});
