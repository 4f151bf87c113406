import { join } from "node:path";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { Schema } from "effect";
import { describe, expect, it, vi } from "vitest";
import { DefiniteFailure, defineAgent, defineTool, OutcomeUnknown, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { childrenOf, runSpans, useInMemoryTracing } from "./support.js";

const exporter = useInMemoryTracing();
const tempDir = useTempDir();

const CARD = "4111-1111-SECRET-7731";

/** A payment whose first attempt times out (in doubt: the run is held), and which succeeds after. */
const makeCharge = (failures = 1) => {
  let calls = 0;
  return defineTool({
    name: "charge",
    args: Schema.Struct({ card: Schema.String, amount: Schema.Number }),
    run: async ({ card, amount }) => {
      calls += 1;
      if (calls <= failures) throw new Error(`timeout charging ${card}`);
      return { receipt: `r-${amount}`, card };
    },
  });
};

const lookup = defineTool({
  name: "lookup",
  args: Schema.Struct({ card: Schema.String }),
  run: async ({ card }) => ({ owner: "ada", card }),
});

const shop = defineAgent({
  name: "shop",
  version: "3",
  run: async (turn, input: { card: string }) => {
    const owner = await turn.tool("lookup", { card: input.card });
    try {
      return { owner, receipt: await turn.tool("charge", { card: input.card, amount: 42 }) };
    } catch (error) {
      if (error instanceof OutcomeUnknown) return { owner, receipt: null };
      throw error;
    }
  },
});

const open = (store: string, failures = 1) =>
  openRuntime({ store, agents: [shop], tools: [lookup, makeCharge(failures)], secrets: { card: CARD } });

/** Every attribute value of every span and span event, as text. */
const attributeTexts = () =>
  exporter
    .getFinishedSpans()
    .flatMap((span) => [
      span.name,
      ...Object.values(span.attributes).map(String),
      ...span.events.flatMap((e) => [e.name, ...Object.values(e.attributes ?? {}).map(String)]),
    ]);

describe("tracing: spans derived from the committed events", () => {
  it("a run with a held call, a decision and a resume: run spans under the caller's span, a span per call attempt with its outcome", async () => {
    const runtime = await open(join(tempDir(), "j.db"));
    const tracer = trace.getTracer("test");
    const { runId, callerSpanId, traceId } = await tracer.startActiveSpan(
      "handle request",
      async (caller) => {
        const handle = await runtime.submit({
          chatId: "chat-7",
          inputId: "in-1",
          agent: "shop",
          content: { card: CARD },
        });
        expect(await handle.result).toMatchObject({ status: "held" });
        const version = (await runtime.events(handle.runId)).length;
        const { result } = await runtime.decide(handle.runId, {
          decision: "new-attempt",
          basedOnVersion: version,
          decidedBy: "ops-ada",
          note: `charge again; card ${CARD}`,
        });
        expect(await result).toMatchObject({ status: "completed" });
        caller.end();
        return {
          runId: handle.runId,
          callerSpanId: caller.spanContext().spanId,
          traceId: caller.spanContext().traceId,
        };
      },
    );
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), runId)).toHaveLength(2));
    const spans = exporter.getFinishedSpans();
    const [held, resumed] = runSpans(spans, runId).sort(
      (a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1],
    );

    // The first run span: child of the caller's span, ended held.
    expect(held!.name).toBe("holdfast.run shop");
    expect(held!.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(held!.spanContext().traceId).toBe(traceId);
    expect(held!.attributes).toMatchObject({
      "holdfast.run.id": runId,
      "holdfast.chat.id": "chat-7",
      "holdfast.agent.name": "shop",
      "holdfast.agent.version": "3",
      "holdfast.run.status": "held",
    });
    expect(held!.events.map((e) => e.name)).toEqual(["holdfast.run.claimed", "holdfast.run.held"]);
    expect(held!.events[1]!.attributes).toMatchObject({
      "holdfast.hold.codes": ["indefinite-failure"],
      "holdfast.hold.calls": [`${runId}/1`],
    });
    const firstCalls = childrenOf(spans, held!);
    expect(firstCalls.map((s) => [s.name, s.attributes["holdfast.call.outcome"]])).toEqual([
      ["holdfast.tool lookup", "completed"],
      ["holdfast.tool charge", "held"],
    ]);
    expect(firstCalls[1]!.attributes).toMatchObject({
      "holdfast.call.id": `${runId}/1`,
      "holdfast.call.kind": "tool",
      "holdfast.call.name": "charge",
      "holdfast.call.seq": 1,
      "holdfast.call.attempt": 1,
      "holdfast.call.disposition": "hold",
    });

    // The resumed run span: made by the decision (in the caller's trace here), linked to the held one.
    expect(resumed!.parentSpanContext?.spanId).toBe(callerSpanId);
    expect(resumed!.links.map((l) => l.context.spanId)).toEqual([held!.spanContext().spanId]);
    expect(resumed!.attributes).toMatchObject({
      "holdfast.run.id": runId,
      "holdfast.chat.id": "chat-7",
      "holdfast.agent.name": "shop",
      "holdfast.agent.version": "3",
      "holdfast.run.resumed": true,
      "holdfast.run.status": "completed",
    });
    const decision = resumed!.events.find((e) => e.name === "holdfast.decision");
    expect(decision?.attributes).toMatchObject({
      "holdfast.call.id": `${runId}/1`,
      "holdfast.decision": "new-attempt",
      "holdfast.decision.by": "ops-ada",
    });
    expect(
      childrenOf(spans, resumed!).map((s) => [
        s.name,
        s.attributes["holdfast.call.attempt"],
        s.attributes["holdfast.call.outcome"],
      ]),
    ).toEqual([["holdfast.tool charge", 2, "completed"]]);
    await runtime.close();
  });

  it("nothing secret in any span attribute or span event attribute", async () => {
    const runtime = await open(join(tempDir(), "j.db"));
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "shop",
      content: { card: CARD },
    });
    await handle.result;
    const version = (await runtime.events(handle.runId)).length;
    const { result } = await runtime.decide(handle.runId, {
      decision: "confirmed-completed",
      basedOnVersion: version,
      decidedBy: "ada",
      note: `the charge on ${CARD} went through`,
      result: { receipt: "r-42", card: CARD },
    });
    expect(await result).toMatchObject({ status: "completed" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(2));
    const texts = attributeTexts();
    expect(texts.length).toBeGreaterThan(20);
    for (const text of texts) {
      expect(text).not.toContain(CARD);
      expect(text).not.toContain("SECRET-7731");
    }
    await runtime.close();
  });

  it("a run resumed by another runtime gets a new run span, marked resumed, with the chat and agent read from the journal", async () => {
    const store = join(tempDir(), "j.db");
    const first = await open(store);
    const handle = await first.submit({ chatId: "c", inputId: "i", agent: "shop", content: { card: CARD } });
    await handle.result;
    await first.close();
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(1));
    exporter.reset();

    const second = await open(store, 0);
    const version = (await second.events(handle.runId)).length;
    const { result } = await second.decide(handle.runId, {
      decision: "confirmed-not-completed",
      basedOnVersion: version,
      decidedBy: "ada",
      note: "the bank shows no charge",
    });
    expect(await result).toMatchObject({ status: "completed" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(1));
    const spans = exporter.getFinishedSpans();
    const [run] = runSpans(spans, handle.runId);
    expect(run!.name).toBe("holdfast.run shop");
    expect(run!.attributes).toMatchObject({
      "holdfast.run.resumed": true,
      "holdfast.chat.id": "c",
      "holdfast.agent.name": "shop",
      "holdfast.run.status": "completed",
    });
    expect(run!.events.map((e) => e.name)).toContain("holdfast.decision");
    expect(childrenOf(spans, run!).map((s) => [s.name, s.attributes["holdfast.call.outcome"]])).toEqual([
      ["holdfast.tool charge", "completed"],
    ]);
    await second.close();
  });
});

