import { join } from "node:path";
import { Schema } from "effect";
import { afterEach, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime, type Runtime, serve } from "../../src/index.js";
import { runCli } from "../cli/cliProcess.js";
import { useTempDir } from "../support/tmp.js";

/*
 * What happens next (decision 0053): after a decision, a retry grant or a cancel, the CLI and the
 * API say which runtime continues the run and whether one is live now — from the runtime registry.
 */

const tempDir = useTempDir();
const failing = { send: true };

const send = defineTool({
  name: "send",
  args: Schema.Struct({ to: Schema.String }),
  run: async ({ to }) => {
    if (failing.send) throw new Error("connection reset after send");
    return { sent: to };
  },
});

const mailer = defineAgent({
  name: "mailer",
  version: "1",
  run: async (turn, input: { to: string }) => turn.tool(send, { to: input.to }),
});

const open: Runtime[] = [];
afterEach(async () => {
  for (const runtime of open.splice(0)) await runtime.close();
  failing.send = true;
});

/** A journal with one run held on an in-doubt `send`, and no runtime left open on it. */
const heldRun = async (db: string, chatId = "chat-1") => {
  const runtime = await openRuntime({ store: db, agents: [mailer], tools: [send] });
  try {
    const handle = await runtime.submit({ chatId, inputId: "i-1", agent: "mailer", content: { to: "ada" } });
    expect((await handle.result).status).toBe("held");
    return { runId: handle.runId, version: (await runtime.events(handle.runId)).length };
  } finally {
    await runtime.close();
  }
};

const decide = async (db: string, runId: string, version: number) => {
  const result = await runCli([
    "decide",
    runId,
    "confirmed-not-completed",
    "--note",
    "not in the sent folder",
    "--based-on",
    String(version),
    "--db",
    db,
    "--json",
  ]);
  expect(result.code, result.stderr).toBe(0);
  return JSON.parse(result.stdout) as { status: string; live: boolean; next: string };
};

describe("the CLI names the runtime that continues a run and whether one is live", () => {
  it("with no runtime of the agent open, a decision says none is live and the run waits for one", async () => {
    const db = join(tempDir(), "journal.db");
    const { runId, version } = await heldRun(db);
    const reply = await decide(db, runId, version);
    expect(reply).toMatchObject({ status: "running", live: false });
    expect(reply.next).toContain('no runtime with agent "mailer@1" is live now');
    expect(reply.next).toContain("the run continues when one opens this journal");
    // Readers see the same: nobody owns it, so it is stalled.
    const runs = JSON.parse((await runCli(["runs", "--db", db, "--json", "--status", "stalled"])).stdout);
    expect(runs).toMatchObject([{ runId, stalled: true, stalledBecause: "no-owner" }]);
  });

  it("with a worker of the agent open (it recovers every half lease), a decision names it, live now", async () => {
    const db = join(tempDir(), "journal.db");
    const { runId, version } = await heldRun(db);
    const worker = await openRuntime({
      store: db,
      agents: [mailer],
      tools: [send],
      recovery: { onOpen: false, leaseMs: 4000, passEveryMs: 2000 },
    });
    open.push(worker);
    const reply = await decide(db, runId, version);
    expect(reply).toMatchObject({ status: "running", live: true });
    expect(reply.next).toContain(`pid ${process.pid} continues the run`);
    expect(reply.next).toContain("picks the run up at its next recovery pass (every 2 s)");
  });

  it("a cancel of a held run says it is stopped and nothing more runs it", async () => {
    const db = join(tempDir(), "journal.db");
    const { runId } = await heldRun(db);
    const cancelled = await runCli(["cancel", runId, "--db", db, "--json"]);
    expect(cancelled.code, cancelled.stderr).toBe(0);
    expect(JSON.parse(cancelled.stdout)).toMatchObject({
      status: "stopped",
      live: false,
      next: expect.stringContaining("the run is stopped; nothing more runs"),
    });
  });
});

describe("the API's replies say it too", () => {
  it("a decision's reply says no runtime is live; with one open, the next reply names it", async () => {
    const db = join(tempDir(), "journal.db");
    const first = await heldRun(db, "chat-1");
    const second = await heldRun(db, "chat-2");
    const server = await serve({ store: db, port: 0, tokenFile: join(tempDir(), "token") });
    const post = async (path: string, body: unknown) => {
      const response = await server.app.request(path, {
        method: "POST",
        headers: {
          host: `127.0.0.1:${server.port}`,
          authorization: `Bearer ${server.token.token}`,
          "content-type": "application/json",
        },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(200);
      return (await response.json()) as {
        status: string;
        next: { live: boolean; text: string; agent: string };
      };
    };
    try {
      const none = await post(`/api/runs/${first.runId}/decisions`, {
        basedOnVersion: first.version,
        decidedBy: "ada",
        decision: "confirmed-not-completed",
        note: "not in the sent folder",
      });
      expect(none).toMatchObject({ status: "running", next: { live: false, agent: "mailer@1" } });
      expect(none.next.text).toContain('no runtime with agent "mailer@1" is live now');

      const worker = await openRuntime({
        store: db,
        agents: [mailer],
        tools: [send],
        recovery: { onOpen: false, leaseMs: 4000, passEveryMs: 2000 },
      });
      open.push(worker);
      const live = await post(`/api/runs/${second.runId}/decisions`, {
        basedOnVersion: second.version,
        decidedBy: "ada",
        decision: "confirmed-not-completed",
        note: "not in the sent folder",
      });
      expect(live).toMatchObject({ status: "running", next: { live: true } });
      expect(live.next.text).toContain(`pid ${process.pid} continues the run`);

      const cancelled = await post(`/api/runs/${first.runId}/cancel`, { by: "ada" });
      expect(cancelled.next.text).toMatch(/cancels it|is cancelled/);
    } finally {
      await server.close();
    }
  });
});
