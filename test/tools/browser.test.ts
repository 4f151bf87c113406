import { existsSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { BrowserSession } from "../../src/adapters/integrations/tools/browserSession.js";
import { makeBrowserTool } from "../../src/adapters/integrations/tools/index.js";
import { DefiniteFailure } from "../../src/runtime/errors.js";
import { CHROMIUM } from "../http/browser/chromium.js";
import { lineOf, type ProcessResult, runScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { callContext, checkOf, probeOf } from "./calls.js";

const tempDir = useTempDir();
const WORKER = join(import.meta.dirname, "..", "support", "browser-worker.ts");

/**
 * The test site, the outside witness: a form whose submit the server counts (with the
 * idempotency key the browser sent), the list of orders, and a cookie login.
 */
const submits: Array<{ name: string; key: string | undefined }> = [];
/** The approvals the site counted (`GET /approve?order=N`), each answered by a redirect. */
const approvals: string[] = [];
let server: Server;
let site = "";
/** A port nothing listens on: a server's, closed again. */
let closedPort = 0;
const page = (title: string, body: string) =>
  `<!doctype html><html><head><title>${title}</title></head><body>${body}</body></html>`;

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(`no Chromium at ${CHROMIUM}; the browser tool is tested in a real browser`);
  server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    const html = (status: number, title: string, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "text/html; charset=utf-8", ...headers });
      res.end(page(title, body));
    };
    if (req.method === "GET" && url.pathname === "/form") {
      return html(
        200,
        "Order",
        '<form method="post" action="/submit"><input id="name" name="name"><button type="submit">Order</button></form>',
      );
    }
    if (req.method === "POST" && url.pathname === "/submit") {
      let body = "";
      req.on("data", (chunk) => {
        body += chunk;
      });
      req.on("end", () => {
        const name = new URLSearchParams(body).get("name") ?? "";
        const key = req.headers["idempotency-key"];
        submits.push({ name, key: typeof key === "string" ? key : undefined });
        html(200, "Thanks", `<h1 id="thanks">Thanks ${name}</h1>`);
      });
      return;
    }
    if (req.method === "GET" && url.pathname === "/orders") {
      return html(
        200,
        "Orders",
        `<ul>${submits.map((s) => `<li data-name="${s.name}">order of ${s.name}</li>`).join("")}</ul><p>${submits.length} orders</p>`,
      );
    }
    if (req.method === "GET" && url.pathname === "/submitted") {
      const key = url.searchParams.get("key");
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ found: submits.some((s) => s.key === key) }));
      return;
    }
    if (req.method === "GET" && url.pathname === "/approve") {
      // The approval takes effect, then the browser is sent to a port that refuses it.
      approvals.push(url.searchParams.get("order") ?? "");
      res.writeHead(302, { location: `http://127.0.0.1:${closedPort}/approved` });
      res.end();
      return;
    }
    if (req.method === "GET" && url.pathname === "/login") {
      return html(200, "Welcome", "<p>signed in</p>", {
        "set-cookie": "who=alice; Max-Age=3600; Path=/; HttpOnly; SameSite=Lax",
      });
    }
    if (req.method === "GET" && url.pathname === "/whoami") {
      const who = /(?:^|; )who=([^;]+)/.exec(req.headers.cookie ?? "")?.[1] ?? "nobody";
      return html(200, "Who", `<p id="who">${who}</p>`);
    }
    html(404, "Not found", "not found");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  site = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  closedPort = (closed.address() as AddressInfo).port;
  await new Promise<void>((resolve) => closed.close(() => resolve()));
});
afterAll(async () => {
  await new Promise<void>((resolve) => server?.close(() => resolve()));
});
afterEach(() => {
  submits.length = 0;
  approvals.length = 0;
});

const workerEnv = (extra: Record<string, string> = {}) => ({
  HF_DB: join(tempDir(), "journal.db"),
  HF_SITE: site,
  HOLDFAST_CHROMIUM: CHROMIUM,
  ...extra,
});

type Held = { held: Array<{ reasons: Array<{ code: string; detail: string }> }> };
/** The runs recovery held, as the worker reported them. */
const heldOf = (result: ProcessResult) => (lineOf(result, "recovery")?.report as Held | undefined)?.held;

