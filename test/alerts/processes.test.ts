import { type ChildProcess, spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openStore } from "../../src/adapters/store.js";
import { serve } from "../../src/index.js";
import { ROOT, runCli } from "../cli/cliProcess.js";
import { ALERT_SECRET } from "../support/alert-module.js";
import { pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { startWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";

/*
 * Alerts from real processes (decision 0065): two `holdfast worker --notify-url` processes on one
 * PostgreSQL journal send a held run's alert once; `serve` with alerts reports a run whose owner
 * was SIGKILLed as stalled.
 */

const tempDir = useTempDir();
const schemas = usePgSchemas();
const MAIN = join(ROOT, "src", "adapters", "surfaces", "cli", "main.ts");
const MODULE = join(ROOT, "test", "support", "alert-module.ts");

beforeAll(async () => {
  await requirePg();
});
afterAll(async () => {
  await schemas.dropAll();
});

const webhook = async () => {
  const bodies: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => {
      body += chunk.toString("utf8");
    });
    req.on("end", () => {
      bodies.push(body);
      res.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    bodies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
};

const until = async (what: string, check: () => boolean | Promise<boolean>, ms = 30_000) => {
  const started = Date.now();
  while (!(await check())) {
    if (Date.now() - started > ms) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
};

/** `holdfast worker --json --notify-url …` as a child process. */
const workerCli = (store: string, url: string, extra: ReadonlyArray<string> = []) => {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      MAIN,
      "worker",
      "--store",
      store,
      "--module",
      MODULE,
      "--notify-url",
      url,
      "--json",
      ...extra,
    ],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        HOLDFAST_STORE: "",
        HOLDFAST_WORKER_ID: "",
        HOLDFAST_ALERT_EVERY_MS: "20",
        HOLDFAST_ALERT_RETRY_MS: "50",
      },
      stdio: [extra.includes("--stdin") ? "pipe" : "ignore", "pipe", "pipe"],
    },
  );
  let out = "";
  let err = "";
  child.stdout?.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    err += chunk;
  });
  const exit = new Promise<void>((resolve) => child.on("close", () => resolve()));
  return {
    child,
    output: () => out,
    errors: () => err,
    started: () => until(`worker started: ${err}`, () => out.includes('"kind":"started"')),
    stop: async () => {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exit;
    },
  };
};

describe("holdfast worker --notify-url", () => {
  it("two workers on one PostgreSQL journal send a held run's alert once, with nothing secret in it", async () => {
    const hook = await webhook();
    const store = pgUrl(schemas.fresh());
    const a = workerCli(store, hook.url, ["--stdin"]);
    await a.started();
    const b = workerCli(store, hook.url);
    try {
      await b.started();
      a.child.stdin?.write(
        `${JSON.stringify({ chatId: "c1", inputId: "i1", agent: "billing", content: { key: ALERT_SECRET } })}\n`,
      );
      await until("the alert", () => hook.bodies.length >= 1);
      // Both keep looking every 20 ms: a second send would come well within this.
      await new Promise((r) => setTimeout(r, 1_500));
      expect(hook.bodies).toHaveLength(1);
      const alert = JSON.parse(hook.bodies[0] ?? "{}");
      expect(alert).toMatchObject({
        type: "holdfast.alert",
        kind: "held",
        agent: "billing@3",
        reason: "indefinite-failure",
      });
      expect(hook.bodies[0]).not.toContain(ALERT_SECRET);
      // The worker that sent it says so, in one line; the other says nothing of it.
      const alertLines = [a, b]
        .flatMap((w) => w.output().split("\n"))
        .filter((line) => line.includes('"kind":"alert"'))
        .map((line) => JSON.parse(line));
      expect(alertLines).toEqual([
        expect.objectContaining({
          kind: "alert",
          runId: alert.runId,
          alert: "held",
          attempt: 1,
          delivered: true,
        }),
      ]);
      expect(a.output() + b.output()).not.toContain(ALERT_SECRET);
      const journal = await openStore(store);
      try {
        const [recorded] = await journal.alerts();
        expect(recorded).toMatchObject({ key: alert.id, attempts: 1 });
        expect(recorded?.deliveredAt).not.toBeNull();
      } finally {
        await journal.close();
      }
    } finally {
      await a.stop();
      await b.stop();
      await hook.close();
    }
  });

  it("a --notify-url that is not a URL is a usage error that names the flag", async () => {
    const result = await runCli([
      "worker",
      "--store",
      join(tempDir(), "journal.db"),
      "--module",
      MODULE,
      "--notify-url",
      "not a url",
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--notify-url");
  });
});

describe("serve with alerts", () => {
  it("serve --notify-url that is not http(s) is a usage error that names the flag, and nothing listens", async () => {
    const store = join(tempDir(), "journal.db");
    const made = await runCli(["demo", "--db", store, "--json"]);
    expect(made.code, made.stderr).toBe(0);
    const result = await runCli([
      "serve",
      "--db",
      store,
      "--port",
      "0",
      "--notify-url",
      "mailto:ops@example.com",
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--notify-url: the alert URL must be http(s), got mailto:");
  });

  it("a run whose owner was SIGKILLed is alerted as stalled (owner-dead), once", async () => {
    const hook = await webhook();
    const store = join(tempDir(), "journal.db");
    const owner = startWorker({
      HF_DB: store,
      HF_WITNESS: join(tempDir(), "witness.txt"),
      HF_ACTION: "submit",
      HF_CHAT: "chat-1",
      HF_INPUT: "input-1",
      HF_AGENT: "gated",
    });
    await owner.waitFor("gated");
    const server = await serve({
      store,
      port: 0,
      tokenFile: join(tempDir(), "token"),
      alerts: { url: hook.url, everyMs: 25, stalledForMs: 100 },
    });
    try {
      // A live owner: nothing to alert.
      await new Promise((r) => setTimeout(r, 300));
      expect(hook.bodies).toHaveLength(0);
      await owner.kill();
      await until("the stalled alert", () => hook.bodies.length >= 1);
      await new Promise((r) => setTimeout(r, 300));
      expect(hook.bodies).toHaveLength(1);
      const alert = JSON.parse(hook.bodies[0] ?? "{}");
      expect(alert).toMatchObject({ kind: "stalled", reason: "owner-dead", agent: "gated@1" });
      expect(alert.id).toMatch(/\/stalled$/);
      expect(alert.panelUrl).toBe(`${server.url}/runs/${alert.runId}`);
    } finally {
      await server.close();
      await owner.kill();
      await hook.close();
    }
  });
});
