import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openRuntime, serve } from "../../src/index.js";
import { agents, tools } from "../support/fork-module.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
afterEach(() => {
  delete process.env.HF_WITNESS;
});

const lines = (path: string): string[] => readFileSync(path, "utf8").split("\n").filter(Boolean);

describe("POST /api/runs/:runId/fork", () => {
  it("records the fork with the token (the server has no agents); a worker with the agent continues it, reusing the calls before atCall", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    process.env.HF_WITNESS = witness;
    const first = await openRuntime({ store: db, agents, tools, tracing: false });
    let runId: string;
    try {
      const original = await first.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      await original.result;
      runId = original.runId;
    } finally {
      await first.close();
    }

    const server = await serve({ store: db, port: 0, tokenFile: join(dir, "token") });
    let forkId: string;
    try {
      const post = (body: unknown, token = server.token.token) =>
        server.app.request(`/api/runs/${runId}/fork`, {
          method: "POST",
          headers: {
            host: `127.0.0.1:${server.port}`,
            authorization: `Bearer ${token}`,
            "content-type": "application/json",
          },
          body: JSON.stringify(body),
        });
      const body = { atCall: 3, by: "ada", note: "replay the last two steps" };
      expect((await post(body, "x".repeat(32))).status).toBe(401);
      const refused = await post({ ...body, atCall: 7 });
      expect(refused.status).toBe(422);
      expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(
        /atCall 7 is past/,
      );

      const response = await post({ ...body, inputId: "fork-1" });
      expect(response.status).toBe(200);
      const reply = (await response.json()) as {
        runId: string;
        forkedFrom: string;
        queued: boolean;
        message: string;
      };
      expect(reply).toMatchObject({ forkedFrom: runId, queued: false, chatId: "c", reused: false });
      expect(reply.message).toMatch(/a worker with steps@1 takes it over/);
      forkId = reply.runId;
      // A client retrying the POST (its reply was lost) sends the same inputId: the same fork.
      const retried = await post({ ...body, inputId: "fork-1" });
      expect(retried.status).toBe(200);
      expect(await retried.json()).toMatchObject({ runId: forkId, reused: true });
    } finally {
      await server.close();
    }
    // Nothing ran yet: the server has no agents.
    expect(lines(witness)).toEqual(["1", "2", "3", "4", "5"]);

    const worker = await openRuntime({ store: db, agents, tools, tracing: false });
    try {
      expect(await worker.wait(forkId)).toMatchObject({ status: "completed" });
      expect(lines(witness)).toEqual(["1", "2", "3", "4", "5", "4", "5"]);
      expect((await worker.audit()).findings).toEqual([]);
    } finally {
      await worker.close();
    }
  });
});
