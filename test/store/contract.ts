import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  type AnyEvent,
  canonicalJson,
  digestOf,
  GENESIS_HASH,
  type RecordedEvent,
  rowHash,
  type StoredRow,
  verifyStreamChain,
} from "../../src/events/index.js";
import { RUN_MACHINE_VERSION } from "../../src/machines/index.js";
import { callsOfRun, foldProjection, inlineProjections } from "../../src/projections/index.js";
import { auditJournal } from "../../src/runtime/audit.js";
import {
  ActiveRunExists,
  DuplicateAdmission,
  EventDecodeError,
  FencedOut,
  WrongExpectedVersion,
} from "../../src/runtime/errors.js";
import type { Journal } from "../../src/runtime/Journal.js";

/** One empty store of an engine, and the few things a test needs to do behind the journal's back. */
export interface ContractStore {
  /** A journal on this store; each call is a separate connection (another worker, in effect). */
  open(options?: { readonly onBeforeCommit?: () => void }): Promise<Journal>;
  /** Every stored event row, as the database holds it, in position order. */
  rawRows(): Promise<StoredRow[]>;
  /** Run SQL directly on the database; rejects when the database refuses it. */
  exec(sql: string): Promise<void>;
  /** Overwrite one event's stored payload, bypassing the immutability guard (corruption tests). */
  corrupt(streamId: string, version: number, data: string): Promise<void>;
}

const D = "d".repeat(64);

