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
import { foldRun } from "../../src/machines/index.js";
import { RunLaws } from "../../src/runtime/audit/laws.js";
import type { AnyToolDef } from "../../src/runtime/define.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

const fast = { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 };

/** A tool that fails definitely (with `details`) the first `failures` times, then answers. */
const flaky = (failures: number, retry: RetryPolicy, details: unknown = { statusCode: 503 }) => {
  let calls = 0;
  const tool = defineTool({
    name: "flaky",
    args: Schema.Struct({}),
    retry,
    run: async () => {
      calls++;
      if (calls <= failures) throw new DefiniteFailure(`refused (call ${calls})`, details);
      return `ok after ${calls}`;
    },
  });
  return { tool, calls: () => calls };
};

/** An agent that makes one call and returns its result, or the name of the error the call threw. */
const engines = ["libsql", "postgres"] as const;
let engine: (typeof engines)[number] = "libsql";

const freshPg = async () => {
  await requirePg();
  return pgUrl(schemas.fresh());
};

const open = async (
  tools: ReadonlyArray<AnyToolDef>,
  call: (turn: Parameters<ReturnType<typeof defineAgent>["run"]>[0]) => Promise<unknown>,
) =>
  openRuntime({
    store: engine === "postgres" ? await freshPg() : join(tempDir(), "j.db"),
    agents: [
      defineAgent({
        name: "caller",
        version: "1",
        run: async (turn) => {
          try {
            return await call(turn);
          } catch (error) {
            return { threw: (error as { _tag?: string })._tag ?? (error as Error).name };
          }
        },
      }),
    ],
    tools,
  });

const runOnce = async (runtime: Runtime) => {
  const run = await runtime.submit({ chatId: "c", inputId: "i", agent: "caller", content: {} });
  const result = await run.result;
  const events = (await runtime.events(run.runId)).map((e) => e.event);
  return { runId: run.runId, result, events };
};

const ofType = <T extends AnyEvent["type"]>(events: ReadonlyArray<AnyEvent>, type: T) =>
  events.filter((e): e is EventOf<T> => e.type === type);

