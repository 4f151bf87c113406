import { existsSync, readFileSync } from "node:fs";
import { createServer, type Server as NodeServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import type { Browser, BrowserContext, Locator, Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { DECISION_MEANINGS } from "../../src/adapters/surfaces/cli/commands/decide.js";
import type { DecisionKind } from "../../src/events/index.js";
import { defineAgent, openReader, openRuntime, type Runtime, type Server, serve } from "../../src/index.js";
import { lineOf, runScript, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";
import { launchChromium, screenshot, signIn, waitLive } from "./browser/chromium.js";
import { endedRun, type HeldRun, heldRun, openPanelRuntime, waitFor } from "./browser/runs.js";

/**
 * The Recovery panel in real Chromium (Debian's headless shell, never skipped), on real journals
 * (libSQL files in temp folders), with real child processes where a crash is the point. Set
 * HOLDFAST_SCREENSHOTS=1 to write the screenshots docs/panel.md shows.
 */
const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

/** What a test opened, closed after it (browser contexts first, then servers, then runtimes). */
const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

const newContext = async (): Promise<BrowserContext> => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: "light" });
  opened.push(() => context.close());
  return context;
};

const started = async (server: Promise<Server>): Promise<Server> => {
  const s = await server;
  opened.push(() => s.close());
  return s;
};

/** A journal with the test agents, served with their runtime (decided runs continue at once). */
const panelWithRuntime = async () => {
  const journal = await openPanelRuntime(tempDir());
  opened.push(() => journal.runtime.close());
  const server = await started(serve({ store: journal.store, port: 0, runtime: journal.runtime }));
  return { ...journal, server };
};

const api = (server: Server, path: string, body: unknown) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const postResponse = (page: Page, pathEnd: string) =>
  page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname.endsWith(pathEnd));

/** Fill a call's decision form on the run page and press "Review decision…". */
const review = async (
  page: Page,
  callId: string,
  decision: DecisionKind,
  fields: { readonly note?: string; readonly result?: string } = {},
) => {
  const form = page.locator(`form.decide[data-call="${callId}"]`);
  await form.locator(`input[name="decision"][value="${decision}"]`).check();
  if (fields.note !== undefined) await form.locator('textarea[name="note"]').fill(fields.note);
  if (fields.result !== undefined) await form.locator('textarea[name="result"]').fill(fields.result);
  const [response] = await Promise.all([
    postResponse(page, "/decide"),
    form.locator("button[type=submit]").click(),
  ]);
  return response;
};

/** What an element says, whitespace collapsed as a reader sees it. */
const text = async (locator: Locator): Promise<string> =>
  ((await locator.textContent()) ?? "").replace(/\s+/g, " ").trim();

/** A plain GET to 127.0.0.1 with a Host of the caller's choosing: its Location and body, as text. */
const ask = (port: number, path: string, host = `127.0.0.1:${port}`): Promise<string> =>
  new Promise((resolve, reject) => {
    const req = request(
      { host: "127.0.0.1", port, path, headers: { host, accept: "text/html" } },
      (response) => {
        let body = "";
        response.setEncoding("utf8");
        response.on("data", (chunk: string) => {
          body += chunk;
        });
        response.on("end", () => resolve(`${response.headers.location ?? ""} ${body}`));
      },
    );
    req.on("error", reject);
    req.end();
  });

/** A table row's cells, each as a reader sees it. */
const cells = async (row: Locator): Promise<string[]> =>
  Promise.all((await row.locator("td").all()).map(text));

const eventCount = async (runtime: Runtime, runId: string) => (await runtime.events(runId)).length;

describe("docs/panel.md", () => {
  it("gives each decision's meaning in the words of `holdfast show`, and shows only screenshots the tests take", () => {
    const page = readFileSync(join(ROOT, "docs", "panel.md"), "utf8");
    for (const [decision, meaning] of Object.entries(DECISION_MEANINGS)) {
      expect(page).toContain(`| \`${decision}\``);
      expect(page).toContain(meaning);
    }
    const shown = [...page.matchAll(/\]\(panel\/([\w-]+)\.png\)/g)].map((m) => m[1]);
    const taken = [
      import.meta.filename,
      join(import.meta.dirname, "liveness.browser.test.ts"),
      join(import.meta.dirname, "versions.browser.test.ts"),
      join(import.meta.dirname, "approval.browser.test.ts"),
      join(import.meta.dirname, "bulk.browser.test.ts"),
    ].flatMap((file) =>
      [...readFileSync(file, "utf8").matchAll(/screenshot\(page, "([\w-]+)"\)/g)].map((m) => m[1]),
    );
    expect(shown.toSorted()).toEqual(taken.toSorted());
    for (const name of shown) expect(existsSync(join(ROOT, "docs", "panel", `${name}.png`))).toBe(true);
  });
});