/** The store port's rules, run against one engine. Each test gets a fresh, empty store. */
export const journalContract = (
  name: string,
  freshStore: () => Promise<ContractStore>,
  cleanup: () => Promise<void>,
): void => {
  describe(`journal contract: ${name}`, () => {
    const journals: Journal[] = [];
    afterEach(async () => {
      for (const journal of journals.splice(0)) await journal.close();
    });
    afterAll(cleanup);

    /** Given a fresh store, a journal on it. */
    const given = async (options?: { readonly onBeforeCommit?: () => void }) => {
      const store = await freshStore();
      const open = async (o?: { readonly onBeforeCommit?: () => void }) => {
        const journal = await store.open(o);
        journals.push(journal);
        return journal;
      };
      return { store, open, journal: await open(options) };
    };

    describe("appendAll", () => {
      it("appendAll writes to several streams in one transaction: all requests, or none", async () => {
        const { journal } = await given();
        await journal.append({ streamId: "b", expectedVersion: "no-stream", events: [opened1()] });
        const refused = journal.appendAll([
          { streamId: "a", expectedVersion: "no-stream", events: [opened1()] },
          { streamId: "b", expectedVersion: "no-stream", events: [opened1()] },
        ]);
        await expect(refused).rejects.toMatchObject({ _tag: "WrongExpectedVersion", streamId: "b" });
        expect(await journal.readStream("a")).toHaveLength(0);
        const written = await journal.appendAll([
          { streamId: "a", expectedVersion: "no-stream", events: [opened1()] },
          { streamId: "b", expectedVersion: 1, events: [opened1()] },
        ]);
        expect(written.map((r) => [r.streamId, r.nextVersion])).toEqual([
          ["a", 1],
          ["b", 2],
        ]);
      });
    });

    describe("expected versions", () => {
      it("an append at a stale version number is refused with WrongExpectedVersion and writes nothing", async () => {
        const { journal } = await given();
        await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1(), opened1()] });
        await expect(
          journal.append({ streamId: "s", expectedVersion: 1, events: [opened1()] }),
        ).rejects.toMatchObject({ _tag: "WrongExpectedVersion", streamId: "s", actual: 2 });
        expect(await journal.readStream("s")).toHaveLength(2);
        const next = await journal.append({ streamId: "s", expectedVersion: 2, events: [opened1()] });
        expect(next.nextVersion).toBe(3);
      });

      it('"no-stream" is refused once the stream exists, and nothing is written', async () => {
        const { journal } = await given();
        await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1()] });
        await expect(
          journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1(), opened1()] }),
        ).rejects.toBeInstanceOf(WrongExpectedVersion);
        expect(await journal.readStream("s")).toHaveLength(1);
      });

      it('"stream-exists" is refused on a missing stream, and nothing is written', async () => {
        const { journal } = await given();
        await expect(
          journal.append({ streamId: "s", expectedVersion: "stream-exists", events: [opened1()] }),
        ).rejects.toMatchObject({ _tag: "WrongExpectedVersion", expected: "stream-exists", actual: 0 });
        expect(await journal.streamHead("s")).toBeNull();
        expect(await journal.readAll({ after: 0, limit: 10 })).toEqual([]);
        await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1()] });
        const r = await journal.append({
          streamId: "s",
          expectedVersion: "stream-exists",
          events: [opened1()],
        });
        expect(r.nextVersion).toBe(2);
      });

      it('"any" appends whether or not the stream exists', async () => {
        const { journal } = await given();
        await journal.append({ streamId: "s", expectedVersion: "any", events: [opened1()] });
        const r = await journal.append({ streamId: "s", expectedVersion: "any", events: [opened1()] });
        expect(r.nextVersion).toBe(2);
        expect(await journal.streamHead("s")).toMatchObject({
          streamId: "s",
          version: 2,
          hash: r.recorded[0]!.hash,
        });
      });

      it("two journals appending to one stream at the same expected version: exactly one wins", async () => {
        const { journal, open } = await given();
        const other = await open();
        await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1()] });
        const results = await Promise.allSettled([
          journal.append({ streamId: "s", expectedVersion: 1, events: [opened1()] }),
          other.append({ streamId: "s", expectedVersion: 1, events: [opened1()] }),
        ]);
        expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
        const refused = results.find((r) => r.status === "rejected");
        expect(refused?.reason).toBeInstanceOf(WrongExpectedVersion);
        expect(await journal.readStream("s")).toHaveLength(2);
      });
    });

    describe("hash chain", () => {
      it("every event is chained to the one before it in its stream, and each stored row rehashes to its hash", async () => {
        const { journal, store } = await given();
        for (let i = 0; i < 3; i++) {
          await journal.append({ streamId: "a", expectedVersion: "any", events: [opened1()] });
          await journal.append({
            streamId: "run-r",
            expectedVersion: "any",
            events: i === 0 ? [admitted("r", "c", "i"), awkward(i)] : [awkward(i)],
          });
        }
        for (const stream of ["a", "run-r"]) {
          const events = await journal.readStream(stream);
          expect(events.map((e) => e.version)).toEqual(events.map((_, i) => i + 1));
          events.forEach((e, i) => {
            expect(e.prevHash).toBe(i === 0 ? GENESIS_HASH : events[i - 1]!.hash);
          });
        }
        const rows = await store.rawRows();
        expect(rows).toHaveLength(7);
        // The chain covers the stored bytes (encrypted fields included), so it verifies from the rows alone.
        for (const stream of ["a", "run-r"])
          expect(verifyStreamChain(rows.filter((r) => r.streamId === stream))).toBeNull();
        expect(rows.map((r) => r.hash)).toEqual(
          [...(await journal.readAll({ after: 0, limit: 100 }))].map((e) => e.hash),
        );
        for (const row of rows) {
          expect(rowHash(row)).toBe(row.hash);
          // The stored bytes are the canonical encoding that was hashed, on every engine.
          expect(row.data).toBe(canonicalJson(JSON.parse(row.data)));
        }
        const tampered = { ...rows[0]!, data: rows[0]!.data.replace('"engine":"test"', '"engine":"tesT"') };
        expect(tampered.data).not.toBe(rows[0]!.data);
        expect(rowHash(tampered)).not.toBe(rows[0]!.hash);
      });

      it("awkward payloads (unicode, NUL, big and fractional numbers, unordered keys) read back equal", async () => {
        const { journal } = await given();
        const events = [admitted("r", "c", "i"), awkward(0), awkward(1)];
        await journal.append({ streamId: "run-r", expectedVersion: "no-stream", events });
        expect((await journal.readStream("run-r")).map((e) => e.event)).toEqual(events);
      });
    });

    describe("reading a stream", () => {
      it("readStream with afterVersion gives the stream's tail after that version, equal to the same events in a full read", async () => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r",
          expectedVersion: "no-stream",
          events: [admitted("r", "c", "i"), awkward(0), awkward(1)],
        });
        await journal.append({
          streamId: "run-q",
          expectedVersion: "no-stream",
          events: [admitted("q", "d", "i")],
        });
        await journal.append({ streamId: "run-r", expectedVersion: 3, events: [awkward(2)] });
        const whole = await journal.readStream("run-r");
        expect(whole.map((e) => e.version)).toEqual([1, 2, 3, 4]);
        expect(await journal.readStream("run-r", { afterVersion: 0 })).toEqual(whole);
        expect(await journal.readStream("run-r", { afterVersion: 2 })).toEqual(whole.slice(2));
        expect(await journal.readStream("run-r", { afterVersion: 4 })).toEqual([]);
        expect(await journal.readStream("run-none", { afterVersion: 0 })).toEqual([]);
      });
    });

    describe("global order", () => {
      it("readAll returns events in strictly increasing positions, and paging by after/limit reads each once", async () => {
        const { journal } = await given();
        const appended: RecordedEvent[] = [];
        for (let i = 0; i < 7; i++) {
          const r = await journal.append({
            streamId: `s-${i % 3}`,
            expectedVersion: "any",
            events: i % 2 === 0 ? [opened1()] : [opened1(), opened1()],
          });
          appended.push(...r.recorded);
        }
        const all = await journal.readAll({ after: 0, limit: 100 });
        expect(all.map((e) => e.position)).toEqual(appended.map((e) => e.position));
        for (let i = 1; i < all.length; i++) expect(all[i]!.position).toBeGreaterThan(all[i - 1]!.position);
        expect(all.map((e) => e.eventId)).toEqual(appended.map((e) => e.eventId));

        const paged: RecordedEvent[] = [];
        let after = 0;
        for (;;) {
          const page = await journal.readAll({ after, limit: 3 });
          if (page.length === 0) break;
          expect(page.length).toBeLessThanOrEqual(3);
          paged.push(...page);
          after = page[page.length - 1]!.position;
        }
        expect(paged).toEqual(all);
      });
    });

    describe("admission and the active-run guard", () => {
      it("a (chat, input) pair is admitted once: a second admission is refused with DuplicateAdmission and writes nothing", async () => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c", "i")],
        });
        await journal.append({ streamId: "run-r1", expectedVersion: 1, events: [completed("r1")] });
        await expect(
          journal.append({
            streamId: "run-r2",
            expectedVersion: "no-stream",
            events: [admitted("r2", "c", "i")],
          }),
        ).rejects.toBeInstanceOf(DuplicateAdmission);
        expect(await journal.streamHead("run-r2")).toBeNull();
        expect(await journal.admission("c", "i")).toEqual({
          chatId: "c",
          inputId: "i",
          digest: D,
          runId: "r1",
        });
        expect(await journal.admission("c", "other")).toBeNull();
      });

      it("a chat has at most one active run: a second is refused with ActiveRunExists naming the active run", async () => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c", "i1")],
        });
        await journal.append({
          streamId: "run-rx",
          expectedVersion: "no-stream",
          events: [admitted("rx", "x", "i1")],
        });
        const refused = journal.append({
          streamId: "run-r2",
          expectedVersion: "no-stream",
          events: [admitted("r2", "c", "i2")],
        });
        await expect(refused).rejects.toBeInstanceOf(ActiveRunExists);
        await expect(refused).rejects.toMatchObject({ chatId: "c", runId: "r1" });
        expect(await journal.streamHead("run-r2")).toBeNull();
        expect(await journal.admission("c", "i2")).toBeNull();
        expect(await journal.activeRun("c")).toBe("r1");
        expect(await journal.activeRuns()).toEqual(["r1", "rx"]);
      });

      const endings: ReadonlyArray<[string, (runId: string) => AnyEvent[]]> = [
        ["run.completed", (r) => [completed(r)]],
        ["run.failed", (r) => [{ type: "run.failed", runId: r, error: { name: "E", message: "no" } }]],
        ["run.stopped", (r) => [{ type: "run.stopped", runId: r, reason: "operator" }]],
        ["decision.recorded{stop}", (r) => heldThenStopped(r)],
      ];
      it.each(endings)("%s releases the chat for its next run", async (_ending, end) => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c", "i1")],
        });
        await journal.append({ streamId: "run-r1", expectedVersion: 1, events: end("r1") });
        expect(await journal.activeRun("c")).toBeNull();
        expect(await journal.activeRuns()).toEqual([]);
        await journal.append({
          streamId: "run-r2",
          expectedVersion: "no-stream",
          events: [admitted("r2", "c", "i2")],
        });
        expect(await journal.activeRun("c")).toBe("r2");
      });
    });

    describe("inline projections", () => {
      it("inline projections are updated in the append transaction and equal a fold over readAll", async () => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: runStream("r1", "c1"),
        });
        await journal.append({
          streamId: "run-r2",
          expectedVersion: "no-stream",
          events: [admitted("r2", "c2", "i")],
        });
        await journal.append({ streamId: "run-r2", expectedVersion: 1, events: [intended("r2", 0)] });
        await journal.append({ streamId: "run-r2", expectedVersion: 2, events: [done("r2", 0)] });
        await journal.append({
          streamId: "chat-c2",
          expectedVersion: "no-stream",
          events: [
            {
              type: "document.replaced",
              chatId: "c2",
              document: "plan",
              revision: 1,
              value: { title: "t", items: [] },
              digest: D,
              by: { runId: "r2" },
            },
          ],
        });
        // A refused append leaves every projection as it was.
        await expect(
          journal.append({ streamId: "run-r2", expectedVersion: 1, events: [intended("r2", 1)] }),
        ).rejects.toBeInstanceOf(WrongExpectedVersion);

        const events = await journal.readAll({ after: 0, limit: 1000 });
        for (const projection of inlineProjections) {
          const folded = foldProjection(projection, events);
          const stored = await journal.projectionRows(projection.name);
          expect(stored, projection.name).toHaveLength(folded.size);
          for (const [key, value] of folded)
            expect(await journal.projection(projection.name, key)).toEqual(value);
        }
        expect(await journal.projection("runs", "r1")).toMatchObject({ status: "completed" });
        expect(await journal.projection("runs", "nope")).toBeNull();
        // A run's calls are folded from its stream when read: an append stores no row per call.
        expect(await journal.projectionRows("calls")).toEqual([]);
        expect(callsOfRun(await journal.readStream("run-r2"))).toEqual([
          expect.objectContaining({ callId: "r2/0", status: "completed", outcomeCommitted: true }),
        ]);
      });
    });

    describe("claims", () => {
      it("the first claim has epoch 1; the holder renews it at the same epoch", async () => {
        const { journal } = await given();
        const first = await journal.claim("r1", "w1", 60_000);
        expect(first).toMatchObject({ runId: "r1", workerId: "w1", epoch: 1, previous: null });
        const renewed = await journal.claim("r1", "w1", 120_000);
        expect(renewed).toMatchObject({ workerId: "w1", epoch: 1 });
        expect(renewed!.leaseUntil).toBeGreaterThan(first!.leaseUntil);
        expect(await journal.currentClaim("r1")).toMatchObject({ workerId: "w1", epoch: 1 });
      });

      it("a claim is refused while another worker's lease is live", async () => {
        const { journal } = await given();
        await journal.claim("r1", "w1", 60_000);
        expect(await journal.claim("r1", "w2", 60_000)).toBeNull();
        expect(await journal.currentClaim("r1")).toMatchObject({ workerId: "w1", epoch: 1 });
      });

      it("after the lease expires another worker takes over at the next epoch", async () => {
        const { journal, open } = await given();
        const other = await open();
        await journal.claim("r1", "w1", 40);
        await sleep(80);
        const taken = await other.claim("r1", "w2", 60_000);
        expect(taken).toMatchObject({ workerId: "w2", epoch: 2, previous: { workerId: "w1", epoch: 1 } });
        expect(await journal.currentClaim("r1")).toMatchObject({ workerId: "w2", epoch: 2 });
      });

      it("takeOverFrom takes a live lease from a worker known to be dead, at the next epoch", async () => {
        const { journal } = await given();
        await journal.claim("r1", "dead", 60_000);
        expect(await journal.claim("r1", "w2", 60_000, { takeOverFrom: "someone-else" })).toBeNull();
        expect(await journal.claim("r1", "w2", 60_000, { takeOverFrom: "dead" })).toMatchObject({
          workerId: "w2",
          epoch: 2,
        });
      });

      it("takeOverIf asks about the owner found, inside the claim: a dead owner's live lease is taken, a live one's is not", async () => {
        const { journal } = await given();
        await journal.claim("r1", "dead", 60_000);
        await journal.claim("r2", "alive", 60_000);
        const asked: string[] = [];
        const takeOverIf = (owner: string) => {
          asked.push(owner);
          return owner === "dead";
        };
        expect(await journal.claim("r1", "w2", 60_000, { takeOverIf })).toMatchObject({
          workerId: "w2",
          epoch: 2,
          previous: { workerId: "dead", epoch: 1 },
        });
        expect(await journal.claim("r2", "w2", 60_000, { takeOverIf })).toBeNull();
        expect(asked).toEqual(["dead", "alive"]);
        expect(await journal.currentClaim("r2")).toMatchObject({ workerId: "alive", epoch: 1 });
        // A test wins over a name: the name alone would have taken r2.
        expect(await journal.claim("r2", "w2", 60_000, { takeOverFrom: "alive", takeOverIf })).toBeNull();
      });

      it("claimMany claims several runs in one call, each as claim would, and leaves out the runs a live worker holds", async () => {
        const { journal } = await given();
        await journal.claim("held-live", "alive", 60_000);
        await journal.claim("held-dead", "dead", 60_000);
        await journal.claim("mine", "w1", 60_000);
        await journal.append({
          streamId: "run-released",
          expectedVersion: "no-stream",
          events: [admitted("released", "c", "i")],
        });
        await journal.claim("released", "w9", 60_000);
        await journal.releaseClaims("w9", ["released"]);
        expect(await journal.claimMany([], "w1", 60_000)).toEqual(new Map());
        const claims = await journal.claimMany(
          ["new", "held-live", "held-dead", "mine", "released", "new"],
          "w1",
          60_000,
          { takeOverIf: (owner) => owner === "dead" },
        );
        expect([...claims.keys()].sort()).toEqual(["held-dead", "mine", "new", "released"]);
        expect(claims.get("new")).toMatchObject({ runId: "new", workerId: "w1", epoch: 1, previous: null });
        expect(claims.get("held-dead")).toMatchObject({ epoch: 2, previous: { workerId: "dead", epoch: 1 } });
        expect(claims.get("mine")).toMatchObject({ epoch: 1, previous: { workerId: "w1", epoch: 1 } });
        // A released row keeps its epoch and is no previous owner (F24).
        expect(claims.get("released")).toMatchObject({ epoch: 2, previous: null });
        for (const runId of ["new", "held-dead", "mine", "released"]) {
          expect(await journal.currentClaim(runId)).toMatchObject({
            workerId: "w1",
            epoch: claims.get(runId)!.epoch,
          });
        }
        expect(await journal.currentClaim("held-live")).toMatchObject({ workerId: "alive", epoch: 1 });
        // The leases are live: another worker is refused every one of them.
        expect(await journal.claimMany(["new", "mine", "held-dead"], "w2", 60_000)).toEqual(new Map());
        expect([...(await journal.renewClaims("w1", 60_000))].sort()).toEqual([
          "held-dead",
          "mine",
          "new",
          "released",
        ]);
      });

      it("claimMany from two connections at once: every run ends with exactly one owner, claimed once", async () => {
        const { journal, open } = await given();
        const other = await open();
        const runIds = Array.from({ length: 40 }, (_, i) => `r${i}`);
        const [a, b] = await Promise.all([
          journal.claimMany(runIds, "w1", 60_000),
          other.claimMany([...runIds].reverse(), "w2", 60_000),
        ]);
        for (const runId of runIds) {
          expect(a.has(runId) !== b.has(runId), runId).toBe(true);
          const owner = a.has(runId) ? "w1" : "w2";
          expect(await journal.currentClaim(runId)).toMatchObject({ workerId: owner, epoch: 1 });
        }
      });

      it("renewClaims extends every lease of the worker; releaseClaims gives them up", async () => {
        const { journal } = await given();
        await journal.claim("r1", "w1", 40);
        await journal.claim("r2", "w1", 40);
        await journal.claim("r3", "w2", 40);
        await journal.renewClaims("w1", 60_000);
        await sleep(80);
        expect(await journal.claim("r1", "w2", 1000)).toBeNull();
        expect(await journal.claim("r3", "w1", 1000)).toMatchObject({ epoch: 2 });
        await journal.releaseClaims("w1", ["r1"]);
        expect(await journal.currentClaim("r1")).toBeNull();
        expect(await journal.currentClaim("r2")).toMatchObject({ workerId: "w1" });
        await journal.releaseClaims("w1");
        expect(await journal.currentClaim("r2")).toBeNull();
        expect(await journal.currentClaim("r3")).toBeNull();
      });
      it("F24: a released claim keeps its epoch: the next claim, by the same worker too, is at the next epoch and the old fence is refused", async () => {
        const { journal } = await given();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c", "i")],
        });
        expect(await journal.claim("r1", "w1", 60_000)).toMatchObject({ epoch: 1, previous: null });
        const oldFence = { runId: "r1", workerId: "w1", epoch: 1 };
        await journal.releaseClaims("w1", ["r1"]);
        expect(await journal.currentClaim("r1")).toBeNull();
        const write = (fence: { runId: string; workerId: string; epoch: number }) =>
          journal.append({ streamId: "run-r1", expectedVersion: 1, events: [intended("r1", 0)], fence });
        await expect(write(oldFence)).rejects.toMatchObject({ _tag: "FencedOut", currentWorkerId: null });

        const again = await journal.claim("r1", "w1", 60_000);
        expect(again).toMatchObject({ workerId: "w1", epoch: 2, previous: null });
        await expect(write(oldFence)).rejects.toMatchObject({
          _tag: "FencedOut",
          epoch: 1,
          currentWorkerId: "w1",
          currentEpoch: 2,
        });
        expect(await journal.readStream("run-r1")).toHaveLength(1);
        await write({ runId: "r1", workerId: "w1", epoch: 2 });

        // Releasing every claim of a worker keeps the epochs too; a released row is no previous owner.
        await journal.releaseClaims("w1");
        expect(await journal.currentClaim("r1")).toBeNull();
        expect(await journal.renewClaims("w1", 60_000)).toEqual([]);
        expect(await journal.claim("r1", "w2", 60_000)).toMatchObject({
          workerId: "w2",
          epoch: 3,
          previous: null,
        });
      });

      it("the claim of a run that was never admitted (a refused submit claims first) leaves nothing when released", async () => {
        const { journal } = await given();
        await journal.claim("r9", "w1", 60_000);
        await journal.claim("r8", "w1", 60_000);
        await journal.releaseClaims("w1", ["r9"]);
        await journal.releaseClaims("w1");
        // No row was kept: claiming either again starts from the first epoch.
        expect(await journal.claim("r9", "w1", 60_000)).toMatchObject({ epoch: 1, previous: null });
        expect(await journal.claim("r8", "w2", 60_000)).toMatchObject({ epoch: 1, previous: null });
      });
    });

    describe("fencing", () => {
      it("an append fenced with a superseded epoch is refused with FencedOut and writes nothing", async () => {
        const { journal, open } = await given();
        const other = await open();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c", "i")],
        });
        const mine = await journal.claim("r1", "w1", 40);
        const fence = { runId: "r1", workerId: "w1", epoch: mine!.epoch };
        await journal.append({ streamId: "run-r1", expectedVersion: 1, events: [intended("r1", 0)], fence });
        await sleep(80);
        await other.claim("r1", "w2", 60_000);
        const stale = journal.append({
          streamId: "run-r1",
          expectedVersion: 2,
          events: [done("r1", 0)],
          fence,
        });
        await expect(stale).rejects.toBeInstanceOf(FencedOut);
        await expect(stale).rejects.toMatchObject({
          runId: "r1",
          workerId: "w1",
          epoch: 1,
          currentWorkerId: "w2",
          currentEpoch: 2,
        });
        expect(await journal.readStream("run-r1")).toHaveLength(2);
        expect(callsOfRun(await journal.readStream("run-r1"))).toEqual([
          expect.objectContaining({ callId: "r1/0", outcomeCommitted: false }),
        ]);
        const fresh = { runId: "r1", workerId: "w2", epoch: 2 };
        await other.append({ streamId: "run-r1", expectedVersion: 2, events: [done("r1", 0)], fence: fresh });
        expect(await journal.readStream("run-r1")).toHaveLength(3);
      });

      it("a run owner's appends in a row chain, fold and stay fenced whatever moved behind its back: a row, the head, digits like a position, the claim", async () => {
        const { journal, open, store } = await given();
        const other = await open();
        const fence = await claimAndAdmit(journal, "r1");
        const append = (on: Journal, expectedVersion: number, event: AnyEvent) =>
          on.append({ streamId: "run-r1", expectedVersion, events: [event], fence });
        await append(journal, 1, intended("r1", 0));
        await append(journal, 2, done("r1", 0));
        await append(journal, 3, intended("r1", 1));
        const last = await append(journal, 4, done("r1", 1));
        expect(last.recorded[0]).toMatchObject({ version: 5 });
        expect(await journal.projection("runs", "r1")).toMatchObject({ calls: 2, version: 4 });
        expect((await auditJournal(journal)).findings).toEqual([]);

        // The runs row changed behind the owner's back (where it is stored in the clear): the next
        // append folds from the stored row.
        if (!journal.keyring)
          await store.exec(
            `UPDATE projections SET value = replace(value, '"calls":2', '"calls":40') WHERE name = 'runs' AND key = 'r1'`,
          );
        const third = await append(journal, 5, intended("r1", 2));
        expect(await journal.projection("runs", "r1")).toMatchObject({
          calls: journal.keyring ? 3 : 41,
          version: 6,
          position: third.recorded[0]!.position,
        });

        // Another connection of the same owner moved the head: a stale expected version is refused,
        // and the next append chains on what the other one wrote.
        const moved = await append(other, 6, done("r1", 2));
        await expect(append(journal, 6, intended("r1", 3))).rejects.toMatchObject({
          _tag: "WrongExpectedVersion",
          actual: 7,
        });
        const fourth = await append(journal, 7, intended("r1", 3));
        expect(fourth.recorded[0]).toMatchObject({ version: 8, prevHash: moved.recorded[0]!.hash });

        // Content that reads like a position is stored as written.
        const detail = "see 9000000000000001 and 8000000000000001";
        const held = await append(journal, 8, {
          type: "run.held",
          runId: "r1",
          reasons: [{ code: "in-doubt", callId: "r1/3", detail }],
        });
        expect(await journal.projection("runs", "r1")).toMatchObject({
          status: "held",
          heldReasons: [{ detail }],
          position: held.recorded[0]!.position,
        });

        // A take-over fences the old owner out, and nothing of its append is written.
        expect(await other.claim("r1", "w2", 60_000, { takeOverFrom: "w1" })).toMatchObject({ epoch: 2 });
        await expect(
          append(journal, 9, { type: "run.resumed", runId: "r1", by: "w1" }),
        ).rejects.toMatchObject({ _tag: "FencedOut", currentEpoch: 2 });
        const stream = await other.readStream("run-r1");
        expect(stream.map((e) => e.version)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9]);
        for (const [i, e] of stream.entries()) if (i > 0) expect(e.prevHash).toBe(stream[i - 1]!.hash);
      });

      it("a fenced append reads its stream's head with the claim: it chains on the head, and a wrong expected version names the current one", async () => {
        const { journal } = await given();
        const claim = await journal.claim("r1", "w1", 60_000);
        const fence = { runId: "r1", workerId: "w1", epoch: claim!.epoch };
        // An empty stream under a claim: the first event chains on the genesis hash.
        const [first] = (
          await journal.append({
            streamId: "run-r1",
            expectedVersion: "no-stream",
            events: [admitted("r1", "c", "i")],
            fence,
          })
        ).recorded;
        expect(first!.prevHash).toBe("0".repeat(64));
        const [second] = (
          await journal.append({ streamId: "run-r1", expectedVersion: 1, events: [intended("r1", 0)], fence })
        ).recorded;
        expect(second).toMatchObject({ version: 2, prevHash: first!.hash });
        await expect(
          journal.append({ streamId: "run-r1", expectedVersion: 1, events: [done("r1", 0)], fence }),
        ).rejects.toMatchObject({ _tag: "WrongExpectedVersion", actual: 2 });
        expect(await journal.streamHead("run-r1")).toMatchObject({ version: 2, hash: second!.hash });
      });

      it("an append with releaseClaim lets its claim go in the same commit; a refused one keeps it; none without a fence", async () => {
        const { journal, open } = await given();
        const other = await open();
        const fence = await claimAndAdmit(journal, "r1");
        // Refused (wrong version): nothing written, the claim stays.
        await expect(
          journal.append({
            streamId: "run-r1",
            expectedVersion: 5,
            events: [intended("r1", 0)],
            fence,
            releaseClaim: true,
          }),
        ).rejects.toMatchObject({ _tag: "WrongExpectedVersion" });
        expect(await other.currentClaim("r1")).toMatchObject({ workerId: "w1", epoch: fence.epoch });
        await expect(
          journal.append({
            streamId: "run-r2",
            expectedVersion: "no-stream",
            events: [admitted("r2", "c2", "i")],
            releaseClaim: true,
          }),
        ).rejects.toThrow(/asks to release its claim but has no fence/);
        expect(await journal.streamHead("run-r2")).toBeNull();
        await journal.append({
          streamId: "run-r1",
          expectedVersion: 1,
          events: [intended("r1", 0)],
          fence,
          releaseClaim: true,
        });
        // Written and let go together: another connection sees the events and no claim.
        expect(await other.readStream("run-r1")).toHaveLength(2);
        expect(await other.currentClaim("r1")).toBeNull();
        // The row kept its epoch: the next claim counts on, and the old fence matches nothing.
        expect(await other.claim("r1", "w2", 60_000)).toMatchObject({
          epoch: fence.epoch + 1,
          previous: null,
        });
        await expect(
          journal.append({ streamId: "run-r1", expectedVersion: 2, events: [done("r1", 0)], fence }),
        ).rejects.toBeInstanceOf(FencedOut);
      });

      it("an append fenced on a run nobody has claimed is refused with FencedOut", async () => {
        const { journal } = await given();
        await expect(
          journal.append({
            streamId: "run-r1",
            expectedVersion: "no-stream",
            events: [admitted("r1", "c", "i")],
            fence: { runId: "r1", workerId: "w1", epoch: 1 },
          }),
        ).rejects.toMatchObject({ _tag: "FencedOut", currentWorkerId: null, currentEpoch: null });
        expect(await journal.streamHead("run-r1")).toBeNull();
        expect(await journal.activeRun("c")).toBeNull();
      });
    });

    describe("group commit", () => {
      it("concurrent appends share one commit, a refused one fails alone, and each resolves only after the commit", async () => {
        let commits = 0;
        let resolvedAtCommit = -1;
        let resolved = 0;
        const { journal, open } = await given({
          onBeforeCommit: () => {
            commits++;
            if (resolvedAtCommit < 0) resolvedAtCommit = resolved;
          },
        });
        const appends = Array.from({ length: 20 }, (_, i) =>
          journal
            .append({ streamId: `run-${i}`, expectedVersion: "no-stream", events: [opened1()] })
            .then((r) => {
              resolved++;
              return r;
            }),
        );
        const stale = journal.append({ streamId: "run-0", expectedVersion: 5, events: [opened1()] });
        const results = await Promise.all(appends);
        await expect(stale).rejects.toBeInstanceOf(WrongExpectedVersion);
        expect(commits).toBe(1);
        expect(resolvedAtCommit).toBe(0);
        expect(results.map((r) => r.nextVersion)).toEqual(Array(20).fill(1));
        const positions = results.map((r) => r.recorded[0]!.position);
        expect([...positions].sort((a, b) => a - b)).toEqual(positions);
        // Resolved means committed: another connection already sees every event.
        const reader = await open();
        for (let i = 0; i < 20; i++) expect(await reader.readStream(`run-${i}`)).toHaveLength(1);
      });

      it("in one commit, a request refused after it wrote (a second active run for a chat) leaves nothing behind, and the others commit", async () => {
        let commits = 0;
        const { journal } = await given({ onBeforeCommit: () => commits++ });
        const [first, second, other] = await Promise.allSettled([
          journal.append({
            streamId: "run-r1",
            expectedVersion: "no-stream",
            events: [admitted("r1", "c", "i1")],
          }),
          journal.append({
            streamId: "run-r2",
            expectedVersion: "no-stream",
            events: [admitted("r2", "c", "i2")],
          }),
          journal.append({
            streamId: "run-r3",
            expectedVersion: "no-stream",
            events: [admitted("r3", "d", "i1")],
          }),
        ]);
        expect(first.status).toBe("fulfilled");
        expect(other.status).toBe("fulfilled");
        expect(second).toMatchObject({
          status: "rejected",
          reason: { _tag: "ActiveRunExists", chatId: "c" },
        });
        expect(commits).toBe(1);
        expect(await journal.readStream("run-r2")).toEqual([]);
        expect(await journal.admission("c", "i2")).toBeNull();
        expect(await journal.activeRun("c")).toBe("r1");
        expect((await journal.readAll({ after: 0, limit: 10 })).map((e) => e.streamId)).toEqual([
          "run-r1",
          "run-r3",
        ]);
      });

      it("one commit decides each request against the ones before it: a claim let go, the same stream twice, a refused part of appendAll", async () => {
        let commits = 0;
        const { journal, open, store } = await given();
        const claim = await journal.claim("r1", "w1", 60_000);
        const fence = { runId: "r1", workerId: "w1", epoch: claim!.epoch };
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: [admitted("r1", "c1", "i")],
          fence,
        });
        await journal.append({
          streamId: "run-r2",
          expectedVersion: "no-stream",
          events: [admitted("r2", "c2", "i")],
        });
        await journal.append({ streamId: "taken", expectedVersion: "no-stream", events: [opened1()] });
        await journal.close();
        const batched = await open({ onBeforeCommit: () => commits++ });
        // Queued together, so they share one commit; each is decided after those before it.
        const [letGo, afterLetGo, first, second, part, stale, any, ends, admits, afterAdmit] =
          await Promise.allSettled([
            batched.append({
              streamId: "run-r1",
              expectedVersion: 1,
              events: [intended("r1", 0)],
              fence,
              releaseClaim: true,
            }),
            batched.append({ streamId: "run-r1", expectedVersion: 2, events: [done("r1", 0)], fence }),
            batched.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1(), opened1()] }),
            batched.append({ streamId: "s", expectedVersion: 2, events: [opened1()] }),
            batched.appendAll([
              { streamId: "fresh", expectedVersion: "no-stream", events: [opened1()] },
              { streamId: "taken", expectedVersion: "no-stream", events: [opened1()] },
            ]),
            batched.append({ streamId: "s", expectedVersion: 1, events: [opened1()] }),
            batched.append({ streamId: "run-r2", expectedVersion: "any", events: [intended("r2", 0)] }),
            batched.append({
              streamId: "run-r2",
              expectedVersion: "stream-exists",
              events: [done("r2", 0), completed("r2")],
            }),
            // An admission (decided by unique keys) and an append to its stream after it.
            batched.append({
              streamId: "run-r3",
              expectedVersion: "no-stream",
              events: [admitted("r3", "c3", "i")],
            }),
            batched.append({ streamId: "run-r3", expectedVersion: 1, events: [intended("r3", 0)] }),
          ]);
        expect(commits).toBe(1);
        expect(admits).toMatchObject({ status: "fulfilled", value: { nextVersion: 1 } });
        expect(afterAdmit).toMatchObject({ status: "fulfilled", value: { nextVersion: 2 } });
        expect(letGo).toMatchObject({ status: "fulfilled", value: { nextVersion: 2 } });
        expect(afterLetGo).toMatchObject({ status: "rejected", reason: { _tag: "FencedOut", runId: "r1" } });
        expect(first).toMatchObject({ status: "fulfilled", value: { nextVersion: 2 } });
        expect(second).toMatchObject({ status: "fulfilled", value: { nextVersion: 3 } });
        expect(part).toMatchObject({
          status: "rejected",
          reason: { _tag: "WrongExpectedVersion", streamId: "taken" },
        });
        expect(stale).toMatchObject({
          status: "rejected",
          reason: { _tag: "WrongExpectedVersion", streamId: "s", actual: 3 },
        });
        expect(any).toMatchObject({ status: "fulfilled", value: { nextVersion: 2 } });
        expect(ends).toMatchObject({ status: "fulfilled", value: { nextVersion: 4 } });

        const reader = await open();
        expect(await reader.readStream("fresh")).toEqual([]);
        expect(await reader.readStream("taken")).toHaveLength(1);
        expect(await reader.currentClaim("r1")).toBeNull();
        expect(await reader.activeRun("c2")).toBeNull();
        expect(await reader.activeRun("c1")).toBe("r1");
        expect(await reader.activeRun("c3")).toBe("r3");
        expect((await reader.readStream("s")).map((e) => e.version)).toEqual([1, 2, 3]);
        const rows = await store.rawRows();
        for (const stream of ["run-r1", "run-r2", "run-r3", "s"])
          expect(verifyStreamChain(rows.filter((r) => r.streamId === stream)), stream).toBeNull();
        for (const row of rows) expect(rowHash(row)).toBe(row.hash);
        const events = await reader.readAll({ after: 0, limit: 100 });
        const positions = events.map((e) => e.position);
        expect([...positions].sort((a, b) => a - b)).toEqual(positions);
        for (const stream of ["run-r1", "run-r2", "run-r3", "s"]) {
          const versions = events.filter((e) => e.streamId === stream).map((e) => e.version);
          expect(versions, stream).toEqual(versions.map((_, i) => i + 1));
        }
        for (const projection of inlineProjections) {
          const folded = foldProjection(projection, events);
          expect(await reader.projectionRows(projection.name), projection.name).toHaveLength(folded.size);
          for (const [key, value] of folded)
            expect(await reader.projection(projection.name, key), `${projection.name} ${key}`).toEqual(value);
        }
        expect(await reader.projection("runs", "r2")).toMatchObject({ status: "completed" });
      });

      it("in one commit, every stream keeps its callers' order through an admission: admit, then appendAll on its stream and another, then that other", async () => {
        let commits = 0;
        const { journal } = await given({ onBeforeCommit: () => commits++ });
        const [admit, both, after] = await Promise.allSettled([
          journal.append({
            streamId: "run-r9",
            expectedVersion: "no-stream",
            events: [admitted("r9", "c9", "i")],
          }),
          journal.appendAll([
            { streamId: "run-r9", expectedVersion: 1, events: [intended("r9", 0)] },
            { streamId: "notes", expectedVersion: "no-stream", events: [opened1()] },
          ]),
          journal.append({ streamId: "notes", expectedVersion: 1, events: [opened1()] }),
          journal.append({ streamId: "elsewhere", expectedVersion: "no-stream", events: [opened1()] }),
        ]);
        expect(commits).toBe(1);
        expect(admit).toMatchObject({ status: "fulfilled", value: { nextVersion: 1 } });
        expect(both).toMatchObject({ status: "fulfilled" });
        expect(after).toMatchObject({ status: "fulfilled", value: { nextVersion: 2 } });
        expect((await journal.readStream("notes")).map((e) => e.version)).toEqual([1, 2]);
      });

      it("appends made while a commit is in flight go together into the next commit", async () => {
        let commits = 0;
        const later: Array<Promise<unknown>> = [];
        let journalRef: Journal | undefined;
        const { journal } = await given({
          onBeforeCommit: () => {
            commits++;
            if (commits === 1) {
              for (let i = 0; i < 10; i++)
                later.push(
                  journalRef!.append({
                    streamId: `later-${i}`,
                    expectedVersion: "no-stream",
                    events: [opened1()],
                  }),
                );
            }
          },
        });
        journalRef = journal;
        await journal.append({ streamId: "first", expectedVersion: "no-stream", events: [opened1()] });
        await Promise.all(later);
        expect(later).toHaveLength(10);
        expect(commits).toBe(2);
        expect(await journal.readAll({ after: 0, limit: 100 })).toHaveLength(11);
      });
    });

    describe("immutability and integrity", () => {
      it("the database itself refuses to update or delete an event", async () => {
        const { journal, store } = await given();
        await journal.append({ streamId: "s", expectedVersion: "no-stream", events: [opened1(), opened1()] });
        const before = await store.rawRows();
        await expect(store.exec("UPDATE events SET data = '{}' WHERE version = 1")).rejects.toThrow(
          /immutable/,
        );
        await expect(store.exec("DELETE FROM events WHERE version = 2")).rejects.toThrow(/never deleted/);
        expect(await store.rawRows()).toEqual(before);
      });

      it("the fingerprint key is made once and is the same after reopening", async () => {
        const { journal, open } = await given();
        expect(journal.fingerprintKey).toHaveLength(32);
        const key = Buffer.from(journal.fingerprintKey).toString("hex");
        await journal.close();
        const again = await open();
        expect(Buffer.from(again.fingerprintKey).toString("hex")).toBe(key);
      });

      it("a corrupted row is an EventDecodeError naming stream, version and cause, never skipped", async () => {
        const { journal, store } = await given();
        await journal.append({
          streamId: "s",
          expectedVersion: "no-stream",
          events: [opened1(), opened1(), opened1()],
        });
        await store.corrupt("s", 2, '{"type":"journal.opened","schemaVersion":"one","engine":"x"}');
        await expect(journal.readStream("s")).rejects.toBeInstanceOf(EventDecodeError);
        await expect(journal.readStream("s")).rejects.toMatchObject({ streamId: "s", version: 2 });
        await expect(journal.readStream("s")).rejects.toThrow(/schemaVersion/);
        await expect(journal.readAll({ after: 0, limit: 10 })).rejects.toMatchObject({
          _tag: "EventDecodeError",
          version: 2,
        });
        await store.corrupt("s", 3, "not json");
        await expect(journal.readAll({ after: 2, limit: 10 })).rejects.toThrow(/not JSON/);
      });
    });

    describe("maintenance: raw reads, audit, rebuild, retention", () => {
      /** Finished, stopped, held and running runs, one chat each. */
      const givenRuns = async () => {
        const ctx = await given();
        const { journal } = ctx;
        await journal.append({
          streamId: "run-r1",
          expectedVersion: "no-stream",
          events: finishedRun("r1", "c1"),
        });
        await journal.append({
          streamId: "run-r2",
          expectedVersion: "no-stream",
          events: [admitted("r2", "c2", "i"), ...heldThenStopped("r2")],
        });
        await journal.append({
          streamId: "run-r3",
          expectedVersion: "no-stream",
          events: [admitted("r3", "c3", "i"), ...heldThenStopped("r3").slice(0, 2)],
        });
        await journal.append({
          streamId: "run-r4",
          expectedVersion: "no-stream",
          events: [admitted("r4", "c4", "i"), intended("r4", 0)],
        });
        return ctx;
      };

      it("readAllRows returns the stored rows undecoded, and projectionPage pages a projection in key order", async () => {
        const { journal, store } = await givenRuns();
        await store.corrupt("run-r4", 2, "not json");
        const rows = await journal.readAllRows({ after: 0, limit: 100 });
        expect(rows.map((r) => `${r.streamId}@${r.version}`)).toEqual(
          (await store.rawRows()).map((r) => `${r.streamId}@${r.version}`),
        );
        expect(rows.at(-1)?.data).toBe("not json");
        const first = await journal.projectionPage("runs", { after: null, limit: 3 });
        const rest = await journal.projectionPage("runs", { after: first.at(-1)!.key, limit: 3 });
        expect([...first, ...rest].map((r) => r.key)).toEqual(["r1", "r2", "r3", "r4"]);
        expect(JSON.parse(first[0]!.value)).toMatchObject({ runId: "r1", status: "completed" });
        expect(first[0]!.position).toBe(
          rows.find((r) => r.streamId === "run-r1" && r.version === 4)!.position,
        );
      });

      it("the audit of a journal written through the port is clean; a payload changed behind its back is a hash-mismatch finding", async () => {
        const { journal, store } = await givenRuns();
        const clean = await auditJournal(journal, { pageSize: 3 });
        expect(clean.findings).toEqual([]);
        expect(clean).toMatchObject({ clean: true, events: 14, streams: 4, runs: 4 });
        await store.corrupt("run-r1", 3, JSON.stringify({ ...(done("r1", 0) as object), result: { ok: 1 } }));
        const after = await auditJournal(journal, { pageSize: 3 });
        expect(after.findings).toEqual([
          expect.objectContaining({ kind: "hash-mismatch", streamId: "run-r1", version: 3 }),
        ]);
      });

      it("rebuildProjections restores a projection row changed behind the journal's back, and says what changed", async () => {
        const { journal, store } = await givenRuns();
        expect((await journal.rebuildProjections()).filter((p) => p.changed)).toEqual([]);
        await store.exec(
          `UPDATE projections SET value = '{"runId":"r1","status":"running"}' WHERE name = 'runs' AND key = 'r1'`,
        );
        await store.exec("DELETE FROM projections WHERE name = 'chats' AND key = 'c4'");
        const report = await journal.rebuildProjections();
        expect(report.filter((p) => p.changed).map((p) => p.name)).toEqual(["runs", "chats"]);
        expect(report.find((p) => p.name === "runs")).toEqual({ name: "runs", rows: 4, changed: true });
        expect(await journal.projection("runs", "r1")).toMatchObject({ status: "completed" });
        expect(await journal.projection("chats", "c4")).not.toBeNull();
        expect((await auditJournal(journal)).findings).toEqual([]);
      });

      it("prune removes only finished runs, records retention.pruned with their heads first, and the audit still passes", async () => {
        const { journal, store } = await givenRuns();
        const heads = { r1: await journal.streamHead("run-r1"), r2: await journal.streamHead("run-r2") };
        const before = await store.rawRows();
        const dry = await journal.prune({ keepRuns: 0, keepDays: 0, dryRun: true });
        expect(dry.pruned.map((r) => r.runId).sort()).toEqual(["r1", "r2"]);
        expect(dry.recorded).toBeNull();
        expect(await store.rawRows()).toEqual(before);

        const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
        expect(report.pruned.map((r) => [r.runId, r.status]).sort()).toEqual([
          ["r1", "completed"],
          ["r2", "stopped"],
        ]);
        expect(report.recorded).toEqual({ streamId: "system", version: 1 });
        expect(await journal.readStream("run-r1")).toEqual([]);
        expect(await journal.readStream("run-r2")).toEqual([]);
        expect(await journal.projection("runs", "r1")).toBeNull();
        expect([...(await journal.activeRuns())].sort()).toEqual(["r3", "r4"]);
        expect((await journal.readStream("run-r3")).length).toBe(3);
        const [sealed] = await journal.readStream("system");
        expect(sealed?.event).toMatchObject({
          type: "retention.pruned",
          streams: expect.arrayContaining([
            expect.objectContaining({ streamId: "run-r1", version: 4, hash: heads.r1?.hash }),
            expect.objectContaining({ streamId: "run-r2", version: 5, hash: heads.r2?.hash }),
          ]),
        });
        const audit = await auditJournal(journal);
        expect(audit.findings).toEqual([]);
        expect(audit.prunedStreams).toBe(2);
        // The database still refuses deletes outside retention.
        await expect(store.exec("DELETE FROM events WHERE stream_id = 'run-r3'")).rejects.toThrow();
        // Nothing left to prune.
        expect((await journal.prune({ keepRuns: 0, keepDays: 0 })).recorded).toBeNull();
      });

      it("F6: prune keeps each pruned run's admission, tells the run's final status and output digest, and the same admission is refused again", async () => {
        const { journal } = await givenRuns();
        const now = Date.parse("2031-01-02T03:04:05.000Z");
        await journal.prune({ keepRuns: 0, keepDays: 0, now });
        expect(await journal.readStream("run-r1")).toEqual([]);
        expect(await journal.admission("c1", "i")).toEqual({
          chatId: "c1",
          inputId: "i",
          digest: D,
          runId: "r1",
        });
        expect(await journal.admission("c2", "i")).toMatchObject({ runId: "r2", digest: D });
        expect(await journal.prunedRun("r1")).toEqual({
          runId: "r1",
          chatId: "c1",
          status: "completed",
          outputDigest: D,
          prunedAt: "2031-01-02T03:04:05.000Z",
        });
        expect(await journal.prunedRun("r2")).toMatchObject({
          runId: "r2",
          status: "stopped",
          outputDigest: null,
        });
        // Runs still in the log were not pruned.
        expect(await journal.prunedRun("r3")).toBeNull();
        expect(await journal.prunedRun("nope")).toBeNull();
        // The same input cannot open a second run, and the refusal writes nothing.
        await expect(
          journal.append({
            streamId: "run-r9",
            expectedVersion: "no-stream",
            events: [admitted("r9", "c1", "i")],
          }),
        ).rejects.toBeInstanceOf(DuplicateAdmission);
        expect(await journal.streamHead("run-r9")).toBeNull();
        expect(await journal.activeRun("c1")).toBeNull();
        expect((await auditJournal(journal)).findings).toEqual([]);
      });

      it("prune goes batch by batch: one retention.pruned per batch, and only the rows the removed runs made change, as a rebuild from zero has them", async () => {
        const { journal } = await givenRuns();
        // Chat c5: an older run with a checkpoint and a conflict, then a newer one without either.
        await journal.append({
          streamId: "run-r5",
          expectedVersion: "no-stream",
          events: runStream("r5", "c5"),
        });
        await journal.append({
          streamId: "run-r6",
          expectedVersion: "no-stream",
          events: [admitted("r6", "c5", "j"), intended("r6", 0), done("r6", 0), completed("r6")],
        });
        const chatBefore = await journal.projection<{ lastRunId: string; checkpoint: unknown }>(
          "chats",
          "c5",
        );
        expect(chatBefore).toMatchObject({ lastRunId: "r6", checkpoint: { runId: "r5" } });
        const progress: Array<{ pruned: number; selected: number }> = [];
        const report = await journal.prune({
          keepRuns: 1,
          keepDays: 0,
          batchRuns: 2,
          onBatch: (p) => progress.push(p),
        });
        expect(report.pruned.map((r) => r.runId).sort()).toEqual(["r1", "r2", "r5"]);
        expect(progress).toEqual([
          { pruned: 2, selected: 3 },
          { pruned: 3, selected: 3 },
        ]);
        expect(report.records).toEqual([
          { streamId: "system", version: 1 },
          { streamId: "system", version: 2 },
        ]);
        expect(report.recorded).toEqual({ streamId: "system", version: 2 });
        const sealed = (await journal.readStream("system")).map((e) =>
          e.event.type === "retention.pruned" ? e.event.streams.map((h) => h.streamId) : [],
        );
        expect(sealed.flat().sort()).toEqual(["run-r1", "run-r2", "run-r5"]);
        expect(sealed.every((streams) => streams.length <= 2)).toBe(true);
        // r6 stays the chat's last run; the checkpoint it showed went with r5.
        expect(await journal.projection("chats", "c5")).toMatchObject({ lastRunId: "r6", checkpoint: null });
        expect(await journal.projection("runs", "r5")).toBeNull();
        expect(await journal.projection("chats", "c1")).toBeNull();
        expect(await journal.projection("runs", "r6")).toMatchObject({ status: "completed" });
        expect((await journal.projectionRows("conflicts")).length).toBe(0);
        expect((await auditJournal(journal)).findings).toEqual([]);
        expect((await journal.rebuildProjections()).filter((p) => p.changed)).toEqual([]);
      });

      it("a prune batch holds at most 500 events: a run with more goes in a batch of its own", async () => {
        const { journal } = await givenRuns();
        const calls = Array.from({ length: 300 }, (_, seq) => [
          intended("big", seq),
          done("big", seq),
        ]).flat();
        await journal.append({
          streamId: "run-big",
          expectedVersion: "no-stream",
          events: [admitted("big", "c9", "i"), ...calls, completed("big")],
        });
        const report = await journal.prune({ keepRuns: 0, keepDays: 0 });
        expect(report.pruned.map((r) => r.runId).sort()).toEqual(["big", "r1", "r2"]);
        const sealed = (await journal.readStream("system")).map((e) =>
          e.event.type === "retention.pruned" ? e.event.streams.map((h) => h.streamId) : [],
        );
        expect(sealed).toEqual([["run-r1", "run-r2"], ["run-big"]]);
        expect((await auditJournal(journal)).findings).toEqual([]);
      });

      it("prune keeps the newest finished runs and those finished within the window", async () => {
        const { journal } = await givenRuns();
        expect(
          (await journal.prune({ keepRuns: 1, keepDays: 0, dryRun: true })).pruned.map((r) => r.runId),
        ).toEqual(["r1"]);
        expect((await journal.prune({ keepRuns: 0, keepDays: 1 })).pruned).toEqual([]);
      });
    });
  });
};

