import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import type { EventOf } from "../../src/events/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("law 5 for an attempt a replayable model call's policy retried in doubt", () => {
  it("the timed-out attempt's late answer is recorded as a conflict, never dropped; the next attempt's answer stands", async () => {
    let calls = 0;
    let releaseFirst: (value: string) => void = () => undefined;
    const agent = defineAgent({
      name: "asker",
      version: "1",
      run: async (turn) =>
        turn.model(
          "m",
          { prompt: "hi" },
          async () => {
            calls += 1;
            // The first attempt ignores its abort and answers only once the second one has started.
            if (calls === 1) return new Promise<string>((resolve) => (releaseFirst = resolve));
            releaseFirst("first, late");
            return "second";
          },
          {
            inDoubt: "replay",
            timeoutMs: 20,
            retry: { attempts: 2, backoff: { initialMs: 0, maxMs: 0, factor: 1, jitter: 0 } },
          },
        ),
    });
    const runtime = await openRuntime({ store: join(tempDir(), "j.db"), agents: [agent] });
    try {
      const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "asker", content: {} });
      expect(await handle.result).toMatchObject({ status: "completed", output: "second" });
      const conflict = await vi.waitFor(
        async () => {
          const found = (await runtime.events(handle.runId))
            .map((e) => e.event)
            .find((e): e is EventOf<"conflict.recorded"> => e.type === "conflict.recorded");
          expect(found).toBeDefined();
          return found!;
        },
        { timeout: 10_000, interval: 50 },
      );
      expect(conflict).toMatchObject({
        kind: "outcome",
        callId: `${handle.runId}/0`,
        attempted: { type: "call.completed", attempt: 1, result: "first, late" },
      });
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await runtime.close();
    }
  });
});
