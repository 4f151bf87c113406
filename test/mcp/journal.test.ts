import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { McpToolset } from "../../src/adapters/integrations/mcp/index.js";
import { CallFailed } from "../../src/index.js";
import { everythingServer, filesystemServer, testServer } from "../support/mcp.js";
import { useTempDir } from "../support/tmp.js";
import { intentsOf, outcomeOf, runOnce, useServers } from "./given.js";

const tempDir = useTempDir();
const given = useServers();

/** The agent's own view of a definite failure: the error it caught, as stored. */
const caught = async (call: () => Promise<unknown>) => {
  try {
    return { ok: await call() };
  } catch (error) {
    if (error instanceof CallFailed) return { failed: error.error };
    throw error;
  }
};

describe("holdfast/mcp: every tools/call is a journaled call", () => {
  it("journals the listing and each call, intent and outcome, with the server's name and version, the schema digest and the annotations", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "note.txt"), "remember the milk\n");
    const { toolset } = await given.toolset(filesystemServer(dir), { prefix: "files" });
    const runtime = await given.runtime(dir, toolset, async (turn) => {
      const listing = await toolset.listTools(turn);
      const read = await toolset.callTool(turn, "read_text_file", { path: join(dir, "note.txt") });
      return { tools: listing.tools.length, read };
    });
    const { result, events } = await runOnce(runtime);

    expect(result).toMatchObject({
      status: "completed",
      output: { read: { content: [{ type: "text", text: "remember the milk\n" }] } },
    });
    const [listing, call] = intentsOf(events);
    expect(listing).toMatchObject({
      name: "files.list_tools",
      probe: { mcp: "tools/list", server: { name: "secure-filesystem-server", version: "0.2.0" } },
    });
    const listed = outcomeOf(events, listing!.callId);
    expect(listed).toMatchObject({
      type: "call.completed",
      result: {
        server: { name: "secure-filesystem-server", version: "0.2.0" },
        tools: expect.arrayContaining([
          expect.objectContaining({
            tool: "write_file",
            holdfastName: "files__write_file",
            annotations: {
              readOnlyHint: false,
              idempotentHint: true,
              destructiveHint: true,
              openWorldHint: false,
            },
            inputSchema: expect.objectContaining({ required: ["path", "content"] }),
          }),
        ]),
      },
    });
    const info = toolset.tool("read_text_file").mcp;
    expect(call).toMatchObject({
      kind: "tool",
      name: "files__read_text_file",
      args: { path: join(dir, "note.txt") },
      pin: info.pin,
      probe: {
        mcp: "tools/call",
        server: { name: "secure-filesystem-server", version: "0.2.0" },
        tool: "read_text_file",
        title: "Read Text File",
        inputSchemaDigest: info.inputSchemaDigest,
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
    });
    expect(info.inputSchemaDigest).toMatch(/^[0-9a-f]{64}$/);
    expect(outcomeOf(events, call!.callId)).toMatchObject({
      type: "call.completed",
      result: { content: [{ type: "text", text: "remember the milk\n" }] },
    });
  });

  it("annotations never decide replay: a readOnlyHint tool is recorded as hold unless it asks for replay and the safe list holds its pin", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "a.txt"), "a");
    const plain = (await given.toolset(filesystemServer(dir))).toolset;
    const asking = (await given.toolset(filesystemServer(dir), { replay: ["read_text_file"] })).toolset;
    const read = asking.tool("read_text_file");
    expect(read.mcp.annotations.readOnlyHint).toBe(true);
    expect(plain.tool("read_text_file").pin).toBe(read.pin);
    const dispositionWith = async (toolset: McpToolset, safe: Record<string, string>) => {
      const runtime = await given.runtime(
        tempDir(),
        toolset,
        async (turn) => toolset.callTool(turn, "read_text_file", { path: join(dir, "a.txt") }),
        safe,
      );
      const { result, events } = await runOnce(runtime);
      expect(result).toMatchObject({ status: "completed" });
      return intentsOf(events).map((i) => i.disposition);
    };
    expect(await dispositionWith(plain, {})).toEqual(["hold"]);
    expect(await dispositionWith(plain, { [read.name]: read.pin })).toEqual(["hold"]);
    expect(await dispositionWith(asking, {})).toEqual(["hold"]);
    expect(await dispositionWith(asking, { [read.name]: "0".repeat(64) })).toEqual(["hold"]);
    expect(await dispositionWith(asking, { [read.name]: read.pin })).toEqual(["replay"]);
  });

  it("a replay request for a tool the server does not list is refused when the toolset is made", async () => {
    const connection = given.toolset(filesystemServer(tempDir()), { replay: ["read_everything"] });
    await expect(connection).rejects.toThrow(
      /names "read_everything", which secure-filesystem-server 0\.2\.0 does not list/,
    );
  });

  it("an isError answer is a definite failure: call.failed with the server's text, the agent gets CallFailed", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(filesystemServer(dir));
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      caught(() => toolset.callTool(turn, "read_text_file", { path: "/etc/hostname" })),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { failed: { name: "DefiniteFailure", message: expect.stringContaining("Access denied") } },
    });
    const [intent] = intentsOf(events);
    expect(outcomeOf(events, intent!.callId)).toMatchObject({
      type: "call.failed",
      definite: true,
      error: {
        name: "DefiniteFailure",
        details: { isError: true, tool: "read_text_file", server: { name: "secure-filesystem-server" } },
      },
    });
  });

  it("arguments the server refuses (isError from McpServer's input validation) are a definite failure", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(filesystemServer(dir));
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      caught(() => toolset.callTool(turn, "read_text_file", { path: 42 })),
    );
    const { result } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: {
        failed: { name: "DefiniteFailure", message: expect.stringContaining("Input validation error") },
      },
    });
  });

  it("an unknown tool answered with JSON-RPC MethodNotFound is a definite failure", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(testServer());
    const runtime = await given.runtime(dir, toolset, async (turn) => {
      await toolset.callTool(turn, "retire", { tool: "lookup" });
      return caught(() => toolset.callTool(turn, "lookup", { key: "k" }));
    });
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { failed: { name: "DefiniteFailure", message: expect.stringContaining("MethodNotFound") } },
    });
    const lookup = intentsOf(events).find((i) => i.name.endsWith("__lookup"));
    expect(outcomeOf(events, lookup!.callId)).toMatchObject({
      type: "call.failed",
      definite: true,
      error: { details: { code: -32601, tool: "lookup" } },
    });
  });

  it("invalid arguments answered with JSON-RPC InvalidParams are a definite failure", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(testServer());
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      caught(() => toolset.callTool(turn, "lookup", { key: 7 })),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { failed: { name: "DefiniteFailure", message: expect.stringContaining("InvalidParams") } },
    });
    const [intent] = intentsOf(events);
    expect(outcomeOf(events, intent!.callId)).toMatchObject({ error: { details: { code: -32602 } } });
  });

  it("a server killed in the middle of a call leaves the call in doubt: the run is held, no outcome is recorded", async () => {
    const dir = tempDir();
    const { toolset, transport } = await given.toolset(everythingServer());
    const runtime = await given.runtime(dir, toolset, async (turn) => {
      const call = toolset.callTool(turn, "trigger-long-running-operation", { duration: 30, steps: 30 });
      setTimeout(() => process.kill(transport.pid!, "SIGKILL"), 500);
      return call;
    });
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "held",
      reasons: [
        {
          code: "indefinite-failure",
          detail: expect.stringMatching(
            /McpCallInDoubt: .*trigger-long-running-operation.*connection closed/,
          ),
        },
      ],
    });
    const [intent] = intentsOf(events);
    expect(intent).toMatchObject({
      disposition: "hold",
      probe: { annotations: { readOnlyHint: true, idempotentHint: true, destructiveHint: false } },
    });
    expect(outcomeOf(events, intent!.callId)).toBeUndefined();
  });

  it("a server that does not answer in time leaves the call in doubt: held, even though the SDK asked it to cancel", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(everythingServer(), { timeoutMs: 300 });
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      toolset.callTool(turn, "trigger-long-running-operation", { duration: 2, steps: 2 }),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "held",
      reasons: [{ code: "indefinite-failure", detail: expect.stringContaining("no answer in time") }],
    });
    const [intent] = intentsOf(events);
    expect(outcomeOf(events, intent!.callId)).toBeUndefined();
  });

  it("a connection closed before the call is a definite failure: the request provably never left", async () => {
    const dir = tempDir();
    const { toolset, client } = await given.toolset(testServer());
    const runtime = await given.runtime(dir, toolset, async (turn) => {
      await client.close();
      return caught(() => toolset.callTool(turn, "lookup", { key: "k" }));
    });
    const { result } = await runOnce(runtime);
    expect(result).toMatchObject({
      status: "completed",
      output: { failed: { name: "DefiniteFailure", message: expect.stringContaining("was not sent") } },
    });
  });

  it("a tool the server did not list is refused before anything is written", async () => {
    const dir = tempDir();
    const { toolset } = await given.toolset(testServer());
    const runtime = await given.runtime(dir, toolset, async (turn) =>
      toolset.callTool(turn, "no_such_tool", {}).catch((error: { _tag?: string }) => error._tag),
    );
    const { result, events } = await runOnce(runtime);
    expect(result).toMatchObject({ status: "completed", output: "McpToolNotListed" });
    expect(intentsOf(events)).toEqual([]);
  });
});
