import { join } from "node:path";
import { Schema } from "effect";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import type { AnyEvent, EventOf } from "../../src/events/index.js";
import {
  DefiniteFailure,
  defineAgent,
  defineTool,
  openRuntime,
  type RetryPolicy,
  type Runtime,
} from "../../src/index.js";
import { RunLaws } from "../../src/runtime/audit/laws.js";
import type { AnyToolDef } from "../../src/runtime/define.js";
import { nextDue, parseRetryAfter, parseRetryAfterMs, retryAfterMs } from "../../src/runtime/retry.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const NOW = Date.parse("2026-12-04T12:00:00Z");
const policy = {
  attempts: 3,
  backoff: { initialMs: 5_000, maxMs: 60_000, factor: 2, jitter: 0 },
  when: "default",
} as const;

describe("Retry-After parsed as RFC 9110 §10.2.3 says", () => {
  it("delay-seconds: digits only", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter(" 0 ", NOW)).toBe(0);
    expect(parseRetryAfter("007", NOW)).toBe(7_000);
  });

  it("an HTTP-date in the future, in the past, and in each of the three forms", () => {
    expect(parseRetryAfter("Fri, 04 Dec 2026 12:00:30 GMT", NOW)).toBe(30_000);
    expect(parseRetryAfter("Fri, 04 Dec 2026 11:00:00 GMT", NOW)).toBe(0);
    expect(parseRetryAfter("Friday, 04-Dec-26 12:01:00 GMT", NOW)).toBe(60_000);
    expect(parseRetryAfter("Fri Dec  4 12:00:10 2026", NOW)).toBe(10_000);
  });

  it("anything else is ignored: a fraction, a sign, junk, a date V8 would guess at", () => {
    for (const bad of [
      "1.5",
      "-5",
      "+120",
      "1e3",
      "soon",
      "",
      "2026-12-05",
      "Fri, 4 Dec 2026 12:00:30",
      "12 Dec",
    ])
      expect(parseRetryAfter(bad, NOW), bad).toBeUndefined();
  });

  it("a number (a tool's own details) counts when finite and ≥ 0, in seconds", () => {
    expect(parseRetryAfter(1.5, NOW)).toBe(1_500);
    expect(parseRetryAfter(-1, NOW)).toBeUndefined();
    expect(parseRetryAfter(Number.NaN, NOW)).toBeUndefined();
    expect(parseRetryAfter(Number.POSITIVE_INFINITY, NOW)).toBeUndefined();
  });

  it("retry-after-ms: a non-negative decimal, else ignored", () => {
    expect(parseRetryAfterMs("1500")).toBe(1_500);
    expect(parseRetryAfterMs("1500.5")).toBe(1_500.5);
    for (const bad of ["-1", "+5", "abc", "1e3", ""]) expect(parseRetryAfterMs(bad), bad).toBeUndefined();
  });

  it("retry-after-ms beats Retry-After; a bad retry-after-ms leaves Retry-After to decide", () => {
    const headers = (h: Record<string, string>) => ({ details: { responseHeaders: h } });
    expect(retryAfterMs(headers({ "retry-after-ms": "250", "Retry-After": "9" }), NOW)).toBe(250);
    expect(retryAfterMs(headers({ "retry-after-ms": "-250", "Retry-After": "9" }), NOW)).toBe(9_000);
  });

  it("nextDue: a bad value means the backoff, not 'now'", () => {
    for (const bad of ["1.5", "-5", "+120"])
      expect(nextDue(policy, 1, new DefiniteFailure("429", { retryAfter: bad }), NOW), bad).toEqual({
        delayMs: 5_000,
        reason: "backoff",
      });
    expect(nextDue(policy, 1, new DefiniteFailure("429", { retryAfter: -1 }), NOW)).toEqual({
      delayMs: 5_000,
      reason: "backoff",
    });
  });

  it("nextDue: a wait up to maxRetryAfterMs (default 5 min) is believed, a longer one refused and named", () => {
    expect(nextDue(policy, 1, new DefiniteFailure("429", { retryAfter: "300" }), NOW)).toEqual({
      delayMs: 300_000,
      reason: "retry-after",
    });
    for (const huge of [
      "301",
      "3000000",
      "99999999999999",
      `1${"0".repeat(400)}`,
      "Fri, 31 Dec 9999 23:59:59 GMT",
    ]) {
      const due = nextDue(policy, 1, new DefiniteFailure("429", { retryAfter: huge }), NOW);
      expect(due, huge).toMatchObject({ refused: expect.stringContaining("maxRetryAfterMs (300000 ms)") });
    }
    expect(
      nextDue({ ...policy, maxRetryAfterMs: 1_000 }, 1, new DefiniteFailure("429", { retryAfter: "2" }), NOW),
    ).toEqual({ askedMs: 2_000, refused: expect.stringContaining("asked to wait 2000 ms (2 s)") });
  });
});

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());
const engines = ["libsql", "postgres"] as const;
let engine: (typeof engines)[number] = "libsql";

