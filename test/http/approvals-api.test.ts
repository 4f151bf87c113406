import { join } from "node:path";
import { Schema } from "effect";
import { afterEach, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime, type Runtime, type Server, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();

const effects: string[] = [];
const ship = defineTool({
  name: "ship",
  description: "Ships an order",
  args: Schema.Struct({ order: Schema.String }),
  approval: "required",
  run: async ({ order }) => {
    effects.push(order);
    return `shipped ${order}`;
  },
});
const shipper = defineAgent({
  name: "shipper",
  version: "1",
  run: async (turn) => turn.tool(ship, { order: "o-1" }),
});

let runtime: Runtime | null = null;
let server: Server | null = null;
afterEach(async () => {
  await server?.close();
  await runtime?.close();
  server = null;
  runtime = null;
});

const post = (path: string, body: unknown, token: string | null) =>
  fetch(`${server!.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });

describe("the JSON API: approvals", () => {
  it("approve with the bearer token on the version looked at; stale is 409 with the current version, nothing written", async () => {
    effects.length = 0;
    const dir = tempDir();
    const db = join(dir, "journal.db");
    runtime = await openRuntime({ store: db, agents: [shipper], tools: [ship], tracing: false });
    server = await serve({ store: db, port: 0, tokenFile: join(dir, "token"), runtime });
    const token = server.token.token;
    const handle = await runtime.submit({ chatId: "c", inputId: "i", agent: "shipper", content: null });
    expect(await handle.result).toMatchObject({ status: "waiting", wait: "approval" });
    const view = (await (
      await fetch(`${server.url}/api/runs/${handle.runId}`, { headers: { authorization: `Bearer ${token}` } })
    ).json()) as { run: { waiting: unknown } };
    expect(view.run.waiting).toMatchObject({ wait: "approval", callId: `${handle.runId}/0` });
    const version = (await runtime.events(handle.runId)).at(-1)!.version;
    const path = `/api/runs/${handle.runId}/calls/0/approve`;
    expect((await post(path, { basedOnVersion: version, by: "ada" }, null)).status).toBe(401);
    const stale = await post(path, { basedOnVersion: version - 1, by: "ada" }, token);
    expect(stale.status).toBe(409);
    expect(((await stale.json()) as { error: unknown }).error).toMatchObject({
      code: "stale-decision",
      currentVersion: version,
    });
    const deny = await post(
      `/api/runs/${handle.runId}/calls/0/deny`,
      { basedOnVersion: version, by: "ada" },
      token,
    );
    expect(deny.status).toBe(422);
    expect((await runtime.events(handle.runId)).length).toBe(version);
    const ok = await post(path, { basedOnVersion: version, by: "ada", note: "go" }, token);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({
      decision: "approved",
      callId: `${handle.runId}/0`,
      edited: false,
    });
    for (;;) {
      if ((await runtime.run(handle.runId))?.status === "completed") break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(effects).toEqual(["o-1"]);
    const again = await post(path, { basedOnVersion: version + 1, by: "ada" }, token);
    expect(again.status).toBe(409);
    expect(((await again.json()) as { error: { code: string } }).error.code).toBe("not-awaiting-approval");
  });
});