// ------------------------------------------------------------------ valid events

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const opened1 = (): AnyEvent => ({ type: "journal.opened", schemaVersion: 1, engine: "test" });

/** A payload that trips up lossy encodings: JSONB, NUL-hostile TEXT, key order, float formatting. */
const awkward = (i: number): AnyEvent => ({
  type: "call.intended",
  runId: "r",
  callId: `r/${i}`,
  seq: i,
  attempt: 1,
  kind: "tool",
  name: "t",
  args: { z: 1, a: [1.5, 1e21, 0.1 + 0.2, -7], s: 'é 😀 \u0000 \u2028 "q" \\', nested: { b: null, a: true } },
  fingerprint: D,
  disposition: "hold",
  pin: null,
  reconciler: null,
  idempotencyKey: `r/${i}#1`,
});

/** Claim `runId` for worker w1 and admit it (input i of `chatId`) under that claim; its fence. */
export const claimAndAdmit = async (journal: Journal, runId: string, chatId = "c") => {
  const claim = await journal.claim(runId, "w1", 60_000);
  const fence = { runId, workerId: "w1", epoch: claim!.epoch };
  await journal.append({
    streamId: `run-${runId}`,
    expectedVersion: "no-stream",
    events: [admitted(runId, chatId, "i")],
    fence,
  });
  return fence;
};

