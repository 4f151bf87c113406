// holdfast under an MCP client: compiled and run by test/mcp/example.test.ts.
//
// An agent keeps notes through @modelcontextprotocol/server-filesystem, spoken to over stdio.
//  1. It writes a note and its process is SIGKILLed after the server wrote the file and before the
//     outcome was committed. On restart the call is held: nothing proves it happened, and the
//     server's annotations (write_file says idempotentHint: true) are shown to the person who
//     decides, never trusted. The person sees the note on disk and confirms it.
//  2. It reads the note and is SIGKILLed after the intent. read_text_file asks for replay and the
//     safe list holds its pin (server name + version + tool + input-schema digest): it is replayed.
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { defineAgent, openRuntime, type RunResult, type Runtime } from "../src/index.js";
import { type McpCallProbe, mcpToolset } from "../src/mcp.js";

/** The installed server's entry point (elsewhere: `npx -y @modelcontextprotocol/server-filesystem <dir>`). */
const SERVER = (() => {
  const manifest = createRequire(import.meta.url).resolve(
    "@modelcontextprotocol/server-filesystem/package.json",
  );
  const { bin } = JSON.parse(readFileSync(manifest, "utf8")) as { bin: Record<string, string> };
  return join(dirname(manifest), Object.values(bin)[0] ?? "dist/index.js");
})();

const open = async (dir: string) => {
  const notes = join(dir, "notes");
  const client = new Client({ name: "notes-agent", version: "1.0.0" });
  const transport = new StdioClientTransport({ command: process.execPath, args: [SERVER, notes] });
  await client.connect(transport);
  const files = await mcpToolset(client, { prefix: "files", replay: ["read_text_file"] });

  const scribe = defineAgent({
    name: "scribe",
    version: "1",
    run: async (turn, input: { path: string; text: string }) => {
      await files.listTools(turn);
      return files.callTool(turn, "write_file", { path: input.path, content: input.text });
    },
  });
  const reader = defineAgent({
    name: "reader",
    version: "1",
    run: async (turn, input: { path: string }) =>
      files.callTool(turn, "read_text_file", { path: input.path }),
  });

  // The audited safe list (holdfast.allowlist.json in an application): read_text_file at this pin.
  const read = files.tool("read_text_file");
  const runtime = await openRuntime({
    store: join(dir, "journal.db"),
    agents: [scribe, reader],
    tools: files.definitions,
    allowlist: { [read.name]: read.pin },
    recovery: { onOpen: false },
  });
  const close = async () => {
    await runtime.close();
    await client.close();
  };
  return { runtime, notes, close };
};

/** A process that submits one input and dies by SIGKILL at the crash point, inside the named call. */
const runUntilKilled = (dir: string, agent: string, crashAt: string, call: string) =>
  new Promise<NodeJS.Signals | null>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", fileURLToPath(import.meta.url), "child", dir, agent],
      { env: { ...process.env, HOLDFAST_CRASH_AT: crashAt, HOLDFAST_CRASH_CALL: call }, stdio: "inherit" },
    );
    child.on("error", reject);
    child.on("close", (_code, signal) => resolve(signal));
  });

const child = async (dir: string, agent: string) => {
  const { runtime, notes } = await open(dir);
  const path = join(notes, "today.md");
  const content = agent === "scribe" ? { path, text: "- call the plumber\n" } : { path };
  const run = await runtime.submit({ chatId: agent, inputId: "m1", agent, content });
  await run.result; // never reached: the crash point kills this process first
};

/** What the intent of a held call says about the MCP tool it called. */
const heldCall = async (runtime: Runtime, runId: string, callId: string) => {
  const intent = (await runtime.events(runId))
    .map((e) => e.event)
    .find((e) => e.type === "call.intended" && e.callId === callId);
  if (intent?.type !== "call.intended") throw new Error(`no intent for ${callId}`);
  const probe = intent.probe as McpCallProbe;
  return {
    name: intent.name,
    disposition: intent.disposition,
    server: probe.server,
    annotations: probe.annotations,
  };
};

export interface McpStory {
  readonly killedWriting: NodeJS.Signals | null;
  readonly held: ReadonlyArray<{ readonly runId: string; readonly reasons: ReadonlyArray<{ code: string }> }>;
  readonly heldCall: Awaited<ReturnType<typeof heldCall>>;
  readonly confirmed: RunResult;
  readonly writtenOnce: boolean;
  readonly killedReading: NodeJS.Signals | null;
  readonly replayed: ReadonlyArray<string>;
  readonly read: RunResult;
}

export const mcpExample = async (dir: string): Promise<McpStory> => {
  mkdirSync(join(dir, "notes"));
  const note = join(dir, "notes", "today.md");

  // 1. Killed after the server wrote the note, before the outcome was committed.
  const killedWriting = await runUntilKilled(
    dir,
    "scribe",
    "after-effect-before-outcome",
    "files__write_file",
  );
  const writtenAt = statSync(note).mtimeMs;
  let app = await open(dir);
  const { held } = await app.runtime.recover();
  const [run] = held;
  const callId = run?.reasons[0]?.callId;
  if (!run || !callId) throw new Error("recovery held nothing");
  const call = await heldCall(app.runtime, run.runId, callId);

  // A person reads the note on disk, sees it was written, and says so.
  const events = await app.runtime.events(run.runId);
  const decided = await app.runtime.decide(run.runId, {
    basedOnVersion: events.at(-1)?.version ?? 0,
    decidedBy: "ada",
    decision: "confirmed-completed",
    note: `notes/today.md holds the note: ${readFileSync(note, "utf8").trim()}`,
    result: { content: [{ type: "text", text: `Successfully wrote to ${note}` }] },
  });
  const confirmed = await decided.result;
  const writtenOnce = statSync(note).mtimeMs === writtenAt;
  await app.close();

  // 2. Killed after the intent of a read that asks for replay and is on the safe list.
  const killedReading = await runUntilKilled(dir, "reader", "after-intent", "files__read_text_file");
  app = await open(dir);
  const recovered = await app.runtime.recover();
  const [read] = await recovered.done;
  await app.close();
  if (!read) throw new Error("recovery resumed nothing");
  return {
    killedWriting,
    held,
    heldCall: call,
    confirmed,
    writtenOnce,
    killedReading,
    replayed: recovered.replayed,
    read,
  };
};

if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === "child") {
  await child(process.argv[3]!, process.argv[4]!);
}