describe("tracing: a definite failure and a retry grant", () => {
  it("the failed attempt's span ends failed (error status), the grant is an event of the next run span, the retried attempts follow", async () => {
    let calls = 0;
    const llm = defineTool({
      name: "llm",
      args: Schema.Struct({ prompt: Schema.String }),
      run: async ({ prompt }) => {
        calls += 1;
        if (calls === 1) throw new DefiniteFailure(`provider answered 503 for ${CARD}`);
        return `answer to ${prompt}`;
      },
    });
    const asker = defineAgent({
      name: "asker",
      version: "1",
      run: async (turn, input: { prompt: string }) => turn.tool(llm, { prompt: input.prompt }),
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "j.db"),
      agents: [asker],
      tools: [llm],
      secrets: { card: CARD },
    });
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "asker",
      content: { prompt: "hi" },
    });
    expect(await handle.result).toMatchObject({ status: "held" });
    const { result } = await runtime.grantRetry(handle.runId, `${handle.runId}/0`, {
      attempts: 1,
      grantedBy: "ada",
    });
    expect(await result).toMatchObject({ status: "completed" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(2));
    const spans = exporter.getFinishedSpans();
    const [held, resumed] = runSpans(spans, handle.runId).sort(
      (a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1],
    );
    const failed = childrenOf(spans, held!);
    expect(
      failed.map((s) => [s.attributes["holdfast.call.attempt"], s.attributes["holdfast.call.outcome"]]),
    ).toEqual([[1, "failed"]]);
    expect(failed[0]!.status.code).toBe(SpanStatusCode.ERROR);
    expect(held!.events.find((e) => e.name === "holdfast.run.held")?.attributes).toMatchObject({
      "holdfast.hold.codes": ["decision-needed"],
    });
    expect(resumed!.events.find((e) => e.name === "holdfast.retry.granted")?.attributes).toMatchObject({
      "holdfast.call.id": `${handle.runId}/0`,
      "holdfast.retry.attempts": 1,
      "holdfast.retry.granted_by": "ada",
    });
    expect(
      childrenOf(spans, resumed!).map((s) => [
        s.attributes["holdfast.call.attempt"],
        s.attributes["holdfast.call.outcome"],
      ]),
    ).toEqual([[2, "completed"]]);
    for (const text of attributeTexts()) expect(text).not.toContain(CARD);
    await runtime.close();
  });
});

