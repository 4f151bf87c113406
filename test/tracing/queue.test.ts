import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { defineAgent, openRuntime, type QueuedHandle } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runSpans, useInMemoryTracing } from "./support.js";

const exporter = useInMemoryTracing();
const tempDir = useTempDir();

describe("spans of a chat's queue", () => {
  it("a run admitted from its chat's queue has its own span, marked queued, with the admission as an event", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const runtime = await openRuntime({
      store: join(tempDir(), "journal.db"),
      agents: [
        defineAgent({
          name: "replier",
          version: "1",
          run: async (_turn, input: { label: string }) => {
            if (input.label === "first") await gate;
            return input.label;
          },
        }),
      ],
      tools: [],
    });
    try {
      const submit = (inputId: string, label: string) =>
        runtime.submit({ chatId: "c", inputId, agent: "replier", content: { label }, whenBusy: "queue" });
      const first = await submit("m1", "first");
      const second = (await submit("m2", "second")) as QueuedHandle;
      release();
      await first.result;
      const runId = (await second.admitted)!;
      await second.result;
      await vi.waitFor(() => expect(runSpans(exporter.getFinishedSpans(), runId)).toHaveLength(1));
      const [span] = runSpans(exporter.getFinishedSpans(), runId);
      expect(span!.attributes["holdfast.input.queued"]).toBe(true);
      expect(span!.events.map((e) => [e.name, e.attributes?.["holdfast.input.id"]])).toContainEqual([
        "holdfast.input.admitted",
        "m2",
      ]);
      const [direct] = runSpans(exporter.getFinishedSpans(), (first as { runId: string }).runId);
      expect(direct?.attributes["holdfast.input.queued"]).toBeUndefined();
    } finally {
      await runtime.close();
    }
  });
});
