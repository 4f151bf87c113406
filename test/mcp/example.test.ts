import { describe, expect, it } from "vitest";
import { mcpExample } from "../../examples/mcp.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

describe("examples/mcp.ts", () => {
  it("killed inside an MCP write: held with the server's annotations shown, confirmed, not written twice; killed inside a safe-listed read: replayed", async () => {
    const story = await mcpExample(tempDir());
    expect(story.killedWriting).toBe("SIGKILL");
    expect(story.held).toEqual([
      { runId: expect.any(String), reasons: [expect.objectContaining({ code: "in-doubt" })] },
    ]);
    expect(story.heldCall).toEqual({
      name: "files__write_file",
      disposition: "hold",
      server: { name: "secure-filesystem-server", version: "0.2.0" },
      annotations: { readOnlyHint: false, idempotentHint: true, destructiveHint: true, openWorldHint: false },
    });
    expect(story.confirmed).toMatchObject({ status: "completed" });
    expect(story.writtenOnce).toBe(true);
    expect(story.killedReading).toBe("SIGKILL");
    expect(story.replayed).toHaveLength(1);
    expect(story.read).toMatchObject({
      status: "completed",
      output: { content: [{ type: "text", text: "- call the plumber\n" }] },
    });
  });
});
