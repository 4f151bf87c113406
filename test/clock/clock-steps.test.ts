import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { Ownership, type OwnershipClock } from "../../src/runtime/ownership.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const HOUR = 3_600_000;
const LEASE_MS = 60_000;

/**
 * The process's clocks as the tests move them: the wall clock (`Date.now`, which the journal's
 * lease times are read from too) stepped by `step`; time passing (both clocks) by `elapse` — never
 * by waiting.
 */
const steppableClock = () => {
  let wallStep = 0;
  let elapsed = 0;
  const realNow = Date.now.bind(Date);
  vi.spyOn(Date, "now").mockImplementation(() => realNow() + wallStep);
  const clock: OwnershipClock = {
    wall: () => Date.now(),
    monotonic: () => performance.now() + elapsed,
  };
  return {
    clock,
    step: (ms: number) => {
      wallStep += ms;
    },
    elapse: (ms: number) => {
      elapsed += ms;
      wallStep += ms;
    },
  };
};

const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const c of closing.splice(0).reverse()) await c.close();
});

const setUp = () => {
  const db = join(tempDir(), "journal.db");
  const time = steppableClock();
  const journal = LibsqlJournal.open(db);
  const owner = (workerId: string) =>
    new Ownership({ journal, workerId, leaseMs: LEASE_MS, isWorkerDead: () => false, clock: time.clock });
  const a = owner("worker-a");
  const b = owner("worker-b");
  closing.push(journal, a, b);
  return { ...time, journal, a, b };
};

describe("a wall clock that steps", () => {
  it("stepped forward by an hour, a live owner still may start effects, and another worker does not take its run over", async () => {
    const { a, b, step, journal } = setUp();
    expect(await a.claim("run-1")).toMatchObject({ workerId: "worker-a", epoch: 1 });
    step(HOUR);
    expect(a.mayStartEffect("run-1")).toBe(true);
    // By the stepped clock the lease ended an hour ago; the owner has not renewed on the new clock yet.
    expect(await b.claim("run-1")).toBeNull();
    expect(await journal.currentClaim("run-1")).toMatchObject({ workerId: "worker-a", epoch: 1 });
  });

  it("stepped back by an hour, an owner whose lease ran out (no renewal got through) may not start effects", async () => {
    const { a, step, elapse } = setUp();
    await a.claim("run-1");
    expect(a.mayStartEffect("run-1")).toBe(true);
    // The lease runs out on the monotonic clock while the wall clock goes back an hour.
    elapse(LEASE_MS);
    step(-HOUR);
    expect(a.mayStartEffect("run-1")).toBe(false);
  });

  it("a lease after the step, a lease that ran out by the wall clock is taken over again (a dead owner's runs are not kept for ever)", async () => {
    const { a, b, step, elapse } = setUp();
    await a.claim("run-1");
    step(HOUR);
    expect(await b.claim("run-1")).toBeNull();
    elapse(LEASE_MS);
    expect(await b.claim("run-1")).toMatchObject({ workerId: "worker-b", epoch: 2 });
  });
});
