import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { signalUrlCommand } from "../../src/adapters/surfaces/cli/commands/signalUrl.js";
import {
  defineAgent,
  maskSignalUrl,
  openRuntime,
  type Runtime,
  type Server,
  serve,
} from "../../src/index.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const schemas = usePgSchemas();
afterAll(() => schemas.dropAll());

/** Waits for a payment webhook and returns what it got. */
const checkout = defineAgent({
  name: "checkout",
  version: "1",
  run: async (turn) => turn.waitFor("paid"),
});

let runtime: Runtime | null = null;
let server: Server | null = null;
afterEach(async () => {
  await server?.close();
  await runtime?.close();
  server = null;
  runtime = null;
});

const setUp = async (store?: string) => {
  const dir = tempDir();
  const db = store ?? join(dir, "journal.db");
  runtime = await openRuntime({ store: db, agents: [checkout], tracing: false });
  server = await serve({ store: db, port: 0, tokenFile: join(dir, "token"), runtime });
  const waiting = async (inputId: string) => {
    const handle = await runtime!.submit({
      chatId: `c-${inputId}`,
      inputId,
      agent: "checkout",
      content: null,
    });
    expect(await handle.result).toMatchObject({ status: "waiting", wait: "signal", name: "paid" });
    return handle.runId;
  };
  return { db, dir, runtime, server, waiting };
};

const post = (url: string, body: string, headers: Record<string, string> = {}) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });

const received = async (rt: Runtime, runId: string) =>
  (await rt.events(runId)).filter((e) => e.event.type === "signal.received");

const ended = async (rt: Runtime, runId: string) => {
  for (;;) {
    const row = await rt.run(runId);
    if (row && ["completed", "failed", "stopped", "cancelled", "held"].includes(row.status))
      return rt.wait(runId);
    await new Promise((r) => setTimeout(r, 20));
  }
};

const engines: ReadonlyArray<readonly [string, () => Promise<string | undefined>]> = [
  ["libSQL", async () => undefined],
  [
    "PostgreSQL",
    async () => {
      await requirePg();
      return pgUrl(schemas.fresh());
    },
  ],
];

describe.each(engines)("a run's signal URL for webhooks, end to end (%s)", (_name, storeOf) => {
  it("records the signal once per delivery id, wakes the waiting run, and keeps its token out of the journal", async () => {
    const g = await setUp(await storeOf());
    const runId = await g.waiting("i-1");
    const url = g.server.signalUrl(runId, "paid");
    const token = new URL(url).searchParams.get("token")!;
    expect(maskSignalUrl(url)).not.toContain(token);
    expect(maskSignalUrl(url)).toContain("token=***");
    const first = await post(url, JSON.stringify({ amount: 42 }), { "X-GitHub-Delivery": "d-1" });
    expect(first.status).toBe(200);
    expect(await first.json()).toMatchObject({ accepted: true, recorded: true, signalId: "d-1" });
    const again = await post(url, JSON.stringify({ amount: 42 }), { "X-GitHub-Delivery": "d-1" });
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ accepted: true, recorded: false });
    expect(await ended(g.runtime, runId)).toMatchObject({
      status: "completed",
      output: { timedOut: false, signalId: "d-1", payload: { amount: 42 } },
    });
    const events = await g.runtime.events(runId);
    expect((await received(g.runtime, runId)).map((e) => e.event)).toMatchObject([
      { signalId: "d-1", name: "paid", by: "webhook" },
    ]);
    expect(JSON.stringify(events)).not.toContain(token);
    expect((await g.runtime.audit()).findings).toEqual([]);
  });
});

describe("a run's signal URL for webhooks (decision 0056)", () => {
  it("without a delivery id, the same body twice is recorded once (its digest is the id), whatever X-Request-Id a proxy adds", async () => {
    const g = await setUp();
    const runId = await g.waiting("i-1");
    const url = g.server.signalUrl(runId, "paid");
    // A proxy's X-Request-Id is fresh on every request: it is not the delivery's id.
    for (let i = 0; i < 2; i++)
      expect((await post(url, '{"amount":7}', { "X-Request-Id": `proxy-${i}` })).status).toBe(200);
    const signals = await received(g.runtime, runId);
    expect(signals).toHaveLength(1);
    expect((signals[0]!.event as { signalId: string }).signalId).toMatch(/^body-sha256:[0-9a-f]{64}$/);
  });

  it("refuses a wrong token, another run's token and another name's token with 401; nothing is written", async () => {
    const g = await setUp();
    const runId = await g.waiting("i-1");
    const other = await g.waiting("i-2");
    const before = [(await g.runtime.events(runId)).length, (await g.runtime.events(other)).length];
    const tokenOf = (u: string) => new URL(u).searchParams.get("token")!;
    const path = `${g.server.url}/hooks/runs/${runId}/signals/paid`;
    const attempts = [
      path,
      `${path}?token=`,
      `${path}?token=${"A".repeat(43)}`,
      `${path}?token=${tokenOf(g.server.signalUrl(other, "paid"))}`,
      `${path}?token=${tokenOf(g.server.signalUrl(runId, "refunded"))}`,
      // A right token on another name's path, and with the server's bearer token instead.
      `${g.server.url}/hooks/runs/${runId}/signals/refunded?token=${tokenOf(g.server.signalUrl(runId, "paid"))}`,
      `${path}?token=${encodeURIComponent(g.server.token.token)}`,
    ];
    for (const attempt of attempts) {
      const response = await post(attempt, "{}", { "Idempotency-Key": "k" });
      expect(response.status, attempt).toBe(401);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    }
    // The signal URL's token opens nothing else: not the API.
    const read = await fetch(
      `${g.server.url}/api/runs/${runId}?token=${tokenOf(g.server.signalUrl(runId, "paid"))}`,
    );
    expect(read.status).toBe(401);
    expect([(await g.runtime.events(runId)).length, (await g.runtime.events(other)).length]).toEqual(before);
    expect((await g.runtime.run(runId))?.status).toBe("waiting");
  });

  it("refuses a body over the API's limit with 413 and writes nothing", async () => {
    const g = await setUp();
    const runId = await g.waiting("i-1");
    const before = (await g.runtime.events(runId)).length;
    const big = JSON.stringify({ blob: "x".repeat(4 * 1024 * 1024) });
    const response = await post(g.server.signalUrl(runId, "paid"), big);
    expect(response.status).toBe(413);
    expect((await g.runtime.events(runId)).length).toBe(before);
  });

  it("`holdfast signal-url` prints the URL the server accepts, from the server's token file", async () => {
    const g = await setUp();
    const runId = await g.waiting("i-1");
    const printed: string[] = [];
    const io = {
      out: { lines: async (lines: string[]) => void printed.push(...lines), json: async () => undefined },
    } as unknown as Parameters<typeof signalUrlCommand>[3];
    const code = await signalUrlCommand(
      runId,
      "paid",
      { base: g.server.url, db: g.db, tokenFile: join(g.dir, "token") },
      io,
    );
    expect(code).toBe(0);
    expect(printed).toEqual([g.server.signalUrl(runId, "paid")]);
    expect((await post(printed[0]!, "true", { "Idempotency-Key": "cli-1" })).status).toBe(200);
    expect(await ended(g.runtime, runId)).toMatchObject({ status: "completed", output: { payload: true } });
  });
});