const flaky = (retry: RetryPolicy, details: unknown) => {
  let calls = 0;
  const tool = defineTool({
    name: "flaky",
    args: Schema.Struct({}),
    retry,
    run: async () => {
      calls++;
      if (calls === 1) throw new DefiniteFailure("rate limited", details);
      return "ok";
    },
  });
  return { tool, calls: () => calls };
};

const storeFor = async () => {
  if (engine === "libsql") return join(tempDir(), "j.db");
  await requirePg();
  return pgUrl(schemas.fresh());
};

const open = async (tools: ReadonlyArray<AnyToolDef>) =>
  openRuntime({
    store: await storeFor(),
    agents: [
      defineAgent({
        name: "caller",
        version: "1",
        run: async (turn) => {
          try {
            return await turn.tool(tools[0] as never, {});
          } catch (error) {
            return {
              threw: (error as { _tag?: string })._tag ?? (error as Error).name,
              message: (error as Error).message,
            };
          }
        },
      }),
    ],
    tools,
  });

const runOnce = async (runtime: Runtime) => {
  const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "caller", content: {} });
  const result = await run.result;
  const recorded = await runtime.events(run.runId);
  return { runId: run.runId, result, recorded, events: recorded.map((e) => e.event) };
};

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

describe.each(engines)("a Retry-After the policy does not believe, on %s", (name) => {
  beforeEach(() => {
    engine = name;
  });

  for (const retryAfter of ["3000000", "99999999999999", "Fri, 31 Dec 9999 23:59:59 GMT"])
    it(`Retry-After: ${retryAfter} is not waited for: CallFailed naming the wait, no retry scheduled`, async () => {
      const { tool, calls } = flaky({ attempts: 3 }, { status: 429, retryAfter });
      const runtime = await open([tool]);
      try {
        const { result, events } = await runOnce(runtime);
        expect(result).toMatchObject({
          status: "completed",
          output: { threw: "CallFailed" },
        });
        expect(calls()).toBe(1);
        expect(ofType(events, "retry.scheduled")).toEqual([]);
        expect(ofType(events, "call.failed")[0]!.error.message).toMatch(
          /rate limited \(not retried: it asked to wait .* more than the retry policy's maxRetryAfterMs \(300000 ms\)\)/,
        );
        expect((await runtime.audit()).findings).toEqual([]);
      } finally {
        await runtime.close();
      }
    });

  it("a declared maxRetryAfterMs is recorded in the intent and believed up to its value", async () => {
    const { tool, calls } = flaky({ attempts: 2, maxRetryAfterMs: 2_000 }, { status: 429, retryAfter: "1" });
    const runtime = await open([tool]);
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "completed", output: "ok" });
      expect(calls()).toBe(2);
      expect(ofType(events, "call.intended")[0]!.retry).toMatchObject({ maxRetryAfterMs: 2_000 });
      expect(ofType(events, "retry.scheduled").map((s) => [s.reason, s.delayMs])).toEqual([
        ["retry-after", 1_000],
      ]);
    } finally {
      await runtime.close();
    }
  });

  it("the audit finds a policy attempt intended before its retry.scheduled's dueAt (a forged log)", async () => {
    const { tool } = flaky({ attempts: 2, backoff: { initialMs: 0, maxMs: 0 } }, { status: 429 });
    const runtime = await open([tool]);
    try {
      const { recorded } = await runOnce(runtime);
      const check = (log: typeof recorded) => {
        const laws = new RunLaws();
        return log.map((r) => laws.check(r.event, r.recordedAt)).filter((b) => b !== null);
      };
      expect(check(recorded)).toEqual([]);
      // The due time an hour after the attempt that the log says started.
      const forged = recorded.map((r) =>
        r.event.type === "retry.scheduled"
          ? {
              ...r,
              event: { ...r.event, dueAt: new Date(Date.parse(r.recordedAt) + 3_600_000).toISOString() },
            }
          : r,
      );
      expect(check(forged)).toEqual([
        expect.objectContaining({
          kind: "retry-before-due",
          detail: expect.stringMatching(/attempt 2 of .* was intended at/),
        }),
      ]);
    } finally {
      await runtime.close();
    }
  });
});
