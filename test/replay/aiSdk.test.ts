import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { aiSdkExample, getWeather, makeAssistant, makeSendSms } from "../../examples/ai-sdk.js";
import { replayRuns } from "../../src/adapters/replay.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const read = (path: string) => (existsSync(path) ? readFileSync(path, "utf8") : "");

describe("replay of the AI SDK example's journal", () => {
  it("is clean with the same code, and asks neither the model nor the tools anything", async () => {
    const dir = tempDir();
    await aiSdkExample(dir);
    const outbox = join(dir, "outbox.txt");
    const asked = join(dir, "replay-model.log");
    const before = { outbox: read(outbox), provider: read(join(dir, "provider.log")) };
    // The model, as an outside witness: any request it gets is written down.
    const provider = new MockLanguageModelV3({
      doGenerate: async () => {
        appendFileSync(asked, "asked\n");
        throw new Error("a replay must not ask the model");
      },
    });
    const sendSms = makeSendSms(outbox);
    const report = await replayRuns({
      agents: [makeAssistant(provider, sendSms)],
      tools: [getWeather, sendSms],
      store: join(dir, "journal.db"),
    });
    expect(report.divergences).toBe(0);
    expect(report.errors).toBe(0);
    // Newest first: "Thanks!", Porto and Lisbon (5 calls, the SMS confirmed by a person) are the
    // same. Porto was cancelled while its answer was being written: the replay delivers the cancel
    // where the journal recorded it, so the agent stops there again (decision 0082).
    expect(report.runs.map((r) => r.result)).toEqual(["same", "same", "same"]);
    expect(report.runs[2]).toMatchObject({ calls: 5 });
    expect(read(asked)).toBe("");
    expect({ outbox: read(outbox), provider: read(join(dir, "provider.log")) }).toEqual(before);
  }, 60_000);
});