describe("signing in", () => {
  it("the form with the server's token sets an HttpOnly SameSite=Strict session cookie; a wrong token is refused and sets none", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    await (await openRuntime({ store, agents: [], tools: [] })).close();
    const server = await started(serve({ store, port: 0 }));
    const context = await newContext();
    const page = await context.newPage();

    await page.goto(`${server.panelUrl}/`);
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.fill("#token", "not-the-token-but-long-enough-to-look-real");
    await page.fill("#name", "mallory");
    const [refused] = await Promise.all([postResponse(page, "/login"), page.click("button[type=submit]")]);
    expect(refused.status()).toBe(401);
    expect(await text(page.locator(".banner-error"))).toBe("That is not the server's token.");
    expect(await context.cookies()).toEqual([]);
    await page.goto(`${server.panelUrl}/`);
    expect(new URL(page.url()).pathname).toBe("/login");

    await page.fill("#token", server.token.token);
    await page.fill("#name", "ada");
    await Promise.all([page.waitForURL(`${server.panelUrl}/`), page.click("button[type=submit]")]);
    const cookies = await context.cookies();
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({
      name: "holdfast_session",
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
    });
    expect(await page.evaluate("document.cookie")).toBe("");
    expect(await text(page.locator(".who strong"))).toBe("ada");
    expect(await text(page.locator("#needs-none"))).toBe("No run is waiting for a person.");
  });
});