export const admitted = (runId: string, chatId: string, inputId: string): AnyEvent => ({
  type: "run.admitted",
  runId,
  chatId,
  inputId,
  inputDigest: D,
  agent: { name: "a", version: "1" },
  machine: RUN_MACHINE_VERSION,
  input: { text: "hello" },
});

export const intended = (runId: string, seq: number): AnyEvent => ({
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

export const done = (runId: string, seq: number): AnyEvent => ({
  type: "call.completed",
  runId,
  callId: `${runId}/${seq}`,
  attempt: 1,
  result: { ok: seq },
  resultDigest: digestOf({ ok: seq }),
});

const completed = (runId: string): AnyEvent => ({
  type: "run.completed",
  runId,
  output: "ok",
  outputDigest: D,
});

/** A whole run that completed: one call, its outcome, completion. */
const finishedRun = (runId: string, chatId: string): AnyEvent[] => [
  admitted(runId, chatId, "i"),
  intended(runId, 0),
  done(runId, 0),
  completed(runId),
];

/** After run.admitted (version 1): an in-doubt call, held, then stopped by a person. */
const heldThenStopped = (runId: string): AnyEvent[] => [
  intended(runId, 0),
  { type: "run.held", runId, reasons: [{ code: "in-doubt", callId: `${runId}/0`, detail: "no outcome" }] },
  {
    type: "decision.recorded",
    runId,
    basedOnVersion: 3,
    decidedBy: "ops",
    calls: [{ callId: `${runId}/0`, decision: "stop", note: "checked the remote side" }],
    run: "stop",
    note: "checked the remote side",
  },
  { type: "run.stopped", runId, reason: "stopped by a person's decision at version 3" },
];

/** A whole valid run: calls, a checkpoint, a conflict, completion. */
const runStream = (runId: string, chatId: string): AnyEvent[] => [
  admitted(runId, chatId, "i"),
  intended(runId, 0),
  done(runId, 0),
  { type: "checkpoint.saved", runId, chatId, afterSeq: 0, state: { step: 1 }, digest: D },
  intended(runId, 1),
  {
    type: "call.failed",
    runId,
    callId: `${runId}/1`,
    attempt: 1,
    definite: true,
    error: { name: "E", message: "refused" },
  },
  { type: "conflict.recorded", runId, kind: "outcome", detail: "x", recorded: 1, attempted: 2 },
  completed(runId),
];
