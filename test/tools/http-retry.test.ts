import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeHttpTool } from "../../src/adapters/integrations/tools/httpTool.js";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import { defineAgent, openRuntime, type RetryPolicy } from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { scriptedServer } from "../support/scripted-server.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const noLookup = async () => ({ found: "unknown" as const, reason: "no status service in this test" });
const fast = { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 };
const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

const engines = ["libsql", "postgres"] as const;

/** One run of an agent that POSTs once to `url` with the built-in http tool under `retry`. */
const postOnce = async (
  engine: (typeof engines)[number],
  url: string,
  retry: RetryPolicy,
  request: { readonly target?: string; readonly headers?: Record<string, string> } = {},
) => {
  const http = makeHttpTool({ lookup: noLookup, retry });
  let store = join(tempDir(), "j.db");
  if (engine === "postgres") {
    await requirePg();
    store = pgUrl(schemas.fresh());
  }
  const runtime = await openRuntime({
    store,
    agents: [
      defineAgent({
        name: "poster",
        version: "1",
        run: async (turn) => {
          try {
            return await turn.tool(http, {
              url: request.target ?? `${url}/orders`,
              body: { item: "book" },
              ...(request.headers ? { headers: request.headers } : {}),
            });
          } catch (error) {
            return { threw: (error as { _tag?: string })._tag };
          }
        },
      }),
    ],
    tools: [http],
  });
  try {
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "poster", content: {} });
    const result = await handle.result;
    const recorded = await runtime.events(handle.runId);
    return { store, result, recorded, events: recorded.map((e) => e.event), audit: await runtime.audit() };
  } finally {
    await runtime.close();
  }
};