describe("the panel's origin", () => {
  it("R2: the session cookie stays on the panel's own host name: another port on 127.0.0.1 receives none, and the cookie counts for nothing on 127.0.0.1", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    const run = await heldRun(runtime, "once", "victim");
    await runtime.close();
    const server = await started(serve({ store, port: 0 }));
    const received: string[] = [];
    const other: NodeServer = createServer((request, response) => {
      received.push(request.headers.cookie ?? "");
      response.end("another local server");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    opened.push(() => new Promise<void>((resolve) => other.close(() => resolve())));
    const otherPort = (other.address() as AddressInfo).port;

    // A browser that opens the server's loopback address is told to open the address `serve`
    // printed, and is not sent there (that would tell the panel's name to anyone).
    const context = await newContext();
    const opening = await context.newPage();
    const shown = await opening.goto(`${server.url}/runs/${run.runId}`);
    expect(shown?.status()).toBe(404);
    expect(opening.url()).toBe(`${server.url}/runs/${run.runId}`);
    expect(await text(opening.locator("h1"))).toBe("The panel is not served here");
    expect(await opening.content()).not.toContain(new URL(server.panelUrl).hostname);
    await opening.close();
    const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${run.runId}`);
    const csrf = await page.locator(`form.decide input[name="_csrf"]`).first().inputValue();
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: "holdfast_session", domain: new URL(server.panelUrl).hostname });

    // The person visits other local servers: none of them is sent the session.
    for (const host of ["127.0.0.1", "localhost"]) await page.goto(`http://${host}:${otherPort}/`);
    expect(received).toHaveLength(2);
    expect(received.filter((header) => header.includes("holdfast_session"))).toEqual([]);

    // The cookie presented on the loopback address (as a replay would) neither reads nor decides.
    const reader = await openReader({ store });
    opened.push(() => reader.close());
    const before = await reader.audit();
    const replay = { cookie: `holdfast_session=${cookie!.value}`, origin: server.url };
    const form = await fetch(`${server.url}/runs/${run.runId}/decide`, {
      method: "POST",
      redirect: "manual",
      headers: { ...replay, "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({
        _csrf: csrf,
        confirm: "yes",
        basedOnVersion: String(run.version),
        callId: run.calls[0]!,
        decision: "new-attempt",
      }).toString(),
    });
    expect(form.status).toBe(404);
    expect(form.headers.get("location")).toBeNull();
    const json = await fetch(`${server.url}/api/runs/${run.runId}/decisions`, {
      method: "POST",
      headers: { ...replay, "x-csrf-token": csrf, "content-type": "application/json" },
      body: JSON.stringify({
        basedOnVersion: run.version,
        decidedBy: "ada",
        calls: { [run.calls[0]!]: { decision: "new-attempt" } },
      }),
    });
    expect(json.status).toBe(401);
    const after = await reader.audit();
    expect(after.headDigest).toBe(before.headDigest);
    expect(await reader.events(run.runId)).toHaveLength(run.version);
  });

  it("R2: a page on another local port cannot learn the panel's name from 127.0.0.1 nor lure the session cookie to itself by two navigations", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    const run = await heldRun(runtime, "once", "victim");
    await runtime.close();
    const server = await started(serve({ store, port: 0 }));
    const panelName = new URL(server.panelUrl).hostname;

    // The attacker, a process on another local port without the token, asks 127.0.0.1 for the panel
    // (as a browser, with a Host it does not serve) and takes the name from any answer that tells it,
    // else guesses it from the port.
    const told = [
      await ask(server.port, "/"),
      await ask(server.port, `/runs/${run.runId}`),
      await ask(server.port, "/login"),
      await ask(server.port, "/api/health", "attacker.example"),
    ];
    const learned = told.map((answer) => /holdfast-[\w-]+\.localhost/.exec(answer)?.[0]).find(Boolean);
    const name = learned ?? `holdfast-${server.port}.localhost`;

    // Its page sends the browser to that name on its own port (cross-site: no cookie), then on to
    // another page there (same site now, so a cookie for that name would go along).
    const received: string[] = [];
    const attacker: NodeServer = createServer((request, response) => {
      received.push(`${request.headers.host} ${request.url} ${request.headers.cookie ?? ""}`);
      const port = (attacker.address() as AddressInfo).port;
      response.setHeader("content-type", "text/html");
      if (request.url === "/") response.end(`<script>location = "http://${name}:${port}/hop"</script>`);
      else if (request.url === "/hop") response.end(`<script>location = "/land"</script>`);
      else response.end("<h1>landed</h1>");
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    opened.push(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
    const attackerPort = (attacker.address() as AddressInfo).port;

    const context = await newContext();
    const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${run.runId}`);
    await Promise.all([
      page.waitForURL((u) => u.pathname === "/land"),
      page.goto(`http://127.0.0.1:${attackerPort}/`),
    ]);

    expect(received.filter((line) => line.includes("holdfast_session"))).toEqual([]);
    expect(received.map((line) => line.split(" ").slice(0, 2).join(" "))).toEqual([
      `127.0.0.1:${attackerPort} /`,
      `${name}:${attackerPort} /hop`,
      `${name}:${attackerPort} /land`,
    ]);
    expect(learned).toBeUndefined();
    expect(told.join("\n")).not.toContain(panelName);
  });
});

