import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { runView } from "../../src/adapters/surfaces/http/views.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { openRuntime, serve } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { lineOf, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());
const WORKER = join(import.meta.dirname, "..", "support", "retry-worker.ts");

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

const engines = ["libsql", "postgres"] as const;

/** A fresh journal: a libSQL file in `dir`, or a fresh PostgreSQL schema. */
const freshStore = async (engine: (typeof engines)[number], dir: string): Promise<string> => {
  if (engine === "libsql") return join(dir, "journal.db");
  await requirePg();
  return pgUrl(schemas.fresh());
};

describe.each(engines)("durable backoff on %s", (engine) => {
  it("a SIGKILL during a policy's backoff: after recovery the next attempt starts no earlier than the recorded due time, and the attempt count goes on", async () => {
    const dir = tempDir();
    const witness = join(dir, "witness.jsonl");
    const base = { HF_DB: await freshStore(engine, dir), HF_WITNESS: witness };

    const first = await runScript(WORKER, {
      ...base,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "during-backoff",
    });
    expect(first.signal).toBe("SIGKILL");

    const second = await runScript(WORKER, { ...base, HF_ACTION: "recover" });
    expect(second.code, second.stderr).toBe(0);
    const results = lineOf(second, "recovered")?.results as Array<{ status: string; output: unknown }>;
    expect(results).toEqual([
      expect.objectContaining({ status: "completed", output: { label: "x", attempt: 2 } }),
    ]);

    const started = readFileSync(witness, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { attempt: number; startedAt: number });
    expect(started.map((s) => s.attempt)).toEqual([1, 2]);

    const runtime = await openRuntime({
      store: base.HF_DB,
      agents: [],
      tools: [],
      recovery: { onOpen: false },
    });
    try {
      const [run] = await runtime.runs();
      const events = (await runtime.events(run!.runId)).map((e) => e.event);
      const scheduled = ofType(events, "retry.scheduled");
      expect(scheduled.map((s) => [s.attempt, s.delayMs, s.reason])).toEqual([[2, 6000, "backoff"]]);
      expect(started[1]!.startedAt).toBeGreaterThanOrEqual(Date.parse(scheduled[0]!.dueAt));
      expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2]);
      expect(events.map((e) => e.type)).toContain("run.interrupted");
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("while a retry waits, holdfast show, the API's call view and the panel show the failed attempt, its error and the next due time", async () => {
    const dir = tempDir();
    const db = await freshStore(engine, dir);
    const first = await runScript(WORKER, {
      HF_DB: db,
      HF_WITNESS: join(dir, "witness.jsonl"),
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "during-backoff",
    });
    expect(first.signal).toBe("SIGKILL");
    const reader = await openStore(db);
    try {
      const [runId] = await reader.activeRuns();
      const run = { runId: runId! };
      const events = (await reader.readStream(`run-${run.runId}`)).map((e) => e.event);
      const [scheduled] = ofType(events, "retry.scheduled");
      const view = await runView(reader, run.runId);
      expect(view.calls).toEqual([
        expect.objectContaining({
          attempt: 1,
          status: "authorized",
          failedAttempts: [
            { attempt: 1, definite: true, name: "DefiniteFailure", message: "503 the server is busy" },
          ],
          nextDueAt: scheduled!.dueAt,
        }),
      ]);
      const shown = await runCli(["show", run.runId, "--db", db]);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(
        `authorized: 503 the server is busy; attempt 2 due at ${scheduled!.dueAt}`,
      );
      expect(shown.stdout).toContain("retry.scheduled");

      const server = await serve({ store: db, port: 0, tokenFile: join(dir, "token") });
      try {
        const host = new URL(server.panelUrl).host;
        const signedIn = await server.app.request("/login", {
          method: "POST",
          headers: { host, origin: `http://${host}`, "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token: server.token.token, name: "ada" }).toString(),
        });
        const cookie = signedIn.headers.get("set-cookie")?.split(";")[0] ?? "";
        const page = await (
          await server.app.request(`/runs/${run.runId}`, { headers: { host, cookie } })
        ).text();
        const row = page.slice(page.indexOf('<table id="calls">'), page.indexOf("</table>"));
        expect(row).toContain('1 <span class="muted">of 3</span>');
        expect(row).toContain("attempt 1 failed: DefiniteFailure: 503 the server is busy");
        expect(row).toContain(
          `attempt 2 due at <time datetime="${scheduled!.dueAt}">${scheduled!.dueAt}</time>`,
        );
        const api = await server.app.request(`/api/runs/${run.runId}`, {
          headers: { host, authorization: `Bearer ${server.token.token}` },
        });
        const body = (await api.json()) as { calls: Array<{ retryPolicy: unknown; nextDueAt: string }> };
        expect(body.calls[0]).toMatchObject({
          nextDueAt: scheduled!.dueAt,
          retryPolicy: { attempts: 3, backoff: { initialMs: 6000 }, when: "default" },
        });
      } finally {
        await server.close();
      }
    } finally {
      await reader.close();
    }
  });
});
