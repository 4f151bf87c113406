import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { JSONSchema } from "effect";
import { describe, expect, it } from "vitest";
import { filesystemServer } from "../support/mcp.js";
import { useTempDir } from "../support/tmp.js";
import { intentsOf, runOnce, useServers } from "./given.js";

const tempDir = useTempDir();
const given = useServers();

describe("MCP tools are holdfast tool definitions, for any module that hands tools to a model", () => {
  it("each has a model-safe name, the server's description, and the tool's inputSchema as the JSON Schema of its arguments", async () => {
    const { toolset } = await given.toolset(filesystemServer(tempDir()), { prefix: "files" });
    const read = toolset.tool("read_text_file");
    expect(read.name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(read.name).toBe("files__read_text_file");
    expect(read.description).toContain("Read the complete contents of a file");
    // What an AI SDK wrapper shows the model (`JSONSchema.make`, as holdfast/ai's effectInputSchema does).
    expect(JSONSchema.make(read.args)).toMatchObject(read.mcp.inputSchema);
    expect(toolset.tools.map((t) => t.mcp.tool)).toContain("write_file");
    expect(toolset.definitions.map((t) => t.name)).toEqual([
      "files.list_tools",
      ...toolset.tools.map((t) => t.name),
    ]);
  });

  it("a call by name, as a wrapper makes it with the model's input (turn.tool(name, input)), is the same journaled call", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "a.txt"), "alpha");
    const { toolset } = await given.toolset(filesystemServer(dir), { prefix: "files" });
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      turn.tool("files__read_text_file", { path: join(dir, "a.txt") }),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({ status: "completed", output: { content: [{ text: "alpha" }] } });
    expect(intentsOf(events)).toEqual([
      expect.objectContaining({
        name: "files__read_text_file",
        probe: expect.objectContaining({ tool: "read_text_file" }),
      }),
    ]);
  });

  it("input that is not a JSON object is refused before the intent (InvalidToolArgs); the server checks the rest", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(filesystemServer(dir));
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      turn
        .tool(toolset.tool("read_text_file"), ["not", "an", "object"] as never)
        .catch((e: { _tag?: string }) => e._tag),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({ status: "completed", output: "InvalidToolArgs" });
    expect(intentsOf(events)).toEqual([]);
  });
});
