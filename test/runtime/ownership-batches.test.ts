import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { Ownership } from "../../src/runtime/ownership.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  for (const c of opened.splice(0).reverse()) await c.close();
});

/** The real journal, with the claim and release calls that reach it counted. */
const countedJournal = () => {
  const journal = LibsqlJournal.open(join(tempDir(), "journal.db"));
  const calls = { claim: 0, claimMany: 0, releaseClaims: 0 };
  const counted = new Proxy(journal, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        if (property in calls) calls[property as keyof typeof calls]++;
        return value.apply(target, args);
      };
    },
  }) as unknown as Journal;
  const ownership = new Ownership({
    journal: counted,
    workerId: "worker-a",
    leaseMs: 30_000,
    isWorkerDead: () => false,
  });
  opened.push(journal, ownership);
  return { journal, ownership, calls };
};

const runIds = (n: number) => Array.from({ length: n }, (_, i) => `run-${String(i).padStart(2, "0")}`);

describe("claims and releases asked for together share a transaction", () => {
  it("claims asked for in one turn of the event loop are one claimMany, each caller gets its own claim", async () => {
    const { journal, ownership, calls } = countedJournal();
    const claims = await Promise.all(runIds(20).map((runId) => ownership.claim(runId)));
    expect(calls).toEqual({ claim: 0, claimMany: 1, releaseClaims: 0 });
    claims.forEach((claim, i) => {
      expect(claim).toMatchObject({ runId: runIds(20)[i], workerId: "worker-a", epoch: 1 });
    });
    for (const runId of runIds(20)) {
      expect(await journal.currentClaim(runId)).toMatchObject({ workerId: "worker-a", epoch: 1 });
      expect(ownership.fence(runId)).toEqual({ runId, workerId: "worker-a", epoch: 1 });
    }
  });

  it("releases asked for in one turn are one commit, and every promise resolves after it", async () => {
    const { journal, ownership, calls } = countedJournal();
    await Promise.all(runIds(20).map((runId) => ownership.claim(runId)));
    await Promise.all(runIds(20).map((runId) => ownership.release(runId)));
    expect(calls.releaseClaims).toBe(1);
    for (const runId of runIds(20)) {
      expect(await journal.currentClaim(runId)).toBeNull();
      expect(ownership.owns(runId)).toBe(false);
    }
  });

  it("a claim asked for after a release of the same run, while that release is not yet committed, is not undone by it", async () => {
    const { journal, ownership } = countedJournal();
    await ownership.claim("run-x");
    // One turn: a claim batch starts (run-y), run-x is let go, then claimed again in the same batch.
    // Sent as asked, the claim batch would renew run-x's row and the release after it would clear it,
    // leaving this worker writing a run whose claim row says nobody owns it.
    const [, , again] = await Promise.all([
      ownership.claim("run-y"),
      ownership.release("run-x"),
      ownership.claim("run-x"),
    ]);
    // Released, then claimed again (a run never admitted loses its claim row on release, so the
    // claim starts again at epoch 1): the row names this worker, and this worker's fence matches it.
    const row = await journal.currentClaim("run-x");
    expect(row).toMatchObject({ runId: "run-x", workerId: "worker-a" });
    expect(again).toMatchObject({ runId: "run-x", workerId: "worker-a", epoch: row?.epoch });
    expect(ownership.fence("run-x")).toEqual({ runId: "run-x", workerId: "worker-a", epoch: row?.epoch });
  });

  it("forget() drops a run let go by its settling append, without a release commit, and never a newer claim of it", async () => {
    const { journal, ownership, calls } = countedJournal();
    const first = await ownership.claim("run-a");
    await journal.append({
      streamId: "run-run-a",
      expectedVersion: "no-stream",
      events: [
        {
          type: "run.admitted",
          runId: "run-a",
          chatId: "c",
          inputId: "i",
          inputDigest: "0".repeat(64),
          agent: { name: "a", version: "1" },
          machine: "run@2",
          input: null,
        },
      ],
      fence: ownership.fence("run-a")!,
      releaseClaim: true,
    });
    expect(await journal.currentClaim("run-a")).toBeNull();
    ownership.forget("run-a", first!.epoch);
    expect(ownership.owns("run-a")).toBe(false);
    expect(calls.releaseClaims).toBe(0);
    // Claimed again: a forget of the earlier epoch (late) keeps the new claim.
    const second = await ownership.claim("run-a");
    expect(second!.epoch).toBe(first!.epoch + 1);
    ownership.forget("run-a", first!.epoch);
    expect(ownership.fence("run-a")).toEqual({ runId: "run-a", workerId: "worker-a", epoch: second!.epoch });
  });

  it("close() waits for the releases still on their way, then lets the rest go", async () => {
    const { journal, ownership } = countedJournal();
    await Promise.all(runIds(4).map((runId) => ownership.claim(runId)));
    void ownership.release("run-00");
    void ownership.release("run-01");
    await ownership.close();
    for (const runId of runIds(4)) expect(await journal.currentClaim(runId)).toBeNull();
  });
});
