import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { defineAgent, openRuntime, type Runtime, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { runCli } from "./cliProcess.js";

const tempDir = useTempDir();

const listener = defineAgent({
  name: "listener",
  version: "1",
  run: async (turn) => turn.waitFor("go"),
});

const parked = async (runtime: Runtime, chatId: string) => {
  const handle = await runtime.submit({ chatId, inputId: "i", agent: "listener", content: null });
  expect(await handle.result).toMatchObject({ status: "waiting", wait: "signal", name: "go" });
  return handle.runId;
};

describe("holdfast signal", () => {
  it("records the signal once per --signal-id; the waiting run is woken by a worker and takes it", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const runtime = await openRuntime({ store: db, agents: [listener], tracing: false });
    try {
      const runId = await parked(runtime, "c1");
      const file = join(dir, "payload.json");
      writeFileSync(file, JSON.stringify({ approved: true }));
      const sent = await runCli([
        "signal",
        runId,
        "go",
        "--payload-file",
        file,
        "--signal-id",
        "s-1",
        "--by",
        "ada",
        "--db",
        db,
        "--json",
      ]);
      expect(sent.code).toBe(0);
      expect(JSON.parse(sent.stdout)).toMatchObject({
        accepted: true,
        recorded: true,
        wakes: true,
        by: "ada",
      });
      const again = await runCli([
        "signal",
        runId,
        "go",
        "--payload",
        '{"approved":true}',
        "--signal-id",
        "s-1",
        "--db",
        db,
      ]);
      expect(again.code).toBe(0);
      expect(again.stdout).toContain("recorded in run");
      expect(again.stdout).toContain("before; nothing new was written");
      const other = await runCli([
        "signal",
        runId,
        "go",
        "--payload",
        '{"approved":false}',
        "--signal-id",
        "s-1",
        "--db",
        db,
      ]);
      expect(other.code).toBe(1);
      expect(other.stdout).toContain("another payload");
      for (;;) {
        if ((await runtime.run(runId))?.status === "completed") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(await runtime.wait(runId)).toMatchObject({
        status: "completed",
        output: { timedOut: false, signalId: "s-1", payload: { approved: true } },
      });
      const missing = await runCli(["signal", runId, "go", "--db", db]);
      expect(missing.code).not.toBe(0);
      expect(missing.stderr).toContain("--signal-id");
      const ended = await runCli(["signal", runId, "go", "--signal-id", "s-2", "--db", db]);
      expect(ended.code).toBe(1);
      expect(ended.stdout).toContain("already ended (completed)");
    } finally {
      await runtime.close();
    }
  });
});

describe("POST /api/runs/:runId/signals", () => {
  it("takes a bearer token; records a signal once per signalId; 409 for an id reused with another payload", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const runtime = await openRuntime({ store: db, agents: [listener], tracing: false });
    const server = await serve({ store: db, port: 0, tokenFile: join(dir, "token"), runtime });
    try {
      const runId = await parked(runtime, "c1");
      const post = (body: unknown, bearer = server.token.token) =>
        server.app.request(`/api/runs/${runId}/signals`, {
          method: "POST",
          headers: {
            host: `127.0.0.1:${server.port}`,
            authorization: `Bearer ${bearer}`,
            "content-type": "application/json",
          },
          body: JSON.stringify(body),
        });
      const body = { name: "go", payload: { n: 1 }, signalId: "s-1", by: "hook" };
      expect((await post(body, "wrong")).status).toBe(401);
      const first = await post(body);
      expect(first.status).toBe(200);
      expect(await first.json()).toMatchObject({ accepted: true, recorded: true, wakes: true });
      const again = await post(body);
      expect(again.status).toBe(200);
      expect(await again.json()).toMatchObject({ accepted: true, recorded: false });
      const other = await post({ ...body, payload: { n: 2 } });
      expect(other.status).toBe(409);
      expect(await other.json()).toMatchObject({ accepted: false, reason: "signal-id-conflict" });
      for (;;) {
        if ((await runtime.run(runId))?.status === "completed") break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const events = await runtime.events(runId);
      expect(events.filter((e) => e.event.type === "signal.received")).toHaveLength(1);
    } finally {
      await server.close();
      await runtime.close();
    }
  });
});