describe.each(engines)(
  "the built-in http tool with a retry policy, against a real server, on %s",
  (engine) => {
    it("a 429 then a 200 completes with 2 attempts recorded, each with its own idempotency key, after the server's Retry-After", async () => {
      const server = await scriptedServer(
        [{ status: 429, headers: { "retry-after": "1" }, body: { error: "slow down" } }],
        () => ({ status: 200, body: { order: 7 } }),
      );
      try {
        const { result, recorded, events, audit } = await postOnce(engine, server.url, {
          attempts: 3,
          backoff: fast,
        });
        expect(result).toMatchObject({ status: "completed", output: { status: 200, body: { order: 7 } } });
        expect(server.received().map((r) => r.headers["idempotency-key"])).toEqual(
          ofType(events, "call.intended").map((i) => i.idempotencyKey),
        );
        expect(server.received()).toHaveLength(2);
        expect(
          events.filter((e) => e.type.startsWith("call.") || e.type === "retry.scheduled").map((e) => e.type),
        ).toEqual(["call.intended", "call.failed", "retry.scheduled", "call.intended", "call.completed"]);
        expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2]);
        expect(ofType(events, "call.failed")[0]).toMatchObject({
          definite: true,
          error: { name: "DefiniteFailure", details: { status: 429, retryAfter: "1" } },
        });
        const [scheduled] = ofType(events, "retry.scheduled");
        expect(scheduled).toMatchObject({ attempt: 2, reason: "retry-after", delayMs: 1000 });
        const failedAt = recorded.find((e) => e.event.type === "call.failed")!.recordedAt;
        expect(Date.parse(scheduled!.dueAt) - Date.parse(failedAt)).toBeGreaterThanOrEqual(1000);
        expect(server.received()[1]!.at).toBeGreaterThanOrEqual(Date.parse(scheduled!.dueAt));
        expect(audit.findings).toEqual([]);
      } finally {
        await server.close();
      }
    });

    it("a 400 is final under the tool's default `when`, and a 502 is never retried by the policy: it may have acted", async () => {
      const server = await scriptedServer(
        [{ status: 400, body: { error: "bad item" } }, { status: 502 }],
        () => ({ status: 200, body: {} }),
      );
      try {
        const refused = await postOnce(engine, server.url, { attempts: 3, backoff: fast });
        expect(refused.result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
        expect(ofType(refused.events, "retry.scheduled")).toEqual([]);
        const gateway = await postOnce(engine, server.url, { attempts: 3, backoff: fast });
        expect(gateway.result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
        expect(ofType(gateway.events, "retry.scheduled")).toEqual([]);
        expect(server.received()).toHaveLength(2);
      } finally {
        await server.close();
      }
    });

    it("a refusal for ever: exactly `attempts` requests, then CallFailed", async () => {
      const server = await scriptedServer([], () => ({ status: 429, body: { error: "slow down" } }));
      try {
        const { result, events, audit } = await postOnce(engine, server.url, { attempts: 3, backoff: fast });
        expect(result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
        expect(server.received()).toHaveLength(3);
        expect(ofType(events, "call.intended").map((i) => i.attempt)).toEqual([1, 2, 3]);
        expect(ofType(events, "retry.scheduled")).toHaveLength(2);
        expect(audit.findings).toEqual([]);
      } finally {
        await server.close();
      }
    });

    it("the default `when` retries 408, 409 and 425", async () => {
      for (const status of [408, 409, 425]) {
        const server = await scriptedServer([{ status }], () => ({ status: 200, body: { ok: status } }));
        try {
          const { result, events } = await postOnce(engine, server.url, { attempts: 2, backoff: fast });
          expect(result, String(status)).toMatchObject({ status: "completed", output: { status: 200 } });
          expect(server.received(), String(status)).toHaveLength(2);
          expect(ofType(events, "call.failed")[0]!.error.details, String(status)).toMatchObject({ status });
        } finally {
          await server.close();
        }
      }
    });

    it("a refused connection is retried; an invalid URL or a port fetch refuses fails once, for good", async () => {
      const closed = await scriptedServer([], () => ({ status: 200 }));
      const url = closed.url;
      await closed.close();
      const refused = await postOnce(engine, url, { attempts: 2, backoff: fast });
      expect(refused.result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      expect(ofType(refused.events, "call.intended")).toHaveLength(2);
      expect(ofType(refused.events, "call.failed")[0]!.error.details).toMatchObject({
        sent: false,
        reason: "ECONNREFUSED",
      });
      for (const target of ["http://exa mple.invalid/orders", "http://127.0.0.1:6000/orders"]) {
        const final = await postOnce(engine, url, { attempts: 2, backoff: fast }, { target });
        expect(final.result, target).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
        expect(ofType(final.events, "call.intended"), target).toHaveLength(1);
        expect(ofType(final.events, "call.failed")[0]!.error.details, target).toMatchObject({ sent: false });
      }
    });

    it("a refusal's body is read and stored up to 64 KiB, marked truncated: a 5 MiB 429 three times", async () => {
      const big = "x".repeat(5 * 1024 * 1024);
      const server = await scriptedServer([], () => ({
        status: 429,
        headers: { "content-type": "text/plain" },
        raw: big,
      }));
      try {
        const { events } = await postOnce(engine, server.url, { attempts: 3, backoff: fast });
        const failed = ofType(events, "call.failed");
        expect(failed).toHaveLength(3);
        for (const f of failed) {
          const details = f.error.details as { body: string; truncated: boolean; bodyLimitBytes: number };
          expect(details).toMatchObject({ status: 429, truncated: true, bodyLimitBytes: 65_536 });
          expect(details.body).toBe("x".repeat(65_536));
        }
        expect(JSON.stringify(events).length).toBeLessThan(400_000);
      } finally {
        await server.close();
      }
    });

    it("a credential masked by its header name in the args is masked where the refusal echoes it (law 8)", async () => {
      const key = "k3y-unregistered-0123456789";
      const server = await scriptedServer([], (request) => ({
        status: 401,
        headers: { "content-type": "text/plain" },
        raw: `Incorrect API key provided: ${String(request.headers["x-api-key"])}`,
      }));
      try {
        const { store, recorded, events } = await postOnce(
          engine,
          server.url,
          { attempts: 2, backoff: fast },
          { headers: { "X-Api-Key": key } },
        );
        expect(server.received()[0]!.headers["x-api-key"]).toBe(key);
        expect(ofType(events, "call.intended")[0]!.args).toMatchObject({
          headers: { "X-Api-Key": "«secret:X-Api-Key»" },
        });
        expect(ofType(events, "call.failed")[0]!.error.details).toMatchObject({
          status: 401,
          body: "Incorrect API key provided: «secret:X-Api-Key»",
        });
        expect(JSON.stringify(recorded)).not.toContain(key);
        if (engine === "libsql")
          for (const file of [store, `${store}-wal`])
            if (existsSync(file)) expect(readFileSync(file).includes(key), file).toBe(false);
      } finally {
        await server.close();
      }
    });
  },
);