describe("browser tool (real Chromium, a local site that counts its form submits)", () => {
  it("navigate, fill and submit complete and the site counts the order once, with the call's idempotency key; the read sees it", async () => {
    const run = await runScript(WORKER, { ...workerEnv(), HF_ACTION: "submit" });
    expect(run.code, run.stderr).toBe(0);
    expect(lineOf(run, "result")?.result).toMatchObject({
      status: "completed",
      output: {
        submitted: { action: "submit", url: `${site}/submit`, title: "Thanks", status: 200 },
        orders: expect.stringContaining("order of alice"),
      },
    });
    expect(submits).toEqual([{ name: "alice", key: expect.stringMatching(/\/2#1$/) }]);
  }, 120_000);

  it("a submit in doubt (SIGKILL after the effect, before its outcome) with no probe is held; nothing is sent again", async () => {
    const env = workerEnv();
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "browser",
      HOLDFAST_CRASH_SKIP: "2",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    expect(submits).toHaveLength(1);
    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(heldOf(recovered)).toEqual([
      expect.objectContaining({ reasons: [expect.objectContaining({ code: "in-doubt" })] }),
    ]);
    expect(submits).toHaveLength(1);
  }, 120_000);

  it("a submit in doubt with a probe is reconciled: the probe finds the order, the call is completed with the probe and its answer as evidence, the order counted once", async () => {
    const env = workerEnv({ HF_PROBE: "page" });
    const crashed = await runScript(WORKER, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "browser",
      HOLDFAST_CRASH_SKIP: "2",
    });
    expect(crashed.signal, crashed.stderr).toBe("SIGKILL");
    expect(submits).toHaveLength(1);
    const recovered = await runScript(WORKER, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    expect(heldOf(recovered)).toEqual([]);
    expect(lineOf(recovered, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: {
          submitted: { action: "submit", url: `${site}/orders`, title: "Orders", byProbe: true },
          orders: expect.stringContaining("1 orders"),
        },
      }),
    ]);
    expect(submits).toEqual([{ name: "alice", key: expect.stringMatching(/\/2#1$/) }]);
    // The evidence is in the journal: ask the reconciler directly for what it records.
    const browser = makeBrowserTool({
      executablePath: CHROMIUM,
      probes: {
        submit: {
          url: `${site}/orders`,
          selector: '[data-name="alice"]',
          check: (answer) => ((answer.found ?? 0) > 0 ? "done" : "unknown"),
        },
      },
    });
    try {
      const args = { action: "submit", selector: "form" } as const;
      const probe = probeOf(browser.act, args, "r/2#1");
      expect(probe).toEqual({
        action: "submit",
        probe: { url: `${site}/orders`, selector: '[data-name="alice"]' },
      });
      const verdict = await checkOf(browser.act, probe, "r/2#1");
      expect(verdict).toMatchObject({
        outcome: "completed",
        evidence: {
          action: "submit",
          probe: { url: `${site}/orders`, selector: '[data-name="alice"]' },
          answer: { url: `${site}/orders`, status: 200, found: 1, text: "order of alice" },
          verdict: "done",
        },
      });
    } finally {
      await browser.close();
    }
  }, 180_000);

  it("a probe's request, made by the probe's page, proves an action not done or done; an action with no probe of its own answers unknown", async () => {
    const browser = makeBrowserTool({
      executablePath: CHROMIUM,
      probes: {
        submit: {
          url: `${site}/form`,
          request: { url: (call) => `${site}/submitted?key=${encodeURIComponent(call.idempotencyKey)}` },
          check: (answer) =>
            (JSON.parse(answer.response?.body ?? "{}") as { found?: boolean }).found ? "done" : "not-done",
        },
      },
    });
    try {
      const submit = { action: "submit", selector: "form" } as const;
      const probe = probeOf(browser.act, submit, "r/2#1");
      expect(probe).toEqual({
        action: "submit",
        probe: { url: `${site}/form`, request: { url: `${site}/submitted?key=r%2F2%231`, method: "GET" } },
      });
      expect(await checkOf(browser.act, probe, "r/2#1")).toMatchObject({
        outcome: "not-completed",
        evidence: {
          answer: {
            url: `${site}/form`,
            status: 200,
            title: "Order",
            response: { status: 200, body: '{"found":false}' },
          },
          verdict: "not-done",
        },
      });
      submits.push({ name: "alice", key: "r/2#1" });
      expect(await checkOf(browser.act, probe, "r/2#1")).toMatchObject({
        outcome: "completed",
        result: { action: "submit", url: `${site}/form`, title: "Order", byProbe: true },
        evidence: { answer: { response: { body: '{"found":true}' } }, verdict: "done" },
      });
      const click = probeOf(browser.act, { action: "click", selector: "#name" }, "r/3#1");
      expect(click).toEqual({ action: "click", probe: null });
      expect(await checkOf(browser.act, click, "r/3#1")).toEqual({
        outcome: "unknown",
        evidence: { action: "click", probe: null, reason: 'no probe is declared for "click"' },
      });
    } finally {
      await browser.close();
    }
  }, 120_000);

  it("a `text` read in doubt is replayed once the safe list holds its pin (without it, its intent asks to hold and it is held); the submit is not sent again", async () => {
    const held = workerEnv();
    const crash = {
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-intent",
      HOLDFAST_CRASH_CALL: "browser_read",
    };
    const first = await runScript(WORKER, { ...held, ...crash });
    expect(first.signal, first.stderr).toBe("SIGKILL");
    const unlisted = await runScript(WORKER, { ...held, HF_ACTION: "recover" });
    expect(unlisted.code, unlisted.stderr).toBe(0);
    expect(heldOf(unlisted)).toEqual([
      expect.objectContaining({
        reasons: [
          expect.objectContaining({ code: "in-doubt", detail: expect.stringContaining("disposition hold") }),
        ],
      }),
    ]);

    submits.length = 0;
    const listed = workerEnv({ HF_ALLOWLIST: "read" });
    const second = await runScript(WORKER, { ...listed, ...crash });
    expect(second.signal, second.stderr).toBe("SIGKILL");
    expect(submits).toHaveLength(1);
    const replayed = await runScript(WORKER, { ...listed, HF_ACTION: "recover" });
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(heldOf(replayed)).toEqual([]);
    expect(lineOf(replayed, "recovered")?.results).toEqual([
      expect.objectContaining({
        status: "completed",
        output: expect.objectContaining({ orders: expect.stringContaining("order of alice") }),
      }),
    ]);
    expect(submits).toHaveLength(1);
  }, 240_000);

  it("the session outlives a restart only in a persistent profile (created 0700)", async () => {
    const twoProcesses = async (extra: Record<string, string>) => {
      const env = workerEnv({ HF_AGENT: "session", ...extra });
      const login = await runScript(WORKER, { ...env, HF_ACTION: "submit", HF_INPUT: "login" });
      expect(login.code, login.stderr).toBe(0);
      const who = await runScript(WORKER, { ...env, HF_ACTION: "submit", HF_INPUT: "who" });
      expect(who.code, who.stderr).toBe(0);
      return (lineOf(who, "result")?.result as { output?: string } | undefined)?.output;
    };
    expect(await twoProcesses({})).toBe("nobody");
    const profile = join(tempDir(), "profile", "browser");
    expect(await twoProcesses({ HF_PROFILE: profile })).toBe("alice");
    expect(statSync(profile).mode & 0o777).toBe(0o700);
  }, 240_000);

  it("an action that provably did nothing is a definite failure: no element, a refused connection, a page blank after a lost session", async () => {
    const browser = makeBrowserTool({ executablePath: CHROMIUM, timeoutMs: 2_000 });
    try {
      const run = (args: Parameters<typeof browser.act.run>[0], key: string) =>
        browser.act.run(args, callContext(key));
      await expect(run({ action: "click", selector: "#order" }, "r/0#1")).rejects.toThrow(
        expect.objectContaining({ name: "DefiniteFailure", message: expect.stringMatching(/page is blank/) }),
      );
      await run({ action: "navigate", url: `${site}/form` }, "r/1#1");
      const missing = await run({ action: "submit", selector: "form#nothing" }, "r/2#1").catch((e) => e);
      expect(missing).toBeInstanceOf(DefiniteFailure);
      expect(missing.message).toMatch(/no element matches/);
      const refused = await run(
        { action: "navigate", url: `http://127.0.0.1:${closedPort}/` },
        "r/3#1",
      ).catch((e) => e);
      expect(refused).toBeInstanceOf(DefiniteFailure);
      expect(refused.message).toMatch(/ERR_CONNECTION_REFUSED/);
      // A read that asks for replay fails definitely: it changed nothing.
      const unread = await browser.read
        .run({ action: "text", url: `${site}/form`, selector: "#nothing" }, callContext("r/4#1"))
        .catch((e) => e);
      expect(unread).toBeInstanceOf(DefiniteFailure);
      expect(unread.message).toMatch(/text failed/);
      expect(submits).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);

  it("a navigate whose request reached the site, then was redirected to a refused port, is in doubt, not a definite failure", async () => {
    const browser = makeBrowserTool({ executablePath: CHROMIUM, timeoutMs: 5_000 });
    try {
      const error = await browser.act
        .run({ action: "navigate", url: `${site}/approve?order=17` }, callContext("r/0#1"))
        .catch((e: unknown) => e);
      // The site counted the approval: the call took effect, so it must not say "nothing was sent".
      expect(approvals).toEqual(["17"]);
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(DefiniteFailure);
      expect((error as Error).message).toMatch(/ERR_CONNECTION_REFUSED.*in doubt/);
    } finally {
      await browser.close();
    }
  }, 120_000);

  it("a crashed page is closed and forgotten: the chat's next page is a new, blank one", async () => {
    const session = new BrowserSession({ executablePath: CHROMIUM });
    try {
      const { page, fresh } = await session.page("c");
      expect(fresh).toBe(true);
      await page.goto(`${site}/form`);
      const crashed = new Promise<void>((resolve) => page.once("crash", () => resolve()));
      await page.goto("chrome://crash").catch(() => undefined);
      await crashed;
      const next = await session.page("c");
      expect(next.fresh).toBe(true);
      expect(next.page).not.toBe(page);
      expect(next.page.url()).toBe("about:blank");
    } finally {
      await session.close();
    }
  }, 120_000);

  it("an action whose key header the browser refuses fails definitely, before anything is sent", async () => {
    const browser = makeBrowserTool({ executablePath: CHROMIUM, timeoutMs: 5_000, keyHeader: "Bad Header" });
    try {
      const error = await browser.act
        .run({ action: "navigate", url: `${site}/approve?order=18` }, callContext("r/0#1"))
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DefiniteFailure);
      expect((error as Error).message).toMatch(/nothing was sent/);
      expect(approvals).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 120_000);
});
