import { describe, expect, it } from "vitest";
import { aiSdkExample } from "../../examples/ai-sdk.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("examples/ai-sdk.ts", () => {
  it("killed inside a tool call of an AI SDK loop: held, decided, completed; nothing sent or asked twice", async () => {
    const story = await aiSdkExample(tempDir());
    expect(story.killedBy).toBe("SIGKILL");
    expect(story.held).toEqual([
      { runId: expect.any(String), reasons: [expect.objectContaining({ code: "in-doubt" })] },
    ]);
    expect(story.result).toMatchObject({
      status: "completed",
      output: "I texted you the weather in Lisbon.",
    });
    expect(story.outbox).toEqual(["+351 912 345 678: Lisbon: sunny, 24°C"]);
    // Two requests before the crash, served from the journal after it; only the last one is new.
    expect(story.providerRequests).toEqual(["request 1", "request 2", "request 3"]);
  });
});
