import { join } from "node:path";
import type { Browser, BrowserContext, Locator } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openReader, openRuntime, type Server, serve } from "../../src/index.js";
import { lineOf, runWorker } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { countOf } from "../support/witness.js";
import { launchChromium, screenshot, signIn, waitLive } from "./browser/chromium.js";

/**
 * Liveness in the panel, in real Chromium (decisions 0052, 0053): a SIGKILLed run is listed under
 * "Needs you" as stalled; after a decision the page says no runtime with its agent is live; when a
 * runtime with the agent opens the journal, the page (left open) shows the run continue and
 * complete, its heading too.
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

describe("stalled runs and what happens next, in the panel", () => {
  it("a SIGKILLed run shows under Needs you as stalled; after a decision no runtime is live for its agent; one opens and the page shows the run complete, heading included", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    await (await openRuntime({ store, agents: [], tools: [] })).close();
    const server: Server = await serve({ store, port: 0 });
    opened.push(() => server.close());
    const page = await signIn(await newContext(), server.panelUrl, server.token.token);
    await waitLive(page);

    // The worker is SIGKILLed after `record` took effect, before its outcome was committed.
    const env = { HF_DB: store, HF_WITNESS: witness, HF_CHAT: "c", HF_INPUT: "i", HF_PREFIX: "p" };
    const crashed = await runWorker({
      ...env,
      HF_ACTION: "submit",
      HOLDFAST_CRASH_AT: "after-effect-before-outcome",
      HOLDFAST_CRASH_CALL: "record",
    });
    expect(crashed.signal).toBe("SIGKILL");
    const reader = await openReader({ store });
    const runId = (await reader.runs())[0]!.runId;
    await reader.close();

    // Left open, the front page lists it under Needs you, stalled: its owner's pid is dead here.
    const row = page.locator(`#stalled tr[data-run="${runId}"]`);
    await row.waitFor({ timeout: 15_000 });
    expect(await text(row)).toContain(
      "stalled — recovers when a runtime with agent steps@1 opens this journal",
    );
    expect(await text(row)).toContain("is gone (the process no longer runs)");
    expect(await text(page.locator("h1"))).toMatch(/^Needs you \(1\)/);
    await screenshot(page, "stalled");

    await page.goto(`${server.panelUrl}/runs/${runId}`);
    expect(await text(page.locator("#heading-status"))).toContain("stalled");
    expect(await text(page.locator("#run-owner"))).toMatch(/ pid \d+$/);
    expect(await page.locator("#run-owner .owner").getAttribute("title")).toMatch(/:\d+:/);
    expect(await text(page.locator("#run-next"))).toContain('no runtime with agent "steps@1" is live now');

    // A runtime with the agent recovers it: the call is in doubt, so the run is held; it exits.
    const holding = await runWorker({ ...env, HF_ACTION: "recover" });
    expect((lineOf(holding, "recovery")!.report as { held: unknown[] }).held).toHaveLength(1);
    await page.locator("#heading-status .status-held").waitFor({ timeout: 15_000 });
    await page.reload();

    const form = page.locator(`form.decide[data-call="${runId}/0"]`);
    await form.locator('input[name="decision"][value="confirmed-completed"]').check();
    await form.locator('textarea[name="note"]').fill("p-a is in the witness file");
    await form.locator('textarea[name="result"]').fill('{"label": "p-a", "recorded": true}');
    await form.locator("button[type=submit]").click();
    // Before the click: who continues the run, and that none is live now.
    const then = page.locator("#confirm-next");
    await then.waitFor();
    expect(await then.getAttribute("data-live")).toBe("no");
    expect(await text(then)).toContain('no runtime with agent "steps@1" is live now');

    await Promise.all([page.waitForURL(`${server.panelUrl}/runs/${runId}`), page.click("#confirm")]);
    expect(await text(page.locator(".banner-ok"))).toContain(
      'Next: no runtime with agent "steps@1" is live now',
    );
    expect(await text(page.locator("#heading-status"))).toContain("stalled");
    expect(await page.locator("#run-next").getAttribute("data-live")).toBe("no");
    await screenshot(page, "decided-waiting");

    // A runtime with the agent opens the journal: the page, left open, shows the run complete.
    const continued = await runWorker({ ...env, HF_ACTION: "recover" });
    expect(continued.code).toBe(0);
    await page.locator("#run-status .status-completed").waitFor({ timeout: 15_000 });
    await page.locator("#heading-status .status-completed").waitFor({ timeout: 5_000 });
    expect(await page.locator("#run-next").count()).toBe(0);
    expect(countOf(witness, "p-a")).toBe(1);
    expect(countOf(witness, "p-c")).toBe(1);
  });
});
