import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeHttpTool } from "../../src/adapters/tools/httpTool.js";
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
const postOnce = async (engine: (typeof engines)[number], url: string, retry: RetryPolicy) => {
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
            return await turn.tool(http, { url: `${url}/orders`, body: { item: "book" } });
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
    return { result, recorded, events: recorded.map((e) => e.event), audit: await runtime.audit() };
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
  },
);
