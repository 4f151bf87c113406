import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { defineAgent, defineTool, openRuntime, type Runtime, serve } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

/*
 * Alerts (decision 0065) reach a real local HTTP server: a held run gives one alert, with ids,
 * codes and times and nothing secret; a webhook that is down gets it after retries, every attempt
 * recorded in the journal; attempts that run out leave it "failed" for the operator; two runtimes
 * on one PostgreSQL journal send it once.
 */

const tempDir = useTempDir();
const schemas = usePgSchemas();

beforeAll(async () => {
  await requirePg();
});
afterAll(async () => {
  await schemas.dropAll();
});

const SECRET = "sk-live-7f3a9c2e1b5d4a8f6e0c";

interface Received {
  readonly body: string;
  readonly headers: IncomingHttpHeaders;
}

/** A webhook receiver on a free port: answers `failFirst` requests with 503, then 204. */
const webhook = async (failFirst = 0) => {
  const received: Received[] = [];
  let requests = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    req.on("end", () => {
      requests += 1;
      if (requests <= failFirst) {
        res.writeHead(503).end("down");
        return;
      }
      received.push({ body, headers: req.headers });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return {
    url,
    received,
    get requests() {
      return requests;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

/** A tool that throws without proof of failure: its run is held `indefinite-failure`. */
const charge = defineTool({
  name: "charge",
  args: Schema.Struct({ card: Schema.String, apiKey: Schema.String }),
  run: async () => {
    throw new Error("connection reset after send");
  },
});
const billing = defineAgent({
  name: "billing",
  version: "3",
  run: async (turn) => turn.tool(charge, { card: "4242 4242 4242 4242", apiKey: SECRET }),
});

const until = async (what: string, check: () => boolean | Promise<boolean>, ms = 10_000) => {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

const open = (store: string, url: string, extra: Record<string, unknown> = {}, workerId?: string) =>
  openRuntime({
    store,
    agents: [billing],
    tools: [charge],
    secrets: { BILLING_KEY: SECRET },
    ...(workerId ? { workerId } : {}),
    alerts: { url, panelUrl: "http://127.0.0.1:4640", everyMs: 30, firstRetryMs: 40, ...extra },
  });

const holdOne = async (runtime: Runtime, chatId = "chat-9") => {
  const handle = await runtime.submit({ chatId, inputId: "m1", agent: "billing", content: { text: SECRET } });
  const result = await handle.result;
  expect(result.status).toBe("held");
  return handle.runId;
};

const engines = [
  { engine: "libSQL", store: () => join(tempDir(), "journal.db") },
  { engine: "PostgreSQL", store: () => pgUrl(schemas.fresh()) },
] as const;

describe.each(engines)("alerts on $engine", ({ store: makeStore }) => {
  it("a held run sends one alert, with its id, reason, agent, time and panel link, and nothing secret", async () => {
    const hook = await webhook();
    const store = makeStore();
    const runtime = await open(store, hook.url);
    try {
      const runId = await holdOne(runtime);
      await until("the alert", () => hook.received.length === 1);
      // More looks find the same alert recorded: nothing more is sent.
      await new Promise((r) => setTimeout(r, 300));
      expect(hook.requests).toBe(1);
      const [only] = hook.received;
      const alert = JSON.parse(only?.body ?? "{}");
      const row = await runtime.run(runId);
      expect(alert).toEqual({
        type: "holdfast.alert",
        id: `${runId}@${row?.version}`,
        kind: "held",
        runId,
        reason: "indefinite-failure",
        agent: "billing@3",
        at: row?.updatedAt,
        panelUrl: `http://127.0.0.1:4640/runs/${runId}`,
      });
      expect(only?.headers["idempotency-key"]).toBe(alert.id);
      expect(only?.headers["content-type"]).toBe("application/json");
      // No payload, no argument, no secret, masked or not.
      expect(only?.body).not.toContain(SECRET);
      expect(only?.body).not.toContain("4242");
      expect(only?.body).not.toContain("BILLING_KEY");
      expect(only?.body).not.toContain("chat-9");
      const journal = await openStore(store);
      try {
        const [recorded] = await journal.alerts();
        expect(recorded).toMatchObject({ key: alert.id, runId, kind: "held", attempts: 1, gaveUpAt: null });
        expect(recorded?.deliveredAt).not.toBeNull();
        expect(recorded?.tries).toEqual([expect.objectContaining({ ok: true, status: 204 })]);
      } finally {
        await journal.close();
      }
    } finally {
      await runtime.close();
      await hook.close();
    }
  });

  it("a webhook that is down gets the alert after retries, every attempt recorded", async () => {
    const hook = await webhook(3);
    const store = makeStore();
    const runtime = await open(store, hook.url);
    try {
      await holdOne(runtime);
      await until("the delivery", () => hook.received.length === 1);
      await new Promise((r) => setTimeout(r, 200));
      expect(hook.requests).toBe(4);
      const journal = await openStore(store);
      try {
        const [recorded] = await journal.alerts();
        expect(recorded?.attempts).toBe(4);
        expect(recorded?.tries.map((t) => t.status)).toEqual([503, 503, 503, 204]);
        // Backoff: each wait at least the one before it.
        const gaps = (recorded?.tries ?? []).slice(1).map((t, i) => t.at - (recorded?.tries[i]?.at ?? 0));
        expect(gaps[1]).toBeGreaterThanOrEqual(70);
        expect(gaps[2]).toBeGreaterThanOrEqual(150);
        expect(recorded?.deliveredAt).not.toBeNull();
        expect(await journal.alertCounts()).toEqual({ delivered: 1, pending: 0, failed: 0 });
      } finally {
        await journal.close();
      }
    } finally {
      await runtime.close();
      await hook.close();
    }
  });

  it("an alert whose attempts run out is kept as failed, with its last error", async () => {
    const hook = await webhook(1_000);
    const store = makeStore();
    const runtime = await open(store, hook.url, { maxAttempts: 3, firstRetryMs: 20 });
    try {
      const runId = await holdOne(runtime);
      const journal = await openStore(store);
      try {
        await until("the alert given up on", async () => (await journal.alertCounts()).failed === 1);
        const [recorded] = await journal.alerts({ undelivered: true });
        expect(recorded).toMatchObject({ runId, attempts: 3, deliveredAt: null, lastError: "HTTP 503" });
        expect(recorded?.gaveUpAt).not.toBeNull();
        await new Promise((r) => setTimeout(r, 200));
        expect(hook.requests).toBe(3);
      } finally {
        await journal.close();
      }
    } finally {
      await runtime.close();
      await hook.close();
    }
  });
});

describe("alerts from several processes on one PostgreSQL journal", () => {
  it("two runtimes looking at the same held run send one alert", async () => {
    const hook = await webhook();
    const store = pgUrl(schemas.fresh());
    const a = await open(store, hook.url, { everyMs: 10 }, "alerts-a");
    const b = await open(store, hook.url, { everyMs: 10 }, "alerts-b");
    try {
      await holdOne(a, "chat-a");
      await holdOne(b, "chat-b");
      await until("two alerts", () => hook.received.length === 2);
      await new Promise((r) => setTimeout(r, 500));
      expect(hook.requests).toBe(2);
      const ids = hook.received.map((r) => JSON.parse(r.body).id).sort();
      expect(new Set(ids).size).toBe(2);
    } finally {
      await a.close();
      await b.close();
      await hook.close();
    }
  });
});

describe("serve --notify-url and /metrics", () => {
  it("serve sends the alert with its own panel link, and /metrics reports runs, held age and alerts", async () => {
    const hook = await webhook(1);
    const store = join(tempDir(), "journal.db");
    const runtime = await openRuntime({
      store,
      agents: [billing],
      tools: [charge],
      secrets: { BILLING_KEY: SECRET },
    });
    const runId = await holdOne(runtime);
    await runtime.close();
    const server = await serve({
      store,
      port: 0,
      tokenFile: join(tempDir(), "token"),
      alerts: { url: hook.url, everyMs: 30, firstRetryMs: 30 },
    });
    try {
      await until("the alert", () => hook.received.length === 1);
      const alert = JSON.parse(hook.received[0]?.body ?? "{}");
      expect(alert.panelUrl).toBe(`${server.url}/runs/${runId}`);
      expect(hook.received[0]?.body).not.toContain(server.token.token);
      const scrape = (authorization?: string) =>
        server.app.request("/metrics", {
          headers: { host: `127.0.0.1:${server.port}`, ...(authorization ? { authorization } : {}) },
        });
      expect((await scrape()).status).toBe(401);
      const response = await scrape(`Bearer ${server.token.token}`);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
      const text = await response.text();
      const samples = parseExposition(text);
      expect(samples.get('holdfast_runs{status="held"}')).toBe(1);
      expect(samples.get('holdfast_runs{status="completed"}')).toBe(0);
      expect(samples.get("holdfast_runs_stalled")).toBe(0);
      expect(samples.get("holdfast_runs_waiting")).toBe(0);
      expect(samples.get("holdfast_held_oldest_age_seconds")).toBeGreaterThan(0);
      expect(samples.get('holdfast_alerts{state="delivered"}')).toBe(1);
      expect(samples.get("holdfast_alerts_undelivered")).toBe(0);
      // The API lists it with both attempts: the 503, then the delivery.
      const listed = await server.app.request("/api/alerts", {
        headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
      });
      expect(listed.status).toBe(200);
      const page = (await listed.json()) as { alerts: Array<Record<string, unknown>> };
      expect(page).toMatchObject({ delivered: 1, pending: 0, failed: 0 });
      expect(page.alerts).toHaveLength(1);
      expect(page.alerts[0]).toMatchObject({
        id: alert.id,
        runId,
        kind: "held",
        state: "delivered",
        alert,
        attempts: 2,
        tries: [
          { ok: false, status: 503, error: "HTTP 503" },
          { ok: true, status: 204 },
        ],
        nextAt: null,
        gaveUpAt: null,
      });
      const undelivered = await server.app.request("/api/alerts?undelivered=true", {
        headers: { host: `127.0.0.1:${server.port}`, authorization: `Bearer ${server.token.token}` },
      });
      expect(((await undelivered.json()) as { alerts: unknown[] }).alerts).toEqual([]);
    } finally {
      await server.close();
      await hook.close();
    }
  });
});

/**
 * Parse the text format strictly: every family has HELP then TYPE, every sample line is
 * `name{labels} value` of a declared family, and the text ends with a newline.
 */
const parseExposition = (text: string): Map<string, number> => {
  expect(text.endsWith("\n")).toBe(true);
  const samples = new Map<string, number>();
  const declared = new Set<string>();
  const lines = text.slice(0, -1).split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? "";
    const help = /^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$/.exec(line);
    if (help) {
      expect(lines[i + 1]).toBe(`# TYPE ${help[1]} gauge`);
      declared.add(help[1] ?? "");
      i += 1;
      continue;
    }
    const sample =
      /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*")*\})? (-?[0-9.e+]+|NaN)$/.exec(
        line,
      );
    expect(sample, `line ${i + 1}: ${line}`).not.toBeNull();
    expect(declared.has(sample?.[1] ?? "")).toBe(true);
    samples.set(`${sample?.[1]}${sample?.[2] ?? ""}`, Number(sample?.[3]));
  }
  return samples;
};

describe("an approval alert", () => {
  it("a tool call awaiting approval sends one approval alert naming the call, and nothing secret; once approved, nothing more", async () => {
    const hook = await webhook();
    const refund = defineTool({
      name: "refund",
      args: Schema.Struct({ apiKey: Schema.String, amount: Schema.Number }),
      approval: "required",
      run: async ({ amount }) => ({ refunded: amount }),
    });
    const desk = defineAgent({
      name: "desk",
      version: "1",
      run: async (turn) => turn.tool(refund, { apiKey: SECRET, amount: 5 }),
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [desk],
      tools: [refund],
      secrets: { BILLING_KEY: SECRET },
      alerts: { url: hook.url, everyMs: 30, firstRetryMs: 40 },
    });
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "m1", agent: "desk", content: null });
      expect(await handle.result).toMatchObject({ status: "waiting" });
      await until("the alert", () => hook.received.length === 1);
      const alert = JSON.parse(hook.received[0]!.body);
      expect(alert).toEqual({
        type: "holdfast.alert",
        id: expect.stringMatching(new RegExp(`^${handle.runId}@\\d+/approval$`)),
        kind: "approval",
        runId: handle.runId,
        reason: "awaiting-approval",
        callId: `${handle.runId}/0`,
        agent: "desk@1",
        at: expect.any(String),
      });
      expect(hook.received[0]!.body).not.toContain(SECRET);
      const version = (await runtime.events(handle.runId)).at(-1)!.version;
      await runtime.approve(handle.runId, 0, { by: "ada", basedOnVersion: version });
      await until(
        "the run to complete",
        async () => (await runtime.run(handle.runId))?.status === "completed",
      );
      await new Promise((r) => setTimeout(r, 300));
      expect(hook.requests).toBe(1);
    } finally {
      await runtime.close();
      await hook.close();
    }
  });
});