describe.each(engines)("retry policies on %s", (name) => {
  beforeEach(() => {
    engine = name;
  });

  it("a bad policy is refused where it is declared, naming the value", async () => {
    const bad = (retry: unknown) => () =>
      defineTool({ name: "t", args: Schema.Struct({}), retry: retry as never, run: async () => 1 });
    expect(bad({ attempts: 0 })).toThrow(/attempts must be a whole number from 1 to 100/);
    expect(bad({ attempts: 2.5 })).toThrow(TypeError);
    expect(bad({ attempts: 3, backoff: { factor: 0.5 } })).toThrow(/backoff.factor must be a number ≥ 1/);
    expect(bad({ attempts: 3, backoff: { jitter: 2 } })).toThrow(/backoff.jitter/);
    expect(bad({ attempts: 3, backoff: { initialMs: 10, maxMs: 5 } })).toThrow(/maxMs \(5\) is below/);
    expect(bad({ attempts: 3, when: "always" })).toThrow(/when must be a function/);
    const runtime = await open([], (turn) =>
      turn.model("m", {}, async () => "x", { retry: { attempts: -1 } }),
    );
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "completed", output: { threw: "TypeError" } });
      expect(ofType(events, "call.intended")).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a tool retries the definite failures its policy accepts: each attempt recorded, its due time first", async () => {
    const { tool, calls } = flaky(2, { attempts: 3, backoff: fast });
    const runtime = await open([tool], (turn) => turn.tool(tool, {}));
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "completed", output: "ok after 3" });
      expect(calls()).toBe(3);
      expect(
        events.filter((e) => e.type.startsWith("call.") || e.type.startsWith("retry.")).map((e) => e.type),
      ).toEqual([
        "call.intended",
        "call.failed",
        "retry.scheduled",
        "call.intended",
        "call.failed",
        "retry.scheduled",
        "call.intended",
        "call.completed",
      ]);
      const intents = ofType(events, "call.intended");
      expect(intents.map((i) => i.attempt)).toEqual([1, 2, 3]);
      expect(intents[0]!.retry).toEqual({ attempts: 3, backoff: fast, when: "default" });
      expect(ofType(events, "retry.scheduled").map((s) => [s.attempt, s.reason, s.delayMs])).toEqual([
        [2, "backoff", 0],
        [3, "backoff", 0],
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("exhausted, or not accepted by `when`, the agent sees CallFailed as without a policy", async () => {
    const exhausted = flaky(5, { attempts: 2, backoff: fast });
    const runtime = await open([exhausted.tool], (turn) => turn.tool(exhausted.tool, {}));
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      expect(exhausted.calls()).toBe(2);
      expect(ofType(events, "retry.scheduled")).toHaveLength(1);
    } finally {
      await runtime.close();
    }
    const refused = flaky(5, { attempts: 3, backoff: fast, when: (f) => f.message.includes("never") });
    const second = await open([refused.tool], (turn) => turn.tool(refused.tool, {}));
    try {
      const { result, events } = await runOnce(second);
      expect(result).toMatchObject({ status: "completed", output: { threw: "CallFailed" } });
      expect(refused.calls()).toBe(1);
      expect(ofType(events, "call.intended")[0]!.retry?.when).toBe("custom");
      expect(ofType(events, "retry.scheduled")).toEqual([]);
    } finally {
      await second.close();
    }
  });

  it("an indefinite error is never retried by a tool's policy: the run is held", async () => {
    let calls = 0;
    const hanging = defineTool({
      name: "hanging",
      args: Schema.Struct({}),
      retry: { attempts: 5, backoff: fast },
      run: async () => {
        calls++;
        throw new Error("socket hang up");
      },
    });
    const runtime = await open([hanging], (turn) => turn.tool(hanging, {}));
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "held", reasons: [{ code: "indefinite-failure" }] });
      expect(calls).toBe(1);
      expect(ofType(events, "retry.scheduled")).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("a model call retries a retryable status by default, honours Retry-After, and never a 400", async () => {
    let calls = 0;
    const runtime = await open([], async (turn) => {
      const first = await turn.model(
        "limited",
        {},
        async () => {
          calls++;
          if (calls === 1)
            throw new DefiniteFailure("429 Too Many Requests", {
              statusCode: 429,
              responseHeaders: { "retry-after": "1" },
            });
          return "answer";
        },
        { retry: { attempts: 3, backoff: fast } },
      );
      try {
        await turn.model(
          "refused",
          {},
          async () => {
            throw new DefiniteFailure("400 Bad Request", { statusCode: 400 });
          },
          { retry: { attempts: 3, backoff: fast } },
        );
      } catch (error) {
        return { first, second: (error as { _tag?: string })._tag };
      }
      return { first };
    });
    try {
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({
        status: "completed",
        output: { first: "answer", second: "CallFailed" },
      });
      const scheduled = ofType(events, "retry.scheduled");
      expect(scheduled.map((s) => [s.callId.endsWith("/0"), s.attempt, s.reason, s.delayMs])).toEqual([
        [true, 2, "retry-after", 1000],
      ]);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });

  it("the machine and the audit refuse a retry beyond the recorded policy", async () => {
    const { tool } = flaky(5, { attempts: 2, backoff: fast });
    const runtime = await open([tool], (turn) => turn.tool(tool, {}));
    try {
      const { runId, events } = await runOnce(runtime);
      const beyond: AnyEvent = {
        type: "retry.scheduled",
        runId,
        callId: `${runId}/0`,
        attempt: 3,
        dueAt: new Date(0).toISOString(),
        delayMs: 0,
        reason: "backoff",
      };
      const before = events.slice(0, events.findLastIndex((e) => e.type === "call.failed") + 1);
      expect(foldRun(before).snapshot.can(beyond)).toBe(false);
      const laws = new RunLaws();
      const breaches = [...before, beyond].map((e) => laws.check(e)).filter((b) => b !== null);
      expect(breaches).toEqual([
        expect.objectContaining({
          kind: "replay-without-authorization",
          detail: expect.stringContaining("the recorded policy allows 2 attempt(s)"),
        }),
      ]);
    } finally {
      await runtime.close();
    }
  });
});
