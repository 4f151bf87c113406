import { join } from "node:path";
import { Schema } from "effect";
import { afterEach, describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  type Server,
  serve,
} from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { heldRun, openPanelRuntime } from "./browser/runs.js";
import { type Given, givenServer } from "./given.js";

/**
 * The bulk action's confirm page and results (decision 0081) against the real journal: what the
 * page says before the click is what the result says; the limit is checked before any run is read;
 * a write that went through is reported recorded whatever the reads after it do.
 */
const tempDir = useTempDir();

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

/** Replace a method of the real libSQL journal for this test (restored after it). */
const around = <K extends "searchRuns" | "projection" | "append">(
  name: K,
  wrap: (
    original: (...args: unknown[]) => Promise<unknown>,
  ) => (this: unknown, ...args: unknown[]) => Promise<unknown>,
): void => {
  const proto = LibsqlJournal.prototype as unknown as Record<K, (...args: unknown[]) => Promise<unknown>>;
  const original = proto[name];
  proto[name] = wrap(original);
  opened.push(async () => {
    proto[name] = original;
  });
};

const browser = async (g: Given) => {
  const session = await g.login("ada");
  return (path: string, body?: URLSearchParams) => {
    body?.append("_csrf", session.csrf);
    return g.request(path, {
      ...(body ? { method: "POST", body: body.toString() } : {}),
      auth: "none",
      headers: {
        host: g.panelHost,
        origin: `http://${g.panelHost}`,
        cookie: session.cookie,
        "content-type": "application/x-www-form-urlencoded",
      },
    });
  };
};

describe("the bulk confirm page", () => {
  it("refuses more than 100 runs, or a run twice, before reading any run; the page says the limit", async () => {
    const g = await givenServer(tempDir());
    opened.push(() => g.close());
    const run = await g.submit("flaky");
    const browse = await browser(g);
    let reads = 0;
    around(
      "projection",
      (original) =>
        async function (this: unknown, ...args) {
          reads++;
          return original.apply(this, args);
        },
    );
    const many = new URLSearchParams({ action: "stop" });
    for (let i = 0; i < 101; i++) many.append("run", `run-${i}@3`);
    const tooMany = await browse("/bulk", many);
    expect(tooMany.status).toBe(422);
    expect(await tooMany.text()).toContain("101 runs selected; at most 100 at once");
    const twice = new URLSearchParams({ action: "stop" });
    twice.append("run", `${run.runId}@${run.version}`);
    twice.append("run", `${run.runId}@${run.version}`);
    const refused = await browse("/bulk", twice);
    expect(refused.status).toBe(422);
    expect(await refused.text()).toContain(`run ${run.runId} is selected twice`);
    const huge = new URLSearchParams({ action: "stop", note: "x".repeat(70 * 1024) });
    const tooLarge = await browse("/bulk", huge);
    expect(tooLarge.status).toBe(413);
    expect(await tooLarge.text()).toContain("the bulk form is larger than the 64 KiB");
    expect(reads).toBe(0);
    const one = new URLSearchParams({ action: "stop" });
    one.append("run", `${run.runId}@${run.version}`);
    const confirm = await browse("/bulk", one);
    expect(confirm.status).toBe(200);
    expect(await confirm.text()).toContain("at most 100 runs at once");
  });

  it("says a retry is refused for a run held on a call in doubt (its caught failed call is no target), as the result does", async () => {
    const g = await givenServer(tempDir());
    opened.push(() => g.close());
    const charge = defineTool({
      name: "charge2",
      args: Schema.Struct({}),
      run: async () => {
        throw new DefiniteFailure("declined");
      },
    });
    const send = defineTool({
      name: "send2",
      args: Schema.Struct({}),
      run: async () => {
        throw new Error("socket hang up");
      },
    });
    const agent = defineAgent({
      name: "caught",
      version: "1",
      run: async (turn) => {
        try {
          await turn.tool(charge, {});
        } catch {
          // handled by the agent: not what the run is held for
        }
        return turn.tool(send, {});
      },
    });
    const runtime = await openRuntime({ store: g.db, agents: [agent], tools: [charge, send] });
    opened.push(() => runtime.close());
    const handle = await runtime.submit({ chatId: "c-caught", inputId: "i", agent: "caught", content: {} });
    expect((await handle.result).status).toBe("held");
    const events = await runtime.events(handle.runId);
    const version = events.length;
    const inDoubt = events.flatMap((e) =>
      e.event.type === "call.intended" && e.event.name === "send2" ? [e.event.callId] : [],
    );
    const browse = await browser(g);
    const form = new URLSearchParams({ action: "retry" });
    form.append("run", `${handle.runId}@${version}`);
    const page = await (await browse("/bulk", form)).text();
    const said = `call(s) in doubt (${inDoubt[0]}) need a decision first, not a retry`;
    expect(page).toContain(said);
    expect(page).not.toContain("one more attempt for");
    const reply = await g.json("/api/bulk", "POST", {
      action: "retry",
      by: "ada",
      note: "provider back",
      runs: [{ runId: handle.runId, basedOnVersion: version }],
    });
    const [result] = ((await reply.json()) as { results: Array<{ done: boolean; message: string }> }).results;
    expect(result).toMatchObject({ done: false });
    expect(result!.message).toContain(said);
    expect((await runtime.events(handle.runId)).length).toBe(version);
  });
});

