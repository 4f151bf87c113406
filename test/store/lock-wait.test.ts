import { type ChildProcess, spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import type { AnyEvent } from "../../src/events/index.js";
import { JournalUnavailable } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const LIBSQL = createRequire(import.meta.url).resolve("libsql");
const event: AnyEvent = { type: "journal.opened", schemaVersion: 1, engine: "libsql" };

const children: ChildProcess[] = [];
const journals: LibsqlJournal[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const journal of journals.splice(0)) await journal.close();
});

const open = (path: string, options: { readonly lockWaitMs?: number } = {}): LibsqlJournal => {
  const journal = LibsqlJournal.open(path, options);
  journals.push(journal);
  return journal;
};

/**
 * Another process holds the journal's write lock (`BEGIN IMMEDIATE`) until told to let go, or until
 * `safetyMs` passed: a process whose event loop is frozen cannot tell it, and must not wait forever.
 */
const holdWriteLock = async (path: string, safetyMs: number) => {
  const script = `
    const Database = require(${JSON.stringify(LIBSQL)});
    const db = new Database(${JSON.stringify(path)});
    db.exec("BEGIN IMMEDIATE");
    const release = () => { db.exec("COMMIT"); db.close(); process.exit(0); };
    process.stdin.on("data", release);
    setTimeout(release, ${safetyMs});
    console.log("locked");
  `;
  const child = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  children.push(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve) => child.stdout.once("data", () => resolve()));
  return {
    release: async () => {
      child.stdin.write("go\n");
      await exited;
    },
  };
};

/**
 * Resolves once a 50 ms timer has fired `count` times. A busy wait inside the driver freezes the
 * event loop, timers included, so the work waiting for the lock would finish first.
 */
const timerFired = async (count: number): Promise<void> => {
  let ticks = 0;
  let timer: NodeJS.Timeout | undefined;
  await new Promise<void>((resolve) => {
    timer = setInterval(() => {
      if (++ticks >= count) resolve();
    }, 50);
  });
  clearInterval(timer);
};

const FROZE = "it finished before a 50 ms timer fired 5 times: waiting for the lock held the event loop";

/** Whether a promise has settled, without waiting for it. */
const settled = (promise: Promise<unknown>): (() => boolean) => {
  let done = false;
  promise.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  return () => done;
};

describe("libSQL: waiting for another process's write lock", () => {
  it("F10: an append waiting for another process's write lock leaves the event loop running, and commits once the lock is free", async () => {
    const path = join(tempDir(), "journal.db");
    const journal = open(path);
    const lock = await holdWriteLock(path, 3000);
    const appended = journal.append({ streamId: "s", expectedVersion: "no-stream", events: [event] });
    const isSettled = settled(appended);
    await timerFired(5);
    expect(isSettled(), FROZE).toBe(false);
    await lock.release();
    const result = await appended;
    expect(result.nextVersion).toBe(1);
    expect(await journal.readStream("s")).toHaveLength(1);
  });

  it("F10: claims, renewals, releases, prune and rebuild waiting for the lock leave the event loop running, and each completes after it", async () => {
    const path = join(tempDir(), "journal.db");
    const journal = open(path);
    await journal.claim("r-held", "w1", 60_000);
    const lock = await holdWriteLock(path, 3000);
    const claimed = journal.claim("r1", "w1", 60_000);
    const renewed = journal.renewClaims("w1", 60_000);
    const released = journal.releaseClaims("w1", ["r-held"]);
    const pruned = journal.prune({ keepRuns: 0, keepDays: 0 });
    const rebuilt = journal.rebuildProjections();
    const all = Promise.all([claimed, renewed, released, pruned, rebuilt]);
    const isSettled = settled(all);
    await timerFired(5);
    expect(isSettled(), FROZE).toBe(false);
    await lock.release();
    const [claim, renewedRuns] = await all;
    expect(claim).toMatchObject({ runId: "r1", workerId: "w1", epoch: 1 });
    // The waiting transactions take the lock in any order once it is free.
    for (const runId of renewedRuns) expect(["r-held", "r1"]).toContain(runId);
    expect(await journal.currentClaim("r-held")).toBeNull();
    expect(await journal.currentClaim("r1")).toMatchObject({ workerId: "w1" });
  });

  it("F10: a lock that stays taken longer than the wait limit fails appends and claims with JournalUnavailable, writing nothing", async () => {
    const path = join(tempDir(), "journal.db");
    const journal = open(path, { lockWaitMs: 300 });
    const lock = await holdWriteLock(path, 10_000);
    const [appended, claimed] = await Promise.allSettled([
      journal.append({ streamId: "s", expectedVersion: "no-stream", events: [event] }),
      journal.claim("r1", "w1", 60_000),
    ]);
    for (const outcome of [appended, claimed]) {
      expect(outcome.status).toBe("rejected");
      const reason = outcome.status === "rejected" ? outcome.reason : null;
      expect(reason).toBeInstanceOf(JournalUnavailable);
      expect(String(reason)).toMatch(/write lock could not be taken within 300 ms.*nothing was written/);
    }
    await lock.release();
    expect(await journal.streamHead("s")).toBeNull();
    expect(await journal.currentClaim("r1")).toBeNull();
    // Once the lock is free the journal works again.
    await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [event] });
  });
});
