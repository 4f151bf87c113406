import type { Browser, BrowserContext, Locator } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openReader, type Server, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { launchChromium, screenshot, signIn, waitLive } from "./browser/chromium.js";
import { type HeldRun, heldRun, openPanelRuntime } from "./browser/runs.js";

/**
 * Bulk actions in the panel, in real Chromium (decision 0081): a selection of held runs, one
 * confirm page listing each run and what will happen to it, then one versioned decision per run —
 * and a run that changed between the list and the confirm is refused alone.
 */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

const opened: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

const newContext = async (): Promise<BrowserContext> => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: "light" });
  opened.push(() => context.close());
  return context;
};

const text = async (locator: Locator): Promise<string> =>
  ((await locator.textContent()) ?? "").replace(/\s+/g, " ").trim();

/** `count` held runs (one call in doubt each) in a journal, served without their agent's runtime. */
const heldJournal = async (count: number): Promise<{ server: Server; store: string; runs: HeldRun[] }> => {
  const { store, runtime } = await openPanelRuntime(tempDir());
  const runs: HeldRun[] = [];
  for (let i = 1; i <= count; i++) runs.push(await heldRun(runtime, "once", `chat-${i}`));
  await runtime.close();
  const server = await serve({ store, port: 0 });
  opened.push(() => server.close());
  return { server, store, runs };
};

/** The decisions recorded on a run, read from the journal. */
const decisionsOf = async (store: string, runId: string) => {
  const reader = await openReader({ store });
  try {
    const events = (await reader.events(runId)).map((e) => e.event);
    return {
      decisions: events.flatMap((e) => (e.type === "decision.recorded" ? [e] : [])),
      last: events.at(-1)?.type,
    };
  } finally {
    await reader.close();
  }
};

/** A signal recorded on a run through the API: a held run stays held, one version on. */
const signal = (server: Server, runId: string) =>
  fetch(`${server.url}/api/runs/${runId}/signals`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.token.token}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "nudge", signalId: "s1", payload: {}, by: "bob" }),
  });

/** Select every held run under "Needs you", choose stop, and land on the confirm page. */
const selectAllAndStop = async (server: Server) => {
  const page = await signIn(await newContext(), server.panelUrl, server.token.token);
  await waitLive(page);
  await page.check("#needs-you thead input[data-select-all]");
  await page.selectOption("#bulk-held-action", "stop");
  await Promise.all([page.waitForURL(`${server.panelUrl}/bulk`), page.click("#bulk-held-go")]);
  return page;
};

describe("bulk actions in the panel", () => {
  it("a bulk stop of three held runs records three decisions, each on its own run's version, and says what happens next for each", async () => {
    const { server, store, runs: held } = await heldJournal(3);
    // The first run took a signal before the list is drawn: a version on, its runs row unchanged.
    expect((await signal(server, held[0]!.runId)).status).toBe(200);
    const runs = [{ ...held[0]!, version: held[0]!.version + 1 }, ...held.slice(1)];
    const page = await selectAllAndStop(server);

    // One confirm page: each run, the version it was selected at, what will happen to it.
    const rows = page.locator("#bulk-confirm tbody tr");
    expect(await rows.count()).toBe(3);
    for (const run of runs) {
      const row = page.locator(`#bulk-confirm tr[data-run="${run.runId}"]`);
      expect(await row.getAttribute("data-ok")).toBe("yes");
      expect(await text(row)).toContain(`version ${run.version}`);
      expect(await text(row)).toContain("the stop decision: the run ends stopped");
    }
    await page.fill("#bulk-note", "the provider was down all night; the users were told");
    await screenshot(page, "bulk-confirm");
    await Promise.all([page.waitForURL(`${server.panelUrl}/bulk`), page.click("#confirm")]);

    expect(await text(page.locator("#bulk-summary"))).toContain("3 of 3 recorded");
    for (const run of runs) {
      const row = page.locator(`#bulk-results tr[data-run="${run.runId}"]`);
      expect(await row.getAttribute("data-done")).toBe("yes");
      expect(await text(row.locator("td.next"))).not.toBe("");
      expect(await text(row)).toContain(`stopped by decision at version ${run.version}`);
    }
    await screenshot(page, "bulk-results");

    // The journal: one decision per run, on that run's version, by the person signed in.
    for (const run of runs) {
      const { decisions, last } = await decisionsOf(store, run.runId);
      expect(decisions).toHaveLength(1);
      expect(decisions[0]).toMatchObject({
        basedOnVersion: run.version,
        decidedBy: "ada",
        run: "stop",
        note: "the provider was down all night; the users were told",
      });
      expect(last).toBe("run.stopped");
    }
  });

  it("a run that changed between the list and the confirm is refused alone; the others are stopped", async () => {
    const { server, store, runs } = await heldJournal(4);
    const page = await selectAllAndStop(server);
    expect(await page.locator('#bulk-confirm tr[data-ok="yes"]').count()).toBe(4);
    await page.fill("#bulk-note", "the provider was down");

    // Meanwhile the fourth run moves on (a signal is recorded on it): still held, one version on.
    const changed = runs[3]!;
    expect((await signal(server, changed.runId)).status).toBe(200);

    await Promise.all([page.waitForURL(`${server.panelUrl}/bulk`), page.click("#confirm")]);
    expect(await text(page.locator("#bulk-summary"))).toContain("3 of 4 recorded");
    const refused = page.locator(`#bulk-results tr[data-run="${changed.runId}"]`);
    expect(await refused.getAttribute("data-done")).toBe("no");
    expect(await refused.getAttribute("data-code")).toBe("stale");
    expect(await text(refused)).toContain(
      `it changed since you looked at it (version ${changed.version}; it is at version ${changed.version + 1} now)`,
    );
    expect(await page.locator('#bulk-results tr[data-done="yes"]').count()).toBe(3);

    for (const run of runs.slice(0, 3)) {
      const { decisions } = await decisionsOf(store, run.runId);
      expect(decisions.map((d) => d.basedOnVersion)).toEqual([run.version]);
    }
    const untouched = await decisionsOf(store, changed.runId);
    expect(untouched.decisions).toHaveLength(0);
    expect(untouched.last).toBe("signal.received");
  });
});
