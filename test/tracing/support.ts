import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, afterEach, beforeAll } from "vitest";

/** A tracer provider and context manager registered globally for this file, spans kept in memory. */
export const useInMemoryTracing = (): InMemorySpanExporter => {
  const exporter = new InMemorySpanExporter();
  beforeAll(() => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
  });
  afterEach(() => exporter.reset());
  afterAll(() => {
    trace.disable();
    context.disable();
  });
  return exporter;
};

export const runSpans = (spans: ReadonlyArray<ReadableSpan>, runId: string): ReadableSpan[] =>
  spans.filter((s) => s.name.startsWith("holdfast.run") && s.attributes["holdfast.run.id"] === runId);

export const childrenOf = (spans: ReadonlyArray<ReadableSpan>, parent: ReadableSpan): ReadableSpan[] =>
  spans.filter((s) => s.parentSpanContext?.spanId === parent.spanContext().spanId);
