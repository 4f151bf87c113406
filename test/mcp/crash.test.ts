import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../cli/cliProcess.js";
import { filesystemServer, testServer } from "../support/mcp.js";
import { useTempDir } from "../support/tmp.js";
import { useServers } from "./given.js";
import { killedAfterIntent, line, worker } from "./workerProcess.js";

const tempDir = useTempDir();
const given = useServers();

const lookups = (witness: string) =>
  existsSync(witness) ? readFileSync(witness, "utf8").split("\n").filter(Boolean) : [];

describe("holdfast/mcp after a SIGKILL of the agent's process", () => {
  it("a readOnlyHint tool off the safe list is held; holdfast show --json shows the server's annotations in the intent", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "note.txt"), "hello");
    const db = join(dir, "journal.db");
    const env = { HF_DB: db, HF_SERVER: "filesystem", HF_ROOT: dir };
    const runId = await killedAfterIntent(env, "read_text_file", { path: join(dir, "note.txt") });

    const restart = await worker({ ...env, HF_ACTION: "recover" });
    expect(line(restart, "recovery").report).toMatchObject({
      held: [{ runId, reasons: [{ code: "in-doubt", callId: `${runId}/1` }] }],
      replayed: [],
    });

    const shown = await runCli(["show", runId, "--db", db, "--json"]);
    expect(shown.code).toBe(0);
    const { run, events } = JSON.parse(shown.stdout) as {
      run: { status: string };
      events: Array<{ type: string; payload: Record<string, unknown> }>;
    };
    expect(run.status).toBe("held");
    const intent = events.find((e) => e.type === "call.intended" && e.payload.name === "mcp__read_text_file");
    expect(intent?.payload).toMatchObject({
      disposition: "hold",
      probe: {
        mcp: "tools/call",
        server: { name: "secure-filesystem-server", version: "0.2.0" },
        tool: "read_text_file",
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
    });
  });

  it("a read-only tool that asks for replay, on the safe list with its pin (server + version + tool + schema digest), is replayed", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, "note.txt"), "hello");
    const { toolset } = await given.toolset(filesystemServer(dir), { prefix: "mcp" });
    const read = toolset.tool("read_text_file");
    const env = {
      HF_DB: join(dir, "journal.db"),
      HF_SERVER: "filesystem",
      HF_ROOT: dir,
      HF_REPLAY: "read_text_file",
      HF_SAFE: JSON.stringify({ [read.name]: read.pin }),
    };
    const runId = await killedAfterIntent(env, "read_text_file", { path: join(dir, "note.txt") });

    const restart = await worker({ ...env, HF_ACTION: "recover" });
    expect(line(restart, "preflight").findings).toEqual([]);
    expect(line(restart, "recovery").report).toMatchObject({ held: [], replayed: [`${runId}/1`] });
    expect(line(restart, "recovered").results).toEqual([
      {
        status: "completed",
        runId,
        output: expect.objectContaining({ content: [{ type: "text", text: "hello" }] }),
      },
    ]);
  });

  describe("a server that changed between the crash and the restart voids the pin: the call is held, not replayed", () => {
    const cases = [
      { change: "nothing (control)", restart: {}, replayed: true },
      { change: "the tool's input schema", restart: { HF_MCP_SCHEMA: "v2" }, replayed: false },
      { change: "the server's version", restart: { HF_MCP_VERSION: "1.0.1" }, replayed: false },
    ];
    for (const { change, restart, replayed } of cases) {
      it(`changed: ${change}`, async () => {
        const dir = tempDir();
        const witness = join(dir, "witness.txt");
        const { toolset } = await given.toolset(testServer(), { prefix: "mcp" });
        const lookup = toolset.tool("lookup");
        const env = {
          HF_DB: join(dir, "journal.db"),
          HF_SERVER: "test",
          HF_MCP_WITNESS: witness,
          HF_REPLAY: "lookup",
          HF_SAFE: JSON.stringify({ [lookup.name]: lookup.pin }),
        };
        const runId = await killedAfterIntent(env, "lookup", { key: "k" });
        expect(lookups(witness)).toEqual([]);

        const second = await worker({ ...env, ...restart, HF_ACTION: "recover" });
        const report = line(second, "recovery").report as { held: unknown[]; replayed: unknown[] };
        if (replayed) {
          expect(report).toMatchObject({ held: [], replayed: [`${runId}/1`] });
          expect(lookups(witness)).toEqual(["lookup k"]);
        } else {
          expect(line(second, "preflight").findings).toEqual([
            expect.objectContaining({ tool: "mcp__lookup", problem: "pin-mismatch" }),
          ]);
          expect(report).toMatchObject({
            replayed: [],
            held: [
              { runId, reasons: [{ code: "pin-mismatch", detail: expect.stringContaining("changed") }] },
            ],
          });
          expect(lookups(witness)).toEqual([]);
        }
      });
    }
  });
});
