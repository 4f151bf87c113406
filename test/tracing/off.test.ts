import { join } from "node:path";
import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { Schema } from "effect";
import { afterAll, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const note = defineTool({
  name: "note",
  args: Schema.Struct({ text: Schema.String }),
  run: async ({ text }) => ({ noted: text }),
});

const scribe = defineAgent({
  name: "scribe",
  version: "1",
  run: async (turn, input: { text: string }) => turn.tool("note", { text: input.text }),
});

afterAll(() => {
  trace.disable();
  context.disable();
});

describe("tracing is off unless a tracer provider is registered", () => {
  it("with no provider registered, runs work and nothing is recorded", async () => {
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [scribe], tools: [note] });
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "scribe",
      content: { text: "hi" },
    });
    expect(await handle.result).toMatchObject({ status: "completed", output: { noted: "hi" } });
    // A provider registered now sees none of the spans that were never started.
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(exporter.getFinishedSpans()).toEqual([]);
    await runtime.close();
    trace.disable();
  });

  it("`tracing: false` makes no spans even with a provider registered", async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    const runtime = await openRuntime({
      store: join(tempDir(), "j.db"),
      agents: [scribe],
      tools: [note],
      tracing: false,
    });
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "scribe",
      content: { text: "hi" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(exporter.getFinishedSpans()).toEqual([]);
    await runtime.close();
  });

  it("a provider registered after the runtime opened is used from the next run on", async () => {
    trace.disable();
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [scribe], tools: [note] });
    const exporter = new InMemorySpanExporter();
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    const handle = await runtime.submit({
      chatId: "c",
      inputId: "i",
      agent: "scribe",
      content: { text: "hi" },
    });
    expect(await handle.result).toMatchObject({ status: "completed" });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(
      exporter
        .getFinishedSpans()
        .map((s) => s.name)
        .sort(),
    ).toEqual(["holdfast.run scribe", "holdfast.tool note"]);
    await runtime.close();
  });
});
