// OpenTelemetry spans of a run: compiled and run by test/tracing/example.test.ts.
//
// A payment times out (the call is in doubt, the run is held), a person confirms it went through,
// and the run completes. The spans go to an in-memory exporter here; an application registers its
// own provider and exporter (OTLP, Jaeger, …) the same way, before it opens the runtime.
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { Schema } from "effect";
import { defineAgent, defineTool, openRuntime } from "../src/index.js";

const pay = defineTool({
  name: "pay",
  args: Schema.Struct({ invoice: Schema.String, apiKey: Schema.String }),
  run: async () => {
    throw new Error("timeout after 30 s"); // not a proof either way: the call is in doubt
  },
});

const billing = defineAgent({
  name: "billing",
  version: "4",
  run: async (turn, input: { invoice: string; apiKey: string }) => turn.tool(pay, input),
});

/** One line per span, indented under its parent: name, then the holdfast attributes that matter. */
const tree = (spans: ReadonlyArray<ReadableSpan>): string[] => {
  const lines: string[] = [];
  const visit = (parent: string | undefined, depth: number) => {
    for (const span of spans.filter((s) => s.parentSpanContext?.spanId === parent)) {
      const a = span.attributes;
      const what = a["holdfast.run.status"] ?? a["holdfast.call.outcome"] ?? "";
      const events = span.events.map((e) => e.name).join(", ");
      lines.push(`${"  ".repeat(depth)}${span.name} ${what}${events ? ` [${events}]` : ""}`.trimEnd());
      visit(span.spanContext().spanId, depth + 1);
    }
  };
  visit(undefined, 0);
  return lines;
};

export const tracingExample = async (store: string, apiKey: string) => {
  const exporter = new InMemorySpanExporter();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
  );

  const runtime = await openRuntime({ store, agents: [billing], tools: [pay], secrets: { apiKey } });
  const tracer = trace.getTracer("billing-service");
  await tracer.startActiveSpan("POST /invoices/42/pay", async (request) => {
    const run = await runtime.submit({
      chatId: "invoice-42",
      inputId: "pay-1",
      agent: "billing",
      content: { invoice: "42", apiKey },
    });
    const held = await run.result; // { status: "held", reasons: [{ code: "indefinite-failure", … }] }
    const { result } = await runtime.decide(run.runId, {
      decision: "confirmed-completed",
      basedOnVersion: (await runtime.events(run.runId)).length,
      decidedBy: "ada",
      note: "the bank statement shows the payment",
      result: { paid: true },
    });
    await result;
    request.end();
    return held;
  });
  await runtime.close();
  const spans = exporter.getFinishedSpans();
  trace.disable();
  context.disable();
  return { spans, tree: tree(spans) };
};