describe("live updates", () => {
  it("a run crashed in another process and held by the next appears under Needs you without a reload", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    await (await openRuntime({ store, agents: [], tools: [] })).close();
    const server = await started(serve({ store, port: 0 }));
    const page = await signIn(await newContext(), server.panelUrl, server.token.token);
    await waitLive(page);
    expect(await page.locator("#needs-you").count()).toBe(0);
    // Gone if the page were loaded again.
    await page.evaluate("window.notReloaded = true");
    let navigations = 0;
    page.on("framenavigated", (frame) => {
      if (frame === page.mainFrame()) navigations++;
    });

    // The worker is SIGKILLed after the `record` tool took effect, before its outcome was committed.
    const env = { HF_DB: store, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i", HF_PREFIX: "p" };
    const crashed = await runWorker({
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(crashed.signal).toBe("SIGKILL");
    const recovered = await runWorker({ ...env, HF_ACTION: "recover" });
    const report = lineOf(recovered, "recovery")?.report as { held: Array<{ runId: string }> };
    expect(report.held).toHaveLength(1);
    const runId = report.held[0]!.runId;

    const row = page.locator(`#needs-you tr[data-run="${runId}"]`);
    await row.waitFor({ timeout: 15_000 });
    expect(await text(row)).toContain(`in-doubt ${runId}/0`);
    expect(await page.evaluate("window.notReloaded")).toBe(true);
    expect(navigations).toBe(0);
    expect(await text(page.locator("#live-status"))).toBe("live");
    expect(countOf(witness, "p-a")).toBe(1);
    await screenshot(page, "runs");

    await Promise.all([page.waitForURL(`${server.panelUrl}/runs/${runId}`), row.locator("a").click()]);
    const form = page.locator(`form.decide[data-call="${runId}/0"]`);
    const choices = await form.locator('input[name="decision"]').all();
    expect(await Promise.all(choices.map((choice) => choice.getAttribute("value")))).toEqual([
      "confirmed-completed",
      "confirmed-not-completed",
      "stop",
      "resume",
      "new-attempt",
    ]);
    await screenshot(page, "held-run");
    // The timeline marks the crash (walkthrough #12): the process died, how long it was silent,
    // and who noticed; worker ids read as host and pid, the whole id in a tooltip (#13).
    const crash = page.locator("#timeline .timeline-mark.crash");
    expect(await crash.count()).toBe(1);
    expect(await text(crash)).toMatch(/^process died · silent for [\d.]+ (ms|s) · detected by \S+ pid \d+/);
    expect(await crash.locator("abbr.worker").getAttribute("title")).toMatch(/^[^:]+:\d+:[0-9a-f]{6}/);
    // Each event's stored payload is one click away; times are local with how long ago.
    const admitted = page.locator("#timeline li.event").first();
    expect(await admitted.locator("pre.payload").isVisible()).toBe(false);
    await admitted.locator("summary").click();
    expect(JSON.parse(await text(admitted.locator("pre.payload")))).toMatchObject({ type: "run.admitted" });
    expect(await text(admitted.locator("time"))).toMatch(/ago\)$/);
  });
});

describe("the run page", () => {
  it("shows for a call in doubt what the journal knows: no outcome, its key, its arguments, not on the safe list", async () => {
    const { runtime, server } = await panelWithRuntime();
    const run = await heldRun(runtime, "once", "evidence");
    const call = run.calls[0]!;
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run.runId}`,
    );
    const list = page.locator("section.call-held dl.evidence");
    const terms = await Promise.all((await list.locator("dt").all()).map(text));
    const details = await Promise.all((await list.locator("dd").all()).map(text));
    const evidence = Object.fromEntries(terms.map((term, i) => [term, details[i]]));
    expect(evidence).toMatchObject({
      call,
      outcome: "not committed: the journal does not know whether it happened",
      "idempotency key": `${call}#1`,
      disposition: "hold",
      arguments: '{ "label": "evidence" }',
      // Where to look (walkthrough #10), as the tool declared it and the intent recorded it.
      "how to check": 'the witness file has a line "evidence"',
    });
    // When and by which process the call started (walkthrough #10): local time, how long ago, the owner.
    expect(evidence.started).toMatch(
      /\(\d+ s ago\) by (the process that admitted the run|\S+ pid \d+) \(the intent's commit/,
    );
    // Every tool intent records its source pin; that alone does not put the tool on the safe list.
    expect(evidence["safe list"]).toMatch(
      /^not on the safe list \(source [0-9a-f]{12}…\): never replayed without proof or a decision$/,
    );
    expect(await text(page.locator("#run-status"))).toBe("held");
    // The five choices in the order to weigh them; "Run it again" last, and for a tool the risky one.
    const choices = page.locator("form.decide input[name=decision]");
    expect(
      await choices.evaluateAll((inputs) => inputs.map((i) => (i as unknown as { value: string }).value)),
    ).toEqual(["confirmed-completed", "confirmed-not-completed", "stop", "resume", "new-attempt"]);
    expect(await page.locator("form.decide label.choice-risky input").getAttribute("value")).toBe(
      "new-attempt",
    );
    expect(await page.locator("form.decide label.choice-risky").count()).toBe(1);
  });
});

