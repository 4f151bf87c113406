import { join } from "node:path";
import { Schema } from "effect";
import { expect } from "vitest";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openReader,
  openRuntime,
  type Runtime,
  type Server,
  serve,
} from "../../src/index.js";

/**
 * A journal with held runs and a server on it, in this process:
 *  - `pair` runs: two calls (`charge` A, `notify` B) in doubt — each tool threw without proof;
 *  - `flaky` runs: a `deploy` call failed definitely and the agent did not handle it (a retry grant applies).
 * `effects` is the outside witness: every real effect of a tool, in order. `failing` says which
 * still fail; clear it before a decision lets the run go on.
 */
export const givenServer = async (dir: string, options: { readonly embedded?: boolean } = {}) => {
  const db = join(dir, "journal.db");
  const effects: string[] = [];
  const failing = new Set(["A", "B", "deploy"]);
  const effect = (label: "A" | "B") =>
    defineTool({
      name: label === "A" ? "charge" : "notify",
      args: Schema.Struct({ amount: Schema.optional(Schema.Number) }),
      result: Schema.Struct({ done: Schema.String }),
      ...(label === "B"
        ? {
            probe: () => ({ server: "mail", version: "2.1.0", annotations: { readOnlyHint: false } }),
            checkHint: (_args: unknown, { idempotencyKey }: { idempotencyKey: string }) =>
              `the mail server's log for message id ${idempotencyKey}`,
          }
        : {}),
      run: async () => {
        effects.push(label);
        if (failing.has(label)) throw new Error(`${label}: connection reset after send`);
        return { done: label };
      },
    });
  const charge = effect("A");
  const notify = effect("B");
  const deploy = defineTool({
    name: "deploy",
    args: Schema.Struct({}),
    run: async () => {
      effects.push("deploy");
      if (failing.has("deploy")) throw new DefiniteFailure("the registry refused the image (403)");
      return { deployed: true };
    },
  });
  const pair = defineAgent({
    name: "pair",
    version: "1",
    run: async (turn) => turn.all([() => turn.tool(charge, { amount: 5 }), () => turn.tool(notify, {})]),
  });
  const flaky = defineAgent({
    name: "flaky",
    version: "1",
    run: async (turn) => turn.tool(deploy, {}),
  });
  const runtime = await openRuntime({ store: db, agents: [pair, flaky], tools: [charge, notify, deploy] });
  let inputs = 0;
  const submit = async (agent: "pair" | "flaky", chatId = `chat-${agent}-${++inputs}`) => {
    const run = await runtime.submit({ chatId, inputId: `input-${++inputs}`, agent, content: null });
    const result = await run.result;
    expect(result.status).toBe("held");
    return { runId: run.runId, chatId, version: (await runtime.events(run.runId)).length };
  };
  const server: Server = await serve({
    store: db,
    port: 0,
    tokenFile: join(dir, "token"),
    ...(options.embedded === false ? {} : { runtime }),
    live: { pollMs: 20, heartbeatMs: 1000 },
  });
  const host = `127.0.0.1:${server.port}`;
  /** The panel's own host name: browser sessions work only there. */
  const panelHost = new URL(server.panelUrl).host;
  const token = server.token.token;

  /** A request to the app in process, as a client of this server would send it. */
  const request = (path: string, init: RequestInit & { readonly auth?: "token" | "none" | string } = {}) => {
    const headers = new Headers(init.headers);
    if (!headers.has("host")) headers.set("host", host);
    const auth = init.auth ?? "token";
    if (auth === "token") headers.set("authorization", `Bearer ${token}`);
    else if (auth !== "none") headers.set("authorization", auth);
    return server.app.request(path, { ...init, headers });
  };
  const json = (
    path: string,
    method: string,
    body: unknown,
    init: RequestInit & { readonly auth?: string } = {},
  ) =>
    request(path, {
      ...init,
      method,
      headers: { "content-type": "application/json", ...(init.headers as Record<string, string>) },
      body: JSON.stringify(body),
    });

  /** The journal's head digest and event count, read by a separate read-only open. */
  const head = async () => {
    const reader = await openReader({ store: db });
    try {
      const report = await reader.audit();
      return { digest: report.headDigest, events: report.events };
    } finally {
      await reader.close();
    }
  };

  /** Sign in as a browser would (on the panel's origin): the session cookie and the page's CSRF token. */
  const login = async (name = "ada") => {
    const response = await request("/login", {
      method: "POST",
      auth: "none",
      headers: {
        host: panelHost,
        origin: `http://${panelHost}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ token, name }).toString(),
    });
    expect(response.status).toBe(303);
    const cookie = response.headers.get("set-cookie")?.split(";")[0];
    expect(cookie).toMatch(/^holdfast_session=/);
    const page = await (
      await request("/audit", { auth: "none", headers: { host: panelHost, cookie: cookie! } })
    ).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1];
    expect(csrf).toBeTruthy();
    return { cookie: cookie!, csrf: csrf! };
  };

  return {
    db,
    runtime: runtime as Runtime,
    server,
    host,
    panelHost,
    token,
    effects,
    failing,
    submit,
    request,
    json,
    head,
    login,
    close: async () => {
      await server.close();
      await runtime.close();
    },
  };
};

export type Given = Awaited<ReturnType<typeof givenServer>>;