describe("the runs list's live stream", () => {
  it("starts before the list is drawn: a change committed while the page renders is not missed", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    opened.push(() => runtime.close());
    const run = await heldRun(runtime, "once", "chat-1");
    const server: Server = await serve({ store, port: 0, tokenFile: join(tempDir(), "token") });
    opened.push(() => server.close());
    const panelHost = new URL(server.panelUrl).host;
    const login = await server.app.request("/login", {
      method: "POST",
      headers: {
        host: panelHost,
        origin: `http://${panelHost}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token: server.token.token, name: "ada" }).toString(),
    });
    const cookie = login.headers.get("set-cookie")!.split(";")[0]!;
    let moved = false;
    around(
      "searchRuns",
      (original) =>
        async function (this: unknown, ...args) {
          const query = args[0] as { limit?: number };
          // (runsPage asks for one row more than it shows: 2 for the newest change.)
          // The list's own read (not the one-row read of the newest change): the run is stopped now.
          if (!moved && (query.limit ?? 0) > 2) {
            moved = true;
            await runtime.decide(run.runId, {
              basedOnVersion: run.version,
              decidedBy: "bob",
              decision: "stop",
              note: "meanwhile",
            });
          }
          return original.apply(this, args);
        },
    );
    const page = await (await server.app.request("/", { headers: { host: panelHost, cookie } })).text();
    expect(moved).toBe(true);
    const after = Number(/\/panel\/live\?after=(\d+)/.exec(page)?.[1]);
    const stopped = (await runtime.events(run.runId)).at(-1)!;
    expect(stopped.event.type).toBe("run.stopped");
    expect(after).toBeLessThan(stopped.position);
  });
});

describe("a bulk action whose write went through", () => {
  it("is reported recorded when the reads after it fail, saying it could not read what follows", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    const run = await heldRun(runtime, "once", "chat-1");
    await runtime.close();
    const server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    let written = false;
    around(
      "append",
      (original) =>
        async function (this: unknown, ...args) {
          const result = await original.apply(this, args);
          const request = args[0] as { events: ReadonlyArray<{ type: string }> };
          if (request.events.some((e) => e.type === "decision.recorded")) written = true;
          return result;
        },
    );
    around(
      "projection",
      (original) =>
        async function (this: unknown, ...args) {
          if (written) throw new Error("the disk went away");
          return original.apply(this, args);
        },
    );
    const reply = await fetch(`${server.url}/api/bulk`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
      body: JSON.stringify({
        action: "stop",
        by: "ada",
        note: "outage",
        runs: [{ runId: run.runId, basedOnVersion: run.version }],
      }),
    });
    const body = (await reply.json()) as {
      done: number;
      results: Array<{ done: boolean; code: string; message: string; version: number | null }>;
    };
    expect(body.done).toBe(1);
    expect(body.results[0]).toMatchObject({ done: true, code: "recorded", version: run.version + 2 });
    expect(body.results[0]!.message).toContain("could not read what follows");
  });
});