describe("the recorded notice", () => {
  it("is shown once, after the form that recorded it; a link cannot show one", async () => {
    const { runtime, server } = await panelWithRuntime();
    const run = await heldRun(runtime, "once", "notice");
    const call = run.calls[0]!;
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run.runId}?decided=${encodeURIComponent("It happened (confirmed completed)")}`,
    );
    expect(await page.locator(".banner-ok").count()).toBe(0);

    await review(page, call, "stop");
    await Promise.all([page.waitForURL(`${server.panelUrl}/runs/${run.runId}`), page.click("#confirm")]);
    expect(await text(page.locator(".banner-ok"))).toBe(
      `Recorded: Stop the run for ${call}. Next: the run is stopped; nothing more runs, and its chat takes new input.`,
    );
    await page.reload();
    expect(await page.locator(".banner-ok").count()).toBe(0);
  });
});

interface DecisionCase {
  readonly decision: DecisionKind;
  readonly note?: string;
  readonly result?: string;
  /** How the run ends, and how often each effect happened (the call in doubt, the call after it). */
  readonly ends: "completed" | "failed" | "stopped";
  readonly effects: readonly [number, number];
}

const CASES: ReadonlyArray<DecisionCase> = [
  // The agent does not handle OutcomeUnknown, so the run fails.
  { decision: "resume", note: "cannot tell; the agent decides", ends: "failed", effects: [1, 0] },
  { decision: "stop", ends: "stopped", effects: [1, 0] },
  { decision: "new-attempt", note: "the service has no record of it", ends: "completed", effects: [2, 1] },
  {
    decision: "confirmed-completed",
    note: "the line is in the witness file",
    result: '{"label":"seen","recorded":true}',
    ends: "completed",
    effects: [1, 1],
  },
  { decision: "confirmed-not-completed", note: "the line is not there", ends: "completed", effects: [2, 1] },
];

describe("a decision made through the page ends exactly as the same decision through the JSON API", () => {
  it.each(CASES)("$decision", async (c) => {
    const { runtime, server, effects } = await panelWithRuntime();
    const web = await heldRun(runtime, "once", "web");
    const byApi = await heldRun(runtime, "once", "api");
    const webCall = web.calls[0]!;

    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${web.runId}`,
    );
    await review(page, webCall, c.decision, {
      ...(c.note === undefined ? {} : { note: c.note }),
      ...(c.result === undefined ? {} : { result: c.result }),
    });
    // The confirm step names the decision with the words `holdfast show` uses, and records nothing yet.
    await page.locator("#confirm").waitFor();
    expect(await text(page.locator("main"))).toContain(DECISION_MEANINGS[c.decision]);
    expect(await eventCount(runtime, web.runId)).toBe(web.version);
    if (c.decision === "confirmed-completed") await screenshot(page, "confirm");
    const [confirmed] = await Promise.all([postResponse(page, "/decide"), page.click("#confirm")]);
    expect(confirmed.status()).toBe(303);
    expect(await text(page.locator(".banner-ok"))).toContain(`Recorded: `);
    if (c.result !== undefined) {
      // This tool declares no result Schema: the page says the result was taken as given.
      expect(await text(page.locator(".banner-ok"))).toContain(
        `(the result given for ${webCall} was not checked: no result Schema for it here)`,
      );
    }

    const reply = await api(server, `/api/runs/${byApi.runId}/decisions`, {
      basedOnVersion: byApi.version,
      decidedBy: "ada",
      calls: {
        [byApi.calls[0]!]: {
          decision: c.decision,
          ...(c.note === undefined ? {} : { note: c.note }),
          ...(c.result === undefined ? {} : { result: JSON.parse(c.result) }),
        },
      },
    });
    expect(reply.status).toBe(200);

    const fromDecision = (types: ReadonlyArray<string>) => types.slice(types.indexOf("decision.recorded"));
    const webTypes = fromDecision(await endedRun(runtime, web.runId));
    const apiTypes = fromDecision(await endedRun(runtime, byApi.runId));
    expect(webTypes).toEqual(apiTypes);
    expect(webTypes[0]).toBe("decision.recorded");
    expect(webTypes.at(-1)).toBe(`run.${c.ends}`);
    const status = async (run: HeldRun) => (await runtime.runs()).find((r) => r.runId === run.runId)?.status;
    expect(await status(web)).toBe(c.ends);
    expect(await status(byApi)).toBe(c.ends);
    expect([effects("web"), effects("web-after")]).toEqual(c.effects);
    expect([effects("api"), effects("api-after")]).toEqual(c.effects);

    // The same decision, word for word, but for the run it is about.
    const decisionOf = async (run: HeldRun) => {
      const recorded = (await runtime.events(run.runId)).find((e) => e.event.type === "decision.recorded");
      return JSON.parse(JSON.stringify(recorded?.event).replaceAll(run.runId, "<run>")) as unknown;
    };
    expect(await decisionOf(web)).toEqual(await decisionOf(byApi));
    expect(await decisionOf(web)).toMatchObject({
      decidedBy: "ada",
      calls: [
        {
          callId: "<run>/0",
          decision: c.decision,
          ...(c.note === undefined ? {} : { note: c.note }),
          ...(c.result === undefined ? {} : { result: JSON.parse(c.result) }),
        },
      ],
    });
  });
});

