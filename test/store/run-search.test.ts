/**
 * The run index and the runs list's search (decision 0073), on both engines, with and without
 * payload keys: keyset pages both ways, every filter, a search among 2,000 runs, the index following
 * every write path (a run owner's one-statement append on PostgreSQL included), retention, rebuild,
 * the migration's fill, and no chat id in clear in the index of a sealed journal.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type pg from "pg";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { runsPage } from "../../src/adapters/surfaces/http/views.js";
import type { AnyEvent } from "../../src/events/index.js";
import { RUN_MACHINE_VERSION } from "../../src/machines/index.js";
import type { Journal } from "../../src/runtime/Journal.js";
import { freshKey, keyEnv, NO_KEYS } from "../support/keys.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";

const D = "d".repeat(64);

interface Store {
  readonly open: () => Promise<Journal>;
  /** Rows read straight from the database, behind the journal's back. */
  readonly raw: (sql: string) => Promise<Array<Record<string, unknown>>>;
  /** Put the store back to the schema before the run index (its migration runs again on open). */
  readonly beforeIndex: () => Promise<void>;
}

const dirs: string[] = [];
const schemas = usePgSchemas();
const admins: pg.Client[] = [];

const libsqlStore = (env: Record<string, string | undefined>) => async (): Promise<Store> => {
  const dir = mkdtempSync(join(tmpdir(), "holdfast-search-"));
  dirs.push(dir);
  const path = join(dir, "journal.db");
  const withDb = async <T>(fn: (j: LibsqlJournal) => T): Promise<T> => {
    const journal = LibsqlJournal.open(path, { env: NO_KEYS, keyCheck: false });
    try {
      return fn(journal);
    } finally {
      await journal.close();
    }
  };
  return {
    open: () => openStore(path, { libsql: { env } }),
    raw: (sql) => withDb((j) => j.unsafeDatabase().prepare(sql).all() as Array<Record<string, unknown>>),
    beforeIndex: () =>
      withDb((j) => {
        j.unsafeDatabase().exec("DROP TABLE run_search; DELETE FROM meta WHERE key = 'run_search_unfilled'");
        j.unsafeDatabase().pragma("user_version = 9");
      }),
  };
};

const postgresStore = (env: Record<string, string | undefined>) => async (): Promise<Store> => {
  await requirePg();
  const schema = schemas.fresh();
  const url = pgUrl(schema);
  let admin: pg.Client | undefined;
  const client = async () => {
    if (!admin) {
      admin = await adminClient(schema);
      admins.push(admin);
    }
    return admin;
  };
  return {
    open: () => openStore(url, { postgres: { env } }),
    raw: async (sql) => (await (await client()).query(sql)).rows,
    beforeIndex: async () => {
      await (await client()).query(
        "DROP TABLE run_search; DELETE FROM meta WHERE key = 'run_search_unfilled'; DELETE FROM holdfast_migrations WHERE id = 11",
      );
    },
  };
};

const admittedAs = (runId: string, chatId: string, agent = "a@1"): AnyEvent => {
  const at = agent.lastIndexOf("@");
  return {
    type: "run.admitted",
    runId,
    chatId,
    inputId: `input-${runId}`,
    inputDigest: D,
    agent: { name: agent.slice(0, at), version: agent.slice(at + 1) },
    machine: RUN_MACHINE_VERSION,
    input: { text: "hello" },
  };
};

