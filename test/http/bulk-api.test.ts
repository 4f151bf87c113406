import { join } from "node:path";
import { Schema } from "effect";
import { afterEach, describe, expect, it } from "vitest";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openReader,
  openRuntime,
  type Server,
  serve,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { type HeldRun, heldRun, openPanelRuntime } from "./browser/runs.js";

/** `POST /api/bulk` (decision 0081): per-run results, each run on its own version. */
const tempDir = useTempDir();

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

const heldJournal = async (count: number): Promise<{ server: Server; store: string; runs: HeldRun[] }> => {
  const { store, runtime } = await openPanelRuntime(tempDir());
  const runs: HeldRun[] = [];
  for (let i = 1; i <= count; i++) runs.push(await heldRun(runtime, "once", `chat-${i}`));
  await runtime.close();
  const server = await serve({ store, port: 0 });
  opened.push(() => server.close());
  return { server, store, runs };
};

const bulk = async (server: Server, body: unknown) => {
  const reply = await fetch(`${server.url}/api/bulk`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
};

type Result = { runId: string; done: boolean; code: string; message: string; version: number | null };

const lastEvent = async (store: string, runId: string) => {
  const reader = await openReader({ store });
  try {
    return (await reader.events(runId)).at(-1)?.event.type;
  } finally {
    await reader.close();
  }
};

describe("POST /api/bulk", () => {
  it("cancels each run on its own version: one that moved on is refused as stale, nothing written for it", async () => {
    const { server, store, runs } = await heldJournal(2);
    const [current, moved] = runs as [HeldRun, HeldRun];
    const { status, body } = await bulk(server, {
      action: "cancel",
      by: "ada",
      note: "the user left",
      runs: [
        { runId: current.runId, basedOnVersion: current.version },
        { runId: moved.runId, basedOnVersion: moved.version - 1 },
      ],
    });
    expect(status).toBe(200);
    expect(body).toMatchObject({ action: "cancel", done: 1, refused: 1 });
    const [first, second] = body.results as [Result, Result];
    expect(first).toMatchObject({ runId: current.runId, done: true, code: "recorded" });
    expect(second).toMatchObject({ runId: moved.runId, done: false, code: "stale", version: null });
    expect(second.message).toContain(`version ${moved.version - 1}; it is at version ${moved.version} now`);
    expect(await lastEvent(store, current.runId)).toBe("run.stopped");
    expect(await lastEvent(store, moved.runId)).toBe("run.held");
  });

  it("grants one more attempt to a run held by a definitely failed call, on its version; the run goes on and completes", async () => {
    const store = join(tempDir(), "journal.db");
    let attempts = 0;
    const send = defineTool({
      name: "send",
      args: Schema.Struct({ to: Schema.String }),
      run: async () => {
        attempts++;
        if (attempts === 1) throw new DefiniteFailure("the provider answered 503 before accepting");
        return { sent: true };
      },
    });
    const agent = defineAgent({
      name: "sender",
      version: "1",
      run: async (turn, input: { to: string }) => turn.tool(send, { to: input.to }),
    });
    const runtime = await openRuntime({ store, agents: [agent], tools: [send] });
    opened.push(() => runtime.close());
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "sender", content: { to: "x" } });
    expect((await handle.result).status).toBe("held");
    const version = (await runtime.events(handle.runId)).length;
    const server = await serve({ store, port: 0, runtime });
    opened.push(() => server.close());
    const { body } = await bulk(server, {
      action: "retry",
      by: "ada",
      note: "the provider is back",
      runs: [{ runId: handle.runId, basedOnVersion: version }],
    });
    const [result] = body.results as [Result];
    expect(result).toMatchObject({ done: true, code: "recorded" });
    expect(result.message).toContain(`one more attempt for ${handle.runId}/0 granted at version ${version}`);
    await expect.poll(() => lastEvent(store, handle.runId), { timeout: 10_000 }).toBe("run.completed");
    expect(attempts).toBe(2);
  });

  it("refuses a retry grant for a run whose call is in doubt, not failed: a decision, not a retry", async () => {
    const { server, store, runs } = await heldJournal(1);
    const run = runs[0]!;
    const { body } = await bulk(server, {
      action: "retry",
      by: "ada",
      note: "the provider is back",
      runs: [{ runId: run.runId, basedOnVersion: run.version }],
    });
    const [result] = body.results as [Result];
    expect(result).toMatchObject({ done: false, code: "refused" });
    expect(result.message).toContain(`call(s) in doubt (${run.calls[0]}) need a decision first, not a retry`);
    expect(await lastEvent(store, run.runId)).toBe("run.held");
  });

  it("refuses a request without a note, or with a run twice, as 422 naming the field, writing nothing", async () => {
    const { server, store, runs } = await heldJournal(1);
    const run = runs[0]!;
    const target = { runId: run.runId, basedOnVersion: run.version };
    const noNote = await bulk(server, { action: "stop", by: "ada", note: " ", runs: [target] });
    expect(noNote.status).toBe(422);
    expect(JSON.stringify(noNote.body)).toContain("a bulk action needs a note");
    const twice = await bulk(server, { action: "stop", by: "ada", note: "n", runs: [target, target] });
    expect(twice.status).toBe(422);
    expect(twice.body).toMatchObject({ error: { code: "invalid-input", field: "runs" } });
    expect(JSON.stringify(twice.body)).toContain(`run ${run.runId} is selected twice`);
    expect(await lastEvent(store, run.runId)).toBe("run.held");
  });
});