describe("refusals write nothing", () => {
  it("a decision made on a page the run has moved on from is refused and the run is shown as it is now", async () => {
    const { runtime, server } = await panelWithRuntime();
    const run = await heldRun(runtime, "pair", "stale");
    expect(run.calls).toHaveLength(2);
    const [first, second] = run.calls as [string, string];
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run.runId}`,
    );
    await waitLive(page);
    expect(await text(page.locator("#run-version"))).toBe(String(run.version));

    // Someone else decides the first call while this page still shows the version it was loaded at.
    const reply = await api(server, `/api/runs/${run.runId}/decisions`, {
      basedOnVersion: run.version,
      decidedBy: "grace",
      calls: { [first]: { decision: "confirmed-completed", note: "seen in the witness file" } },
    });
    expect(reply.status).toBe(200);
    const now = await waitFor("the run held again for the other call", async () => {
      const events = await runtime.events(run.runId);
      return events.length > run.version && events.at(-1)?.event.type === "run.held"
        ? events.length
        : undefined;
    });
    // The live part of the page says so before anything is submitted.
    await page.locator("#run-state .banner-stale").waitFor({ timeout: 15_000 });

    await review(page, second, "new-attempt", { note: "no record of it" });
    await page.locator("#confirm").waitFor();
    const [refused] = await Promise.all([postResponse(page, "/decide"), page.click("#confirm")]);
    expect(refused.status()).toBe(409);
    expect(await text(page.locator("main > .banner-stale"))).toContain(
      `The run moved on before your decision was recorded (you decided on version ${run.version}; it is at version ${now} now). Nothing was written.`,
    );
    expect(await text(page.locator("#run-version"))).toBe(String(now));
    expect(await eventCount(runtime, run.runId)).toBe(now);
    // Only the call still in doubt can be decided, on the version the run is at now.
    expect(await page.locator(`form.decide[data-call="${first}"]`).count()).toBe(0);
    // The calls table says who confirmed the first call, and how they knew (walkthrough #11).
    expect(await text(page.locator("#run-state .decided").first())).toBe(
      "confirmed by grace: “seen in the witness file”",
    );
    expect(
      await page.locator(`form.decide[data-call="${second}"] input[name="basedOnVersion"]`).inputValue(),
    ).toBe(String(now));
    await screenshot(page, "stale-decision");
  });

  it("a confirmation without a note is refused, at review and at confirm", async () => {
    const { runtime, server } = await panelWithRuntime();
    const run = await heldRun(runtime, "once", "note");
    const call = run.calls[0]!;
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run.runId}`,
    );

    const atReview = await review(page, call, "confirmed-completed", { note: "   " });
    expect(atReview.status()).toBe(422);
    expect(await text(page.locator(".banner-error"))).toBe(
      "A confirmation needs a note: say what you checked. Nothing was written.",
    );
    expect(await page.locator("#confirm").count()).toBe(0);
    // The choice made is kept for the second try.
    expect(
      await page.locator(`form.decide[data-call="${call}"] input[value="confirmed-completed"]`).isChecked(),
    ).toBe(true);

    // A confirm page whose note was taken away (the form edited) is refused the same way.
    await review(page, call, "confirmed-not-completed", { note: "not in the ledger" });
    await page.locator("#confirm").waitFor();
    await page.locator('form input[name="note"]').evaluate((input) => input.setAttribute("value", ""));
    const [atConfirm] = await Promise.all([postResponse(page, "/decide"), page.click("#confirm")]);
    expect(atConfirm.status()).toBe(422);
    expect(await text(page.locator(".banner-error"))).toContain("A confirmation needs a note");
    expect(await eventCount(runtime, run.runId)).toBe(run.version);
  });

  it("a chat without a plan document shows its latest checkpoint read-only, said to be the agent's state", async () => {
    const store = join(tempDir(), "journal.db");
    const keeper = defineAgent({
      name: "keeper",
      version: "1",
      run: async (turn) => {
        await turn.checkpoint({ plan: { items: [{ id: "a", text: "write notes", done: true }] } });
        return "kept";
      },
    });
    const runtime = await openRuntime({ store, agents: [keeper], tools: [] });
    opened.push(() => runtime.close());
    const run = await runtime.submit({ chatId: "kept", inputId: "i", agent: "keeper", content: {} });
    expect((await run.result).status).toBe("completed");
    const server = await started(serve({ store, port: 0, runtime }));
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      "/chats/kept/plan",
    );
    expect(await text(page.locator("#plan-revision"))).toBe("0");
    expect(await page.locator("#plan-current").count()).toBe(0);
    const section = page.locator("#latest-checkpoint");
    expect(await text(section.locator("p"))).toContain(`saved by run ${run.runId}`);
    expect(JSON.parse(await text(section.locator("pre")))).toEqual({
      plan: { items: [{ id: "a", text: "write notes", done: true }] },
    });
  });

  it("a plan edit racing the agent's shows the conflict and overwrites nothing", async () => {
    const { runtime, server } = await panelWithRuntime();
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      "/chats/planned/plan",
    );
    expect(await text(page.locator("#plan-revision"))).toBe("0");

    const agents = { title: "the agent's plan", items: [{ id: "a", text: "record a", done: true }] };
    await runtime.documents.replace("planned", { expectedRevision: 0, value: agents, by: "agent" });

    const mine = JSON.stringify({
      title: "my plan",
      items: [{ id: "m", text: "check the ledger", done: false }],
    });
    await page.fill("#plan-value", mine);
    const [conflict] = await Promise.all([
      postResponse(page, "/plan"),
      page.click("form.card button[type=submit]"),
    ]);
    expect(conflict.status()).toBe(409);
    expect(await text(page.locator(".banner-stale"))).toContain(
      "Conflict: the plan changed while you edited it (you edited revision 0; it is at revision 1 now). Your edit was not saved and nothing was overwritten",
    );
    expect(await text(page.locator("#plan-revision"))).toBe("1");
    expect(JSON.parse(await text(page.locator("#plan-current")))).toEqual(agents);
    expect(await page.locator("#plan-value").inputValue()).toBe(mine);
    expect(await runtime.documents.read("planned")).toEqual({ value: agents, revision: 1 });
    await screenshot(page, "plan-conflict");
  });

  it("a decision posted by a form on another origin is refused, with the victim's session in the browser", async () => {
    // A held run in a journal no runtime has open: the server records decisions only when asked.
    const dir = tempDir();
    const { store, runtime } = await openPanelRuntime(dir);
    const run = await heldRun(runtime, "once", "victim");
    await runtime.close();
    const server = await started(serve({ store, port: 0 }));
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run.runId}`,
    );
    // The worst case: the attacker even knows the session's CSRF token.
    const csrf = await page.locator(`form.decide input[name="_csrf"]`).first().inputValue();

    const reader = await openReader({ store });
    opened.push(() => reader.close());
    const before = await reader.audit();
    expect(before.clean).toBe(true);

    const fields = {
      _csrf: csrf,
      confirm: "yes",
      basedOnVersion: String(run.version),
      callId: run.calls[0]!,
      decision: "stop",
    };
    const attacker: NodeServer = createServer((_request, response) => {
      response.setHeader("content-type", "text/html; charset=utf-8");
      response.end(`<!doctype html><form method="post" action="${server.panelUrl}/runs/${run.runId}/decide">
${Object.entries(fields)
  .map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`)
  .join("\n")}
</form><script>document.forms[0].submit()</script>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
    opened.push(() => new Promise<void>((resolve) => attacker.close(() => resolve())));
    const port = (attacker.address() as AddressInfo).port;

    // Same site (the panel's host name on another port): the SameSite cookie goes along; the Origin
    // check refuses.
    const sameSiteOrigin = `http://${new URL(server.panelUrl).hostname}:${port}`;
    const [sameSite] = await Promise.all([
      postResponse(page, "/decide"),
      page.goto(`${sameSiteOrigin}/`, { waitUntil: "commit" }),
    ]);
    expect(sameSite.status()).toBe(403);
    expect(await sameSite.text()).toContain(
      `refused: the request comes from another origin (${sameSiteOrigin})`,
    );

    // Another site (127.0.0.1 is not the panel's host name): the SameSite=Strict cookie is not sent at all.
    const [crossSite] = await Promise.all([
      postResponse(page, "/decide"),
      page.goto(`http://127.0.0.1:${port}/`, { waitUntil: "commit" }),
    ]);
    expect(crossSite.status()).toBe(401);
    expect(await crossSite.text()).toBe("Sign in first: this form needs a session.");

    const after = await reader.audit();
    expect(after.headDigest).toBe(before.headDigest);
    expect(after.events).toBe(before.events);
    expect(await reader.events(run.runId)).toHaveLength(run.version);
  });
});

