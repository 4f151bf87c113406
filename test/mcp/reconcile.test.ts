import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli } from "../cli/cliProcess.js";
import { testServer } from "../support/mcp.js";
import { useTempDir } from "../support/tmp.js";
import { useServers } from "./given.js";
import { killedAfterIntent, line, worker } from "./workerProcess.js";

// MCP reconcilers (issue 34 item 4, decision 0075): a write in doubt proved done or not done by a
// read on the same server; the read and its answer are the evidence.
const tempDir = useTempDir();
const given = useServers();

const puts = (witness: string) =>
  existsSync(witness) ? readFileSync(witness, "utf8").split("\n").filter(Boolean) : [];

const setup = () => {
  const dir = tempDir();
  const witness = join(dir, "witness.txt");
  return {
    db: join(dir, "journal.db"),
    witness,
    env: {
      HF_DB: join(dir, "journal.db"),
      HF_SERVER: "test",
      HF_MCP_STORE: join(dir, "store.json"),
      HF_MCP_WITNESS: witness,
      HF_RECONCILE: "put",
    },
  };
};

/** The run's `call.reconciled` payload, as `holdfast show --json` prints it. */
const reconciledOf = async (db: string, runId: string) => {
  const shown = await runCli(["show", runId, "--db", db, "--json"]);
  expect(shown.code).toBe(0);
  const { run, events } = JSON.parse(shown.stdout) as {
    run: { status: string };
    events: Array<{ type: string; payload: Record<string, unknown> }>;
  };
  const intent = events.find((e) => e.type === "call.intended" && e.payload.name === "mcp__put");
  return {
    status: run.status,
    intent: intent?.payload,
    reconciled: events.find((e) => e.type === "call.reconciled")?.payload,
  };
};

describe("holdfast/mcp reconcilers after a SIGKILL of the agent's process", () => {
  it("a put killed before it was sent is proved not done by a get on the same server, and runs once", async () => {
    const { db, witness, env } = setup();
    const runId = await killedAfterIntent(env, "put", { key: "k1", value: "v1" });
    expect(puts(witness)).toEqual([]);

    const restart = await worker({ ...env, HF_ACTION: "recover" });
    expect(line(restart, "recovery").report).toMatchObject({ held: [], reconciled: [`${runId}/1`] });
    expect(line(restart, "recovered").results).toMatchObject([
      { runId, status: "completed", output: { content: [{ type: "text", text: "stored k1" }] } },
    ]);
    expect(puts(witness)).toEqual(["put k1"]);

    const { status, intent, reconciled } = await reconciledOf(db, runId);
    expect(status).toBe("completed");
    expect(intent).toMatchObject({
      disposition: "reconcile",
      reconciler: "mcp:mcp__put",
      probe: { listed: { mcp: "tools/call", tool: "put" }, reconcile: { key: "k1" } },
    });
    expect(reconciled).toMatchObject({
      outcome: "not-completed",
      evidence: {
        reads: [{ tool: "get", args: { key: "k1" }, result: { content: [{ text: '{"found":false}' }] } }],
        found: { key: "k1", stored: false },
      },
    });
  });

  it("a put killed after it ran is proved done by the key the server kept: its result is reused, the put is not repeated", async () => {
    const { db, witness, env } = setup();
    const runId = await killedAfterIntent(
      env,
      "put",
      { key: "k2", value: "v2" },
      "after-effect-before-outcome",
    );
    expect(puts(witness)).toEqual(["put k2"]);

    const restart = await worker({ ...env, HF_ACTION: "recover" });
    expect(line(restart, "recovery").report).toMatchObject({ held: [], reconciled: [`${runId}/1`] });
    expect(line(restart, "recovered").results).toMatchObject([{ runId, status: "completed" }]);
    expect(puts(witness)).toEqual(["put k2"]);
    const { reconciled } = await reconciledOf(db, runId);
    expect(reconciled).toMatchObject({
      outcome: "completed",
      evidence: { reads: [{ tool: "get", args: { key: "k2" } }], found: { storedBy: `${runId}/1#1` } },
    });
  });

  it("a check that cannot tell (the key was stored by another request) holds the run with its read as evidence; nothing is sent again", async () => {
    const { db, witness, env } = setup();
    const runId = await killedAfterIntent(env, "put", { key: "k3", value: "v3" });
    writeFileSync(env.HF_MCP_STORE, JSON.stringify({ k3: { value: "other", by: "someone-else#1" } }));

    const restart = await worker({ ...env, HF_ACTION: "recover" });
    expect(line(restart, "recovery").report).toMatchObject({
      held: [{ runId, reasons: [{ code: "reconcile-unknown", callId: `${runId}/1` }] }],
      reconciled: [],
    });
    expect(puts(witness)).toEqual([]);
    const { status, reconciled } = await reconciledOf(db, runId);
    expect(status).toBe("held");
    expect(reconciled).toBeUndefined();
    // The hold's reason carries the evidence: the read, its answer, what the check made of it.
    const report = line(restart, "recovery").report as {
      held: Array<{ reasons: Array<{ detail: string }> }>;
    };
    const message = report.held[0]!.reasons[0]!.detail;
    expect(message).toContain('reconciler "mcp:mcp__put" cannot tell whether it happened');
    expect(JSON.parse(message.slice(message.indexOf(": {") + 2))).toMatchObject({
      reads: [{ tool: "get", args: { key: "k3" } }],
      found: { storedBy: "someone-else#1" },
    });
  });
});

describe("mcpToolset({ reconcilers }) checks what it is given", () => {
  it("a reconciler for a tool the server does not list, or for a tool that also asks for replay, is refused", async () => {
    const dir = tempDir();
    const server = testServer({ HF_MCP_STORE: join(dir, "store.json") });
    const check = async () => ({ outcome: "unknown" as const, evidence: null });
    await expect(given.toolset(server, { reconcilers: { nope: { check } } })).rejects.toThrow(
      /names "nope", which holdfast-test-server 1\.0\.0 does not list; listed: lookup, retire, put, get/,
    );
    await expect(given.toolset(server, { replay: ["put"], reconcilers: { put: { check } } })).rejects.toThrow(
      /"put" both asks for replay and has a reconciler/,
    );
  });
});
