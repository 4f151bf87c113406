import { describe, expect, it } from "vitest";
import { aiSdkExample } from "../../examples/ai-sdk.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("examples/ai-sdk.ts", () => {
  it("a 429 retried, killed inside a tool call, held and decided while two messages queue; the next one cancelled, the last one answered", async () => {
    const story = await aiSdkExample(tempDir());
    expect(story.killedBy).toBe("SIGKILL");
    expect(story.held).toEqual([
      { runId: expect.any(String), reasons: [expect.objectContaining({ code: "in-doubt" })] },
    ]);
    // The first model call took two attempts (the 429, then the answer), both in the journal.
    expect(story.calls).toEqual([
      "mock-provider/mock-model-id #2 completed",
      "get_weather #1 completed",
      "mock-provider/mock-model-id #1 completed",
      "send_sms #1 completed",
      "mock-provider/mock-model-id #1 completed",
    ]);
    expect(story.result).toMatchObject({
      status: "completed",
      output: "I texted you the weather in Lisbon.",
    });
    // Queued behind the held run, in order; admitted one after the other as each run ended.
    expect(story.positions).toEqual([1, 2]);
    expect(story.cancel).toMatchObject({ accepted: true });
    expect(story.stopped).toMatchObject({ status: "cancelled" });
    expect(story.thanked).toMatchObject({ status: "completed", output: "You're welcome!" });
    expect(story.timeline).toEqual([
      "message-1 run.admitted",
      "message-1 run.completed",
      "message-2 run.admitted",
      "message-2 run.cancelled",
      "message-3 run.admitted",
      "message-3 run.completed",
    ]);
    expect(story.outbox).toEqual(["+351 912 345 678: Lisbon: sunny, 24°C"]);
    // The 429 and two requests before the crash, served from the journal after it; then only new ones.
    expect(story.providerRequests).toEqual([
      "request 1: 429, retry after 1 s",
      "request 1",
      "request 2",
      "request 3",
      "Porto: writing a long answer",
      "Porto: aborted",
      "Thanks: answered",
    ]);
    expect(story.auditFindings).toBe(0);
  });
});