describe("the audit page", () => {
  it("shows the head digest the library's audit gives, to anchor elsewhere", async () => {
    const { runtime, server, store } = await panelWithRuntime();
    await heldRun(runtime, "once", "audited");
    const page = await signIn(await newContext(), server.panelUrl, server.token.token, "ada", "/audit");
    const [ran] = await Promise.all([
      postResponse(page, "/audit"),
      page.click("main form button[type=submit]"),
    ]);
    expect(ran.status()).toBe(200);
    const reader = await openReader({ store });
    opened.push(() => reader.close());
    const report = await reader.audit();
    expect(await text(page.locator("#head-digest"))).toBe(`${report.headDigest}@${report.lastPosition}`);
    expect(await text(page.locator("#audit-report .banner-ok"))).toBe("Clean: no finding.");
  });
});

describe("the live state of the page", () => {
  it("is live after every load of a page, however its scripts arrive", async () => {
    const { runtime, server } = await panelWithRuntime();
    const run = await heldRun(runtime, "once", "reloaded");
    const page = await signIn(await newContext(), server.panelUrl, server.token.token);
    // A race, so many loads: the panel's script is revalidated on each one, htmx comes from the cache.
    for (let load = 0; load < 30; load++) {
      await page.goto(`${server.panelUrl}${load % 2 === 0 ? "/" : `/runs/${run.runId}`}`);
      await waitLive(page, 5_000);
    }
  });

  it("says reconnecting when the server goes away, and signed out when it comes back without the session", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    await (await openRuntime({ store, agents: [], tools: [] })).close();
    const server = await started(serve({ store, port: 0 }));
    const page = await signIn(await newContext(), server.panelUrl, server.token.token);
    await waitLive(page);

    await server.close();
    await page.waitForSelector('#live-status[data-state="reconnecting"]', { timeout: 15_000 });
    expect(await text(page.locator("#live-status"))).toBe("reconnecting…");

    // Sessions live in the server's memory: after a restart the stream is refused, not "live".
    await started(serve({ store, port: server.port }));
    await page.waitForSelector('#live-status[data-state="signed-out"]', { timeout: 15_000 });
    expect(await text(page.locator("#live-status"))).toBe("signed out: reload to sign in again");
  });
});

