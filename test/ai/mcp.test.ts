import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { describe, expect, it } from "vitest";
import { journaledModel, journaledTools } from "../../src/ai.js";
import { intentsOf, runOnce, useServers } from "../mcp/given.js";
import { filesystemServer } from "../support/mcp.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const servers = useServers();

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};

describe("MCP tools in an AI SDK loop", () => {
  it("a model calls a real MCP server's tool through journaledTools: one journaled call with the server's probe", async () => {
    const dir = tempDir();
    const notes = join(dir, "notes");
    mkdirSync(notes);
    writeFileSync(join(notes, "todo.txt"), "buy milk\n");
    const { toolset } = await servers.toolset(filesystemServer(notes), { prefix: "files" });
    const provider = new MockLanguageModelV3({
      doGenerate: async ({ prompt }) => {
        const result = prompt.flatMap((m) => (m.role === "tool" ? m.content : []))[0];
        if (!result)
          return {
            content: [
              {
                type: "tool-call",
                toolCallId: "c1",
                toolName: "files__read_text_file",
                input: JSON.stringify({ path: join(notes, "todo.txt") }),
              },
            ],
            finishReason: { unified: "tool-calls", raw: "tool_calls" },
            usage,
            warnings: [],
          };
        const text = result.type === "tool-result" ? JSON.stringify(result.output) : "";
        return {
          content: [{ type: "text", text: text.includes("buy milk") ? "You need milk." : "Nothing." }],
          finishReason: { unified: "stop", raw: "stop" },
          usage,
          warnings: [],
        };
      },
    });
    const runtime = await servers.runtime(dir, toolset, async (turn) => {
      const { text } = await generateText({
        model: journaledModel(turn, provider),
        tools: journaledTools(turn, toolset.tools),
        stopWhen: stepCountIs(3),
        prompt: "what is on my list?",
      });
      return text;
    });
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({ status: "completed", output: "You need milk." });
    const intents = intentsOf(events);
    expect(intents.map((e) => [e.kind, e.name])).toEqual([
      ["model", "mock-provider/mock-model-id"],
      ["tool", "files__read_text_file"],
      ["model", "mock-provider/mock-model-id"],
    ]);
    // The model was shown the server's input schema; the tool's intent records what was called.
    expect(JSON.stringify(intents[0]?.args)).toContain('"name":"files__read_text_file"');
    expect(intents[1]?.probe).toMatchObject({ mcp: "tools/call", tool: "read_text_file" });
  });
});