describe("tracing: child runs", () => {
  it("a child run's span is a child of its parent's child-call span", async () => {
    const kid = defineAgent({
      name: "kid",
      version: "1",
      run: async (turn, input: { card: string }) => turn.tool(lookup, { card: input.card }),
    });
    const parent = defineAgent({
      name: "parent",
      version: "1",
      run: async (turn, input: { card: string }) => turn.child("kid", input),
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "j.db"),
      agents: [parent, kid],
      tools: [lookup],
    });
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "parent",
      content: { card: "x" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(1));
    const spans = exporter.getFinishedSpans();
    const [run] = runSpans(spans, handle.runId);
    const [call] = childrenOf(spans, run!);
    expect(call!.name).toBe("holdfast.child kid");
    const [childRun] = childrenOf(spans, call!);
    expect(childRun!.name).toBe("holdfast.run kid");
    expect(childRun!.attributes["holdfast.chat.id"]).toBe(`child:${handle.runId}/0`);
    expect(childrenOf(spans, childRun!).map((s) => s.name)).toEqual(["holdfast.tool lookup"]);
    await runtime.close();
  });
});

describe("tracing: a retry policy", () => {
  it("each attempt is a span of the one run span, the failed one ended failed; the scheduled retry is a run span event with its due time and reason", async () => {
    let calls = 0;
    const llm = defineTool({
      name: "llm",
      args: Schema.Struct({ prompt: Schema.String }),
      retry: { attempts: 3, backoff: { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 } },
      run: async ({ prompt }) => {
        calls += 1;
        if (calls === 1) throw new DefiniteFailure("provider answered 429", { statusCode: 429 });
        return `answer to ${prompt}`;
      },
    });
    const asker = defineAgent({
      name: "asker",
      version: "1",
      run: async (turn, input: { prompt: string }) => turn.tool(llm, { prompt: input.prompt }),
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [asker], tools: [llm] });
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "asker",
      content: { prompt: "hi" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(1));
    const spans = exporter.getFinishedSpans();
    const [run] = runSpans(spans, handle.runId);
    expect(
      childrenOf(spans, run!).map((s) => [
        s.attributes["holdfast.call.attempt"],
        s.attributes["holdfast.call.outcome"],
      ]),
    ).toEqual([
      [1, "failed"],
      [2, "completed"],
    ]);
    const scheduled = (await runtime.events(handle.runId)).find(
      (e) => e.event.type === "retry.scheduled",
    )!.event;
    expect(run!.events.find((e) => e.name === "holdfast.retry.scheduled")?.attributes).toEqual({
      "holdfast.call.id": `${handle.runId}/0`,
      "holdfast.retry.attempt": 2,
      "holdfast.retry.due_at": (scheduled as { dueAt: string }).dueAt,
      "holdfast.retry.delay_ms": 0,
      "holdfast.retry.reason": "backoff",
    });
    await runtime.close();
  });

  it("a replayable model call's attempt retried in doubt ends its span in-doubt at the retry.scheduled; the next attempt completes", async () => {
    let calls = 0;
    const asker = defineAgent({
      name: "asker",
      version: "1",
      run: async (turn) =>
        turn.model(
          "m",
          { prompt: "hi" },
          async () => {
            calls += 1;
            if (calls === 1) throw new Error("the gateway answered 502");
            return "hello";
          },
          {
            inDoubt: "replay",
            retry: { attempts: 2, backoff: { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 } },
          },
        ),
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [asker] });
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
    expect(await handle.result).toMatchObject({ status: "completed", output: "hello" });
    await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), handle.runId)).toHaveLength(1));
    const spans = exporter.getFinishedSpans();
    const [run] = runSpans(spans, handle.runId);
    const attempts = childrenOf(spans, run!);
    expect(
      attempts.map((s) => [s.attributes["holdfast.call.attempt"], s.attributes["holdfast.call.outcome"]]),
    ).toEqual([
      [1, "in-doubt"],
      [2, "completed"],
    ]);
    const scheduledAt = run!.events.find((e) => e.name === "holdfast.retry.scheduled")!.time;
    expect(attempts[0]!.endTime).toEqual(scheduledAt);
    await runtime.close();
  });
});