describe("the calls table and retry policies", () => {
  it("a retry waiting after a SIGKILL shows its failed attempt and due time; the recovering process's next attempt replaces them live", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const env = { HF_DB: store, HF_WITNESS: join(dir, "witness.jsonl") };
    const worker = join(ROOT, "test", "support", "retry-worker.ts");
    const crashed = await runScript(worker, {
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "during-backoff",
    });
    expect(crashed.signal).toBe("SIGKILL");
    const reader = await openReader({ store });
    const [run] = await reader.runs();
    const scheduled = (await reader.events(run!.runId)).find((e) => e.event.type === "retry.scheduled")!
      .event as { dueAt: string };
    await reader.close();

    const server = await started(serve({ store, port: 0 }));
    const page = await signIn(
      await newContext(),
      server.panelUrl,
      server.token.token,
      "ada",
      `/runs/${run!.runId}`,
    );
    await waitLive(page);
    const row = page.locator(`#calls tr[data-call="${run!.runId}/0"]`);
    expect(await cells(row)).toEqual([
      "0",
      "tool",
      "busy",
      "1 of 3",
      expect.stringMatching(
        // The due time in the reader's zone, and how soon (the ISO time is the element's datetime).
        /^authorized: 503 the server is busy attempt 1 failed: DefiniteFailure: 503 the server is busy attempt 2 due at .+ \((in \d+ s|\d+ s ago)\) \(retry policy: 3 attempts in all\)$/,
      ),
      "committed",
      "Fork from here…",
    ]);
    expect(await row.locator("time").getAttribute("datetime")).toBe(scheduled.dueAt);

    const recovered = await runScript(worker, { ...env, HF_ACTION: "recover" });
    expect(recovered.code, recovered.stderr).toBe(0);
    await page
      .locator(`#calls tr[data-call="${run!.runId}/0"]:has-text("completed")`)
      .waitFor({ timeout: 15_000 });
    expect(await cells(page.locator(`#calls tr[data-call="${run!.runId}/0"]`))).toEqual([
      "0",
      "tool",
      "busy",
      "2 of 3",
      "completed attempt 1 failed: DefiniteFailure: 503 the server is busy",
      "committed",
      "Fork from here…",
    ]);
  });
});
