import { join } from "node:path";
import type { Browser, Locator } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LONG_RUN_ID, writeRunsFixture } from "../../bench/fixtures.js";
import { type Server, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { launchChromium, signIn } from "./browser/chromium.js";

/**
 * A run of 1,000 calls, as the benchmark writes it (`long-0`: 999 finished calls, the last in doubt,
 * held; 2,002 events), through the API and in real Chromium: the run page shows the newest calls
 * and events and loads earlier ones on request; a timeline entry's payload loads when it is opened
 * (decision 0088).
 */
const tempDir = useTempDir();
const CALLS = 1_000;
const EVENTS = 2 * CALLS + 2;

let browser: Browser;
let server: Server;
beforeAll(async () => {
  const store = join(tempDir(), "journal.db");
  await writeRunsFixture(store, { runs: 1, heldEvery: 1, longRunCalls: CALLS });
  server = await serve({ store, port: 0 });
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: replies are read as loosely as a client would read them
const get = async (path: string): Promise<{ status: number; body: Record<string, any> }> => {
  const response = await fetch(`${server.url}${path}`, {
    headers: { authorization: `Bearer ${server.token.token}` },
  });
  return { status: response.status, body: (await response.json()) as Record<string, never> };
};

const seqs = (calls: ReadonlyArray<{ seq: number }>) => calls.map((c) => c.seq);
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);

describe("GET /api/runs/{runId} of a long run", () => {
  it("sends the newest 50 calls and 100 events, says where the earlier ones start, and every one with calls=all", async () => {
    const first = await get(`/api/runs/${LONG_RUN_ID}`);
    expect(first.status).toBe(200);
    expect(seqs(first.body.calls)).toEqual(range(950, 1000));
    expect(first.body.callPage).toEqual({ from: 950, total: CALLS, earlier: 900 });
    expect(first.body.events.map((e: { version: number }) => e.version)).toEqual(
      range(EVENTS - 99, EVENTS + 1),
    );
    expect(first.body.eventPage).toEqual({ from: EVENTS - 99, total: EVENTS, earlier: EVENTS - 199 });
    expect(first.body.events.at(-1)).toMatchObject({ type: "run.held", payload: { type: "run.held" } });
    // The call in doubt and its decisions are in the page.
    expect(first.body.calls.at(-1)).toMatchObject({ seq: 999, status: "in-doubt" });
    expect(first.body.calls.at(-1).decisions.length).toBeGreaterThan(0);

    const earlier = await get(`/api/runs/${LONG_RUN_ID}?callsFrom=900&eventsFrom=${EVENTS - 199}`);
    expect(seqs(earlier.body.calls)).toEqual(range(900, 1000));
    expect(earlier.body.callPage).toEqual({ from: 900, total: CALLS, earlier: 850 });
    expect(earlier.body.events).toHaveLength(200);

    const first50 = await get(`/api/runs/${LONG_RUN_ID}?callsFrom=0&eventsFrom=1`);
    expect(first50.body.callPage).toEqual({ from: 0, total: CALLS, earlier: null });
    expect(first50.body.eventPage).toEqual({ from: 1, total: EVENTS, earlier: null });

    const all = await get(`/api/runs/${LONG_RUN_ID}?calls=all`);
    expect(seqs(all.body.calls)).toEqual(range(0, CALLS));
    expect(all.body.events).toHaveLength(EVENTS);
    expect(all.body.callPage).toEqual({ from: 0, total: CALLS, earlier: null });
  });

  it("sends a short run whole, and refuses a page key that is not a number with 422", async () => {
    const short = await get("/api/runs/held-0");
    expect(short.body.callPage).toMatchObject({ from: 0, earlier: null });
    expect(short.body.calls).toHaveLength(short.body.callPage.total);
    expect(short.body.events).toHaveLength(short.body.eventPage.total);
    const bad = await get(`/api/runs/${LONG_RUN_ID}?callsFrom=last`);
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe("invalid-input");
  });
});

const text = async (locator: Locator): Promise<string> =>
  ((await locator.textContent()) ?? "").replace(/\s+/g, " ").trim();

describe("the run page of a long run", () => {
  it("shows the newest calls and events; earlier ones load in place; a payload loads when its entry is opened", async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${LONG_RUN_ID}`);
      const rows = page.locator("#calls tbody tr");
      const events = page.locator("#timeline li.event");
      expect(await rows.count()).toBe(50);
      expect(await text(rows.first().locator("td").first())).toBe("950");
      expect(await events.count()).toBe(100);
      expect(await text(page.locator("#calls-shown"))).toBe("The newest 50 of 1000 calls, from #950.");
      // The in-doubt call's decision form is on the page whatever the calls table shows.
      expect(await page.locator(`form.decide[data-call="${LONG_RUN_ID}/999"]`).count()).toBe(1);

      // "Show earlier" grows the page in place (htmx), without a navigation.
      await page.evaluate("window.notReloaded = true");
      await page.locator("#calls-earlier").click();
      await expect.poll(() => rows.count()).toBe(100);
      expect(await text(rows.first().locator("td").first())).toBe("900");
      await page.locator("#events-earlier").click();
      await expect.poll(() => events.count()).toBe(200);
      expect(await rows.count()).toBe(100);
      expect(await page.evaluate("window.notReloaded")).toBe(true);
      expect(new URL(page.url()).pathname).toBe(`/runs/${LONG_RUN_ID}`);

      // The page holds no payload until an entry is opened; opening one loads it.
      expect(await page.locator("#timeline pre.payload").count()).toBe(0);
      const held = events.last();
      expect(await text(held.locator("summary strong"))).toBe("run.held");
      await held.locator("summary").click();
      const payload = held.locator("pre.payload");
      await payload.waitFor({ timeout: 15_000 });
      expect(JSON.parse(await text(payload))).toMatchObject({
        type: "run.held",
        reasons: [{ code: "in-doubt", callId: `${LONG_RUN_ID}/999` }],
      });
      expect(await page.locator("#timeline pre.payload").count()).toBe(1);
    } finally {
      await context.close();
    }
  });

  it("a payload that is not there (a run pruned while its page is open) answers the entry, not a whole page inside it", async () => {
    const context = await browser.newContext();
    try {
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${LONG_RUN_ID}`);
      // htmx 4 swaps a 404 in like any answer: what comes back takes the place of the entry's payload.
      for (const path of [`/runs/${LONG_RUN_ID}/events/${EVENTS + 1}`, "/runs/gone/events/1"]) {
        const { status, body } = await page.evaluate(async (p) => {
          const reply = await fetch(p, { headers: { "HX-Request": "true" } });
          return { status: reply.status, body: await reply.text() };
        }, path);
        expect(status, path).toBe(404);
        expect(body, path).not.toMatch(/<html|<body|<nav/i);
        expect(body, path).toMatch(/^<p class="payload muted">.*has no event of version/);
      }
    } finally {
      await context.close();
    }
  });

  it("without JavaScript, the earlier-calls link and the payload link are pages of their own", async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    try {
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${LONG_RUN_ID}`);
      await Promise.all([page.waitForURL(/callsFrom=900/), page.locator("#calls-earlier").click()]);
      expect(await page.locator("#calls tbody tr").count()).toBe(100);
      const first = page.locator("#timeline li.event").first();
      const href = await first.locator(".payload a").getAttribute("href");
      expect(href).toMatch(new RegExp(`^/runs/${LONG_RUN_ID}/events/\\d+$`));
      await page.goto(`${server.panelUrl}${href}`);
      expect(JSON.parse(await text(page.locator("pre.payload")))).toHaveProperty("type");
    } finally {
      await context.close();
    }
  });
});
