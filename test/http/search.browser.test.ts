import { join } from "node:path";
import type { Browser, Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeRunsFixture } from "../../bench/fixtures.js";
import { type Server, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { launchChromium, signIn } from "./browser/chromium.js";

/**
 * The search of every run in the panel, in real Chromium, over a journal of 100,000 runs (decision
 * 0073): by chat, by chat within a time range, and a time range paged forward and back. The journal
 * is the benchmark's (`writeRunsFixture`: the runtime's hash chain, guards and run index, written
 * a thousand runs per commit); the index, not a scan, answers.
 */
const tempDir = useTempDir();
const RUNS = 100_000;
/** A completed run somewhere in the middle of the log. */
const NEEDLE = "done-54321";

let browser: Browser;
let server: Server;
beforeAll(async () => {
  const store = join(tempDir(), "journal.db");
  await writeRunsFixture(store, { runs: RUNS, heldEvery: 10_000 });
  server = await serve({ store, port: 0 });
  browser = await launchChromium();
}, 240_000);
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

const text = async (locator: Locator): Promise<string> =>
  ((await locator.textContent()) ?? "").replace(/\s+/g, " ").trim();

const listed = (page: Page): Promise<string[]> =>
  page.locator("#all-runs tbody tr").evaluateAll((rows) => rows.map((r) => r.getAttribute("data-run") ?? ""));

/** Fill the search form's fields (the others cleared) and submit it. */
const search = async (page: Page, fields: Record<string, string>) => {
  for (const name of ["id", "chat", "agent", "from", "to"])
    await page.fill(`#search input[name="${name}"]`, fields[name] ?? "");
  await Promise.all([page.waitForURL(/\?/), page.click("#search button[type=submit]")]);
};

describe("search among 100,000 runs in the panel", () => {
  it("finds one run by its chat, and by its chat within a time range; a time range pages forward and back", async () => {
    const reply = await fetch(`${server.url}/api/runs?id=${NEEDLE}&limit=1`, {
      headers: { authorization: `Bearer ${server.token.token}` },
    });
    const needle = ((await reply.json()) as { runs: Array<{ runId: string; admittedAt: string }> }).runs[0]!;
    expect(needle.runId).toBe(NEEDLE);
    const at = Date.parse(needle.admittedAt);
    // A second either side: hundreds of runs were admitted in it (a thousand per commit).
    const from = new Date(at - 1000).toISOString();
    const to = new Date(at + 1000).toISOString();
    const context = await browser.newContext({
      viewport: { width: 1280, height: 900 },
      colorScheme: "light",
    });
    try {
      const page = await signIn(context, server.panelUrl, server.token.token);
      // The count stops at 100 (decision 0090): the index answers without counting every run.
      expect(await text(page.locator("#runs h2").last())).toContain("All runs (more than 100)");

      // By chat: the one run.
      await search(page, { chat: `chat-${NEEDLE}` });
      expect(await listed(page)).toEqual([NEEDLE]);
      expect(await text(page.locator("#runs h2").last())).toContain("(1 matching)");

      // By chat within a time range around its admission: it; within an earlier range: nothing.
      await search(page, { chat: `chat-${NEEDLE}`, from, to });
      expect(await listed(page)).toEqual([NEEDLE]);
      await search(page, {
        chat: `chat-${NEEDLE}`,
        from: "2000-01-01T00:00:00Z",
        to: "2000-01-02T00:00:00Z",
      });
      expect(await listed(page)).toEqual([]);

      // The time range alone holds hundreds of runs: 100 a page, next and back.
      await search(page, { from, to });
      const first = await listed(page);
      expect(first).toHaveLength(100);
      await Promise.all([page.waitForURL(/cursor=/), page.click("#runs-next")]);
      const second = await listed(page);
      expect(second).toHaveLength(100);
      expect(second.filter((runId) => first.includes(runId))).toEqual([]);
      expect(await page.inputValue('#search input[name="from"]')).toBe(from);
      await Promise.all([page.waitForURL(/cursor=/), page.click("#runs-prev")]);
      expect(await listed(page)).toEqual(first);
    } finally {
      await context.close();
    }
  });
});