const completed = (runId: string): AnyEvent => ({
  type: "run.completed",
  runId,
  output: "ok",
  outputDigest: D,
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

const held = (runId: string, seq: number): AnyEvent => ({
  type: "run.held",
  runId,
  reasons: [{ code: "in-doubt", callId: `${runId}/${seq}`, detail: "no outcome" }],
});

/**
 * Admit runs in commits of 250 (each its own chat unless `chatOf` says); finished, each by its own
 * append, all at once (on PostgreSQL the group commit's batch statements write them).
 */
const admitMany = async (
  journal: Journal,
  runIds: ReadonlyArray<string>,
  options: {
    readonly chatOf?: (runId: string) => string;
    readonly finish?: boolean;
    readonly agent?: string;
  } = {},
): Promise<void> => {
  for (let from = 0; from < runIds.length; from += 250)
    await journal.appendAll(
      runIds.slice(from, from + 250).map((runId) => ({
        streamId: `run-${runId}`,
        expectedVersion: "no-stream" as const,
        events: [admittedAs(runId, options.chatOf?.(runId) ?? `chat-${runId}`, options.agent)],
      })),
    );
  if (options.finish)
    for (let from = 0; from < runIds.length; from += 250)
      await Promise.all(
        runIds
          .slice(from, from + 250)
          .map((runId) =>
            journal.append({ streamId: `run-${runId}`, expectedVersion: 1, events: [completed(runId)] }),
          ),
      );
};

/** A moment strictly between what came before and what comes after (times have milliseconds). */
const tick = async (): Promise<string> => {
  await new Promise((resolve) => setTimeout(resolve, 3));
  const at = new Date().toISOString();
  await new Promise((resolve) => setTimeout(resolve, 3));
  return at;
};

/** Every page, following `next` from the first, then `prev` back from the last. */
const walk = async (journal: Journal, query: Parameters<typeof runsPage>[1]) => {
  const forward: string[][] = [];
  let page = await runsPage(journal, query);
  forward.push(page.runs.map((r) => r.runId));
  expect(page.prev).toBeNull();
  while (page.next !== null) {
    page = await runsPage(journal, { ...query, cursor: page.next });
    forward.push(page.runs.map((r) => r.runId));
  }
  const backward: string[][] = [page.runs.map((r) => r.runId)];
  while (page.prev !== null) {
    page = await runsPage(journal, { ...query, cursor: page.prev });
    backward.unshift(page.runs.map((r) => r.runId));
  }
  return { forward, backward };
};

const engines = [
  { engine: "libSQL", store: libsqlStore },
  { engine: "PostgreSQL", store: postgresStore },
] as const;

for (const { engine, store: storeOf } of engines)
  for (const keyed of [false, true])
    describe(`run search: ${engine}${keyed ? ", payloads encrypted" : ""}`, () => {
      const key = freshKey();
      const freshStore = storeOf(keyed ? keyEnv(key) : NO_KEYS);
      const journals: Journal[] = [];
      const opened = async (store: Store) => {
        const journal = await store.open();
        journals.push(journal);
        return journal;
      };
      afterEach(async () => {
        for (const journal of journals.splice(0)) await journal.close();
      });
      afterAll(async () => {
        for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
        for (const admin of admins.splice(0)) await admin.end();
        await schemas.dropAll();
      });

      it("pages both ways give every run once, newest admitted first, and the same pages back", async () => {
        const store = await freshStore();
        const journal = await opened(store);
        const ids = Array.from({ length: 130 }, (_, i) => `r${String(i).padStart(4, "0")}`);
        // Admitted one commit at a time: each its own time (or the same one, ordered by id).
        for (const id of ids) await admitMany(journal, [id]);
        const newestFirst = (await store.raw("SELECT run_id, created_at FROM run_search"))
          .map((r) => ({ id: String(r.run_id), at: String(r.created_at) }))
          .sort((a, b) => (a.at === b.at ? (a.id < b.id ? 1 : -1) : a.at < b.at ? 1 : -1))
          .map((r) => r.id);
        expect(newestFirst).toHaveLength(130);

        const { forward, backward } = await walk(journal, { limit: 25 });
        expect(forward.map((p) => p.length)).toEqual([25, 25, 25, 25, 25, 5]);
        expect(forward.flat()).toEqual(newestFirst);
        expect(backward).toEqual(forward);
        const first = await runsPage(journal, { limit: 25 });
        // 130 match: the count stops at 100 (decision 0090).
        expect(first).toMatchObject({
          total: 100,
          totalCapped: true,
          held: 0,
          heldCapped: false,
          prev: null,
        });
        // A cursor is opaque and checked.
        await expect(runsPage(journal, { cursor: "not-a-cursor" })).rejects.toThrow(/cursor/);
      });

      it("filters by id prefix, chat, agent, status, stalled and time range, paging within them", async () => {
        const store = await freshStore();
        const journal = await opened(store);
        await admitMany(journal, ["old-1", "old-2"], { agent: "writer@1", finish: true });
        const t1 = await tick();
        await admitMany(journal, ["mid-1", "mid-2", "mid-3"], { agent: "writer@2" });
        await admitMany(journal, ["mid-4"], { agent: "reader@1", chatOf: () => "shared" });
        const t2 = await tick();
        await admitMany(journal, ["new-1"], { agent: "reader@1", finish: true, chatOf: () => "other" });
        // A run a live owner runs is not stalled; one held by its owner is held.
        const claim = await journal.claim("owned", "w1", 60_000);
        const fence = { runId: "owned", workerId: "w1", epoch: claim!.epoch };
        await journal.append({
          streamId: "run-owned",
          expectedVersion: "no-stream",
          events: [admittedAs("owned", "owned-chat", "reader@1")],
          fence,
        });
        const ids = async (query: Parameters<typeof runsPage>[1]) =>
          (await runsPage(journal, query)).runs.map((r) => r.runId).sort();

        expect(await ids({ id: "mid-" })).toEqual(["mid-1", "mid-2", "mid-3", "mid-4"]);
        expect(await ids({ chat: "shared" })).toEqual(["mid-4"]);
        expect(await ids({ chat: "nobody" })).toEqual([]);
        expect(await ids({ agent: "writer" })).toEqual(["mid-1", "mid-2", "mid-3", "old-1", "old-2"]);
        expect(await ids({ agent: "writer@2" })).toEqual(["mid-1", "mid-2", "mid-3"]);
        expect(await ids({ status: "completed" })).toEqual(["new-1", "old-1", "old-2"]);
        expect(await ids({ status: "running" })).toEqual(["mid-1", "mid-2", "mid-3", "mid-4", "owned"]);
        expect(await ids({ status: "stalled" })).toEqual(["mid-1", "mid-2", "mid-3", "mid-4"]);
        expect(await ids({ from: t1, to: t2 })).toEqual(["mid-1", "mid-2", "mid-3", "mid-4"]);
        expect(await ids({ to: t1 })).toEqual(["old-1", "old-2"]);
        expect(await ids({ from: t2, agent: "reader" })).toEqual(["new-1", "owned"]);
        expect(await ids({ from: t1, to: t2, status: "stalled", agent: "writer@2" })).toEqual([
          "mid-1",
          "mid-2",
          "mid-3",
        ]);
        // The owner holds its run: the owner's own append moves the index too (on PostgreSQL, the
        // one-statement append of a run owner, decision 0034).
        await journal.append({
          streamId: "run-owned",
          expectedVersion: 1,
          events: [intended("owned", 0)],
          fence,
        });
        const t3 = await tick();
        await journal.append({
          streamId: "run-owned",
          expectedVersion: 2,
          events: [held("owned", 0)],
          fence,
        });
        expect(await ids({ status: "held" })).toEqual(["owned"]);
        expect(await ids({ status: "held", holdReason: "in-doubt" })).toEqual(["owned"]);
        expect(await ids({ status: "held", holdReason: "corrupt" })).toEqual([]);
        expect(await ids({ time: "updated", from: t3 })).toEqual(["owned"]);
        const page = await runsPage(journal, { status: "stalled", limit: 3 });
        expect(page).toMatchObject({ total: 4, held: 1, stalled: 4 });
        expect(page.runs).toHaveLength(3);
        const rest = await runsPage(journal, { status: "stalled", limit: 3, cursor: page.next! });
        expect([...page.runs, ...rest.runs].map((r) => r.runId).sort()).toEqual([
          "mid-1",
          "mid-2",
          "mid-3",
          "mid-4",
        ]);
        await expect(runsPage(journal, { from: "yesterday-ish" })).rejects.toThrow(
          /from: "yesterday-ish" is not a time/,
        );
      });

      it("finds a run by chat and time range among 2,000 runs", async () => {
        const store = await freshStore();
        const journal = await opened(store);
        const before = Array.from({ length: 1000 }, (_, i) => `a${i}`);
        const after = Array.from({ length: 1000 }, (_, i) => `b${i}`);
        // The chat has a run on each side of the range, and one inside it.
        await admitMany(journal, before, {
          finish: true,
          chatOf: (id) => (id === "a500" ? "needle" : `chat-${id}`),
        });
        const from = await tick();
        await admitMany(journal, ["target"], { chatOf: () => "needle", finish: true });
        const to = await tick();
        await admitMany(journal, after, {
          finish: true,
          chatOf: (id) => (id === "b7" ? "needle" : `chat-${id}`),
        });
        const page = await runsPage(journal, { chat: "needle", from, to });
        expect(page.runs.map((r) => r.runId)).toEqual(["target"]);
        expect(page.runs[0]).toMatchObject({ chatId: "needle", status: "completed" });
        expect((await runsPage(journal, { chat: "needle" })).runs.map((r) => r.runId)).toEqual([
          "b7",
          "target",
          "a500",
        ]);
        // Every run's completion reached the index, however its commit wrote it.
        const byStatus = await store.raw("SELECT status, count(*) AS n FROM run_search GROUP BY status");
        expect(byStatus.map((r) => [r.status, Number(r.n)])).toEqual([["completed", 2001]]);
        expect(await runsPage(journal, { status: "running", limit: 1 })).toMatchObject({ total: 0 });
      });

      it("a page counts up to 100: past it the total, the held and the stalled runs read as more than 100", async () => {
        const store = await freshStore();
        const journal = await opened(store);
        const heldIds = Array.from({ length: 100 }, (_, i) => `h${i}`);
        const holdAll = (ids: ReadonlyArray<string>) =>
          journal.appendAll(
            ids.map((runId) => ({
              streamId: `run-${runId}`,
              expectedVersion: "no-stream" as const,
              events: [admittedAs(runId, `chat-${runId}`), intended(runId, 0), held(runId, 0)],
            })),
          );
        await holdAll(heldIds);
        // Admitted and owned by nobody: stalled.
        await admitMany(
          journal,
          Array.from({ length: 100 }, (_, i) => `s${i}`),
        );
        expect(await runsPage(journal, { status: "held", limit: 1 })).toMatchObject({
          total: 100,
          totalCapped: false,
          held: 100,
          heldCapped: false,
          stalled: 100,
          stalledCapped: false,
        });
        await holdAll(["h100"]);
        await admitMany(journal, ["s100"]);
        expect(await runsPage(journal, { status: "held", limit: 1 })).toMatchObject({
          total: 100,
          totalCapped: true,
          held: 100,
          heldCapped: true,
          stalled: 100,
          stalledCapped: true,
        });
        // Each count is the search's own: a narrow one is exact beside the capped ones.
        expect(await runsPage(journal, { id: "h10", limit: 1 })).toMatchObject({
          total: 2,
          totalCapped: false,
          heldCapped: true,
          stalledCapped: true,
        });
        expect((await journal.countRuns([{ limit: 1000, statuses: ["held"] }]))[0]).toBe(101);
      });

      it("retention removes a run's index row with its runs row; a rebuild restores the index", async () => {
        const store = await freshStore();
        const journal = await opened(store);
        await admitMany(journal, ["done-1", "done-2"], { finish: true });
        await admitMany(journal, ["live-1"]);
        await journal.prune({ keepRuns: 0, keepDays: 0 });
        const left = async () =>
          (await store.raw("SELECT run_id, status FROM run_search ORDER BY run_id")).map((r) => ({
            runId: r.run_id,
            status: r.status,
          }));
        expect(await left()).toEqual([{ runId: "live-1", status: "running" }]);
        expect((await runsPage(journal)).runs.map((r) => r.runId)).toEqual(["live-1"]);
        await journal.append({ streamId: "run-live-1", expectedVersion: 1, events: [completed("live-1")] });
        const indexed = await store.raw("SELECT * FROM run_search ORDER BY run_id");
        await journal.rebuildProjections();
        expect(await store.raw("SELECT * FROM run_search ORDER BY run_id")).toEqual(indexed);
        expect(await left()).toEqual([{ runId: "live-1", status: "completed" }]);
      });

      it("a journal from before the index is filled on open: by the migration, or, sealed, by the first writer with the key", async () => {
        const store = await freshStore();
        const first = await opened(store);
        await admitMany(first, ["x1", "x2"], { agent: "some@thing@3" });
        await admitMany(first, ["x3"], { finish: true });
        const indexed = await store.raw(
          "SELECT run_id, status, agent, agent_name, created_at, updated_at, position FROM run_search ORDER BY run_id",
        );
        expect(indexed.map((r) => r.agent_name)).toEqual(["some@thing", "some@thing", "a"]);
        await first.close();
        journals.splice(0);
        await store.beforeIndex();
        const reopened = await opened(store);
        expect(
          await store.raw(
            "SELECT run_id, status, agent, agent_name, created_at, updated_at, position FROM run_search ORDER BY run_id",
          ),
        ).toEqual(indexed);
        expect(await store.raw("SELECT key FROM meta WHERE key = 'run_search_unfilled'")).toEqual([]);
        expect((await runsPage(reopened, { chat: "chat-x2" })).runs.map((r) => r.runId)).toEqual(["x2"]);
      });

      if (keyed)
        it("one runs row the key cannot open is named in a warning and does not keep every other sealed run out of the index", async () => {
          const store = await freshStore();
          const first = await opened(store);
          await admitMany(first, ["s1", "s2", "s3"]);
          await first.close();
          journals.splice(0);
          await store.beforeIndex();
          // s1's row replaced by s2's sealed value: it no longer opens as s1's (a tampered or misplaced row).
          const rows = await store.raw("SELECT key, value FROM projections WHERE name = 'runs' ORDER BY key");
          const s2 = rows.find((r) => r.key === "s2")!;
          await store.raw(
            `UPDATE projections SET value = '${String(s2.value)}' WHERE name = 'runs' AND key = 's1' RETURNING key`,
          );
          const warnings: string[] = [];
          const onWarning = (w: Error & { code?: string }) => {
            if (w.code === "HOLDFAST_RUN_INDEX") warnings.push(w.message);
          };
          process.on("warning", onWarning);
          try {
            const reopened = await opened(store);
            const listed = (await runsPage(reopened, {})).runs.map((r) => r.runId).sort();
            expect(listed).toEqual(["s2", "s3"]);
            await new Promise((resolve) => setTimeout(resolve, 20));
            expect(warnings).toEqual([
              expect.stringContaining("1 runs row could not be opened with the key"),
            ]);
            expect(warnings[0]).toContain("(s1)");
          } finally {
            process.off("warning", onWarning);
          }
        });

      if (keyed)
        it("a sealed journal's index holds no chat id in clear, and a search by chat still finds the run", async () => {
          const store = await freshStore();
          const journal = await opened(store);
          await admitMany(journal, ["s1", "s2"], { chatOf: (id) => `secret-chat-${id}` });
          const rows = await store.raw("SELECT * FROM run_search");
          expect(rows).toHaveLength(2);
          const text = JSON.stringify(rows);
          expect(text).not.toContain("secret-chat");
          for (const row of rows)
            expect(String(row.chat_key)).toMatch(/^k1\.[0-9a-f]{8}\.[A-Za-z0-9_-]{43}$/);
          expect((await runsPage(journal, { chat: "secret-chat-s2" })).runs.map((r) => r.runId)).toEqual([
            "s2",
          ]);
        });
    });
