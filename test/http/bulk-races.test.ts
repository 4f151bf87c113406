import { join } from "node:path";
import { Schema } from "effect";
import { afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  type Runtime,
  type Server,
  serve,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { heldRun, openPanelRuntime } from "./browser/runs.js";

/**
 * Law 9 under a race (decision 0081): a signal another process appends between the version check
 * and the append of a bulk or single action. The action is refused as stale and nothing of it is
 * written — never recorded on a version nobody looked at.
 */
const tempDir = useTempDir();

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

type Append = (request: { events: ReadonlyArray<{ type: string }> }) => Promise<unknown>;

/**
 * Before the first append carrying an event of `type` reaches the real libSQL journal, append a
 * signal to the run through the runtime (a real, committed write): the run moves on in between.
 */
const signalBefore = (type: string, runtime: Runtime, runId: string): void => {
  const proto = LibsqlJournal.prototype as unknown as { append: Append };
  const original = proto.append;
  let injected = false;
  proto.append = async function (this: unknown, request) {
    if (!injected && request.events.some((e) => e.type === type)) {
      injected = true;
      await runtime.signal(runId, "poke", { why: "meanwhile" }, { signalId: "s1", by: "svc" });
    }
    return original.call(this, request);
  };
  opened.push(async () => {
    proto.append = original;
  });
};

const post = async (server: Server, path: string, body: unknown) => {
  const reply = await fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: reply.status, body: (await reply.json()) as Record<string, unknown> };
};

type Result = { done: boolean; code: string; message: string; version: number | null };

const types = async (runtime: Runtime, runId: string) =>
  (await runtime.events(runId)).map((e) => e.event.type);

describe("a signal between the version check and the append", () => {
  it("refuses a bulk retry grant as stale: no retry.granted, the run stays held", async () => {
    const store = join(tempDir(), "journal.db");
    const send = defineTool({
      name: "send",
      args: Schema.Struct({ to: Schema.String }),
      run: async () => {
        throw new DefiniteFailure("503 from the provider");
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
    const server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    signalBefore("retry.granted", runtime, handle.runId);
    const { body } = await post(server, "/api/bulk", {
      action: "retry",
      by: "ada",
      note: "provider back",
      runs: [{ runId: handle.runId, basedOnVersion: version }],
    });
    const [result] = body.results as [Result];
    expect(result).toMatchObject({ done: false, code: "stale", version: null });
    expect(result.message).toContain(`version ${version}; it is at version ${version + 1} now`);
    const after = await types(runtime, handle.runId);
    expect(after.at(-1)).toBe("signal.received");
    expect(after).not.toContain("retry.granted");
  });

  it("refuses a bulk cancel of a waiting run as stale (accepted: false, stale: true): nothing written", async () => {
    const store = join(tempDir(), "journal.db");
    const agent = defineAgent({ name: "w", version: "1", run: async (turn) => turn.waitFor("approve") });
    const runtime = await openRuntime({ store, agents: [agent] });
    opened.push(() => runtime.close());
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "w", content: {} });
    await expect.poll(async () => (await types(runtime, handle.runId)).at(-1)).toBe("run.waiting");
    const version = (await runtime.events(handle.runId)).length;
    const server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    signalBefore("run.cancel-requested", runtime, handle.runId);
    const { body } = await post(server, "/api/bulk", {
      action: "cancel",
      by: "ada",
      note: "the user left",
      runs: [{ runId: handle.runId, basedOnVersion: version }],
    });
    const [result] = body.results as [Result];
    expect(result).toMatchObject({ done: false, code: "stale" });
    expect(result.message).toContain(`version ${version}; it is at version ${version + 1} now`);
    const after = await types(runtime, handle.runId);
    expect(after.at(-1)).toBe("signal.received");
    expect(after).not.toContain("run.cancel-requested");
    expect(after).not.toContain("run.cancelled");
  });

  it("reports a bulk stop that lost the race as stale, not internal", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    opened.push(() => runtime.close());
    const run = await heldRun(runtime, "once", "chat-1");
    const server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    signalBefore("decision.recorded", runtime, run.runId);
    const { body } = await post(server, "/api/bulk", {
      action: "stop",
      by: "ada",
      note: "outage",
      runs: [{ runId: run.runId, basedOnVersion: run.version }],
    });
    const [result] = body.results as [Result];
    expect(result).toMatchObject({ done: false, code: "stale", version: null });
    expect((await types(runtime, run.runId)).at(-1)).toBe("signal.received");
  });

  it("answers a single decision that lost the race 409 stale-decision, not 500", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    opened.push(() => runtime.close());
    const run = await heldRun(runtime, "once", "chat-1");
    const server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    signalBefore("decision.recorded", runtime, run.runId);
    const { status, body } = await post(server, `/api/runs/${run.runId}/decisions`, {
      basedOnVersion: run.version,
      decidedBy: "ada",
      decision: "stop",
      note: "outage",
    });
    expect(status).toBe(409);
    expect(body).toMatchObject({ error: { code: "stale-decision" } });
    expect((await types(runtime, run.runId)).at(-1)).toBe("signal.received");
  });
});
