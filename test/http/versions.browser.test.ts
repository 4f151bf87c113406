import { join } from "node:path";
import type { Browser, Locator } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openRuntime, type Runtime, type Server, serve } from "../../src/index.js";
import { startScript } from "../support/processes.js";
import { useTempDir } from "../support/tmp.js";
import { greeterVersion, step } from "../support/versions-worker.js";
import { launchChromium, screenshot, signIn } from "./browser/chromium.js";

/**
 * Agent versions in the panel, in real Chromium (decisions 0062, 0063): every run shows its
 * `name@version`; a v1 run next to a runtime with only v2 reads `waiting — agent-version-missing`,
 * and completes on v1 once a runtime with v1 opens the journal.
 */
const VERSIONS_WORKER = join(import.meta.dirname, "..", "support", "versions-worker.ts");
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

const text = async (locator: Locator): Promise<string> =>
  ((await locator.textContent()) ?? "").replace(/\s+/g, " ").trim();

const open = (store: string, versions: string[]): Promise<Runtime> =>
  openRuntime({ store, agents: versions.map(greeterVersion), tools: [step], tracing: false });

describe("agent versions in the panel", () => {
  it("each run shows its agent version; a v1 run beside a v2-only runtime reads agent-version-missing, then completes on v1", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    process.env.HF_WITNESS = witness;
    const worker = startScript(VERSIONS_WORKER, {
      HF_DB: store,
      HF_WITNESS: witness,
      HF_VERSIONS: "1",
      HF_MODE: "submit",
      HF_RUNS: "old:1:sleep",
      HF_SLEEP_MS: "500",
    });
    await worker.waitFor("ready");
    const oldRun = String((worker.lines.find((l) => l.kind === "ready")!.runs as Record<string, string>).old);
    await worker.kill();

    const onlyV2 = await open(store, ["2"]);
    let v2Open = true;
    opened.push(async () => {
      if (v2Open) await onlyV2.close();
    });
    const fresh = await onlyV2.submit({
      chatId: "new",
      inputId: "i",
      agent: "greeter",
      content: { how: "plain" },
    });
    await fresh.result;
    const server: Server = await serve({ store, port: 0, tokenFile: join(dir, "token") });
    opened.push(() => server.close());
    const page = await signIn(
      await browser.newContext({ viewport: { width: 1280, height: 900 } }),
      server.panelUrl,
      server.token.token,
    );

    const oldRow = page.locator(`#all-runs tr[data-run="${oldRun}"]`);
    await oldRow.waitFor({ timeout: 15_000 });
    expect(await text(oldRow)).toContain("waiting — agent-version-missing");
    expect(await text(oldRow)).toContain("greeter@1");
    expect(await oldRow.locator(".status-version-missing").getAttribute("title")).toContain(
      "live runtimes have greeter@2, not greeter@1",
    );
    expect(await text(page.locator(`#all-runs tr[data-run="${fresh.runId}"]`))).toContain("greeter@2");
    await screenshot(page, "version-missing");

    await page.goto(`${server.panelUrl}/runs/${oldRun}`);
    expect(await text(page.locator("#heading-status"))).toContain("waiting — agent-version-missing");
    expect(await text(page.locator("#run-version-missing"))).toContain(
      "live runtimes have greeter@2, not greeter@1; it continues when a runtime with greeter@1 opens this journal",
    );
    expect(await text(page.locator("#run-next"))).toContain('no runtime with agent "greeter@1" is live now');

    await onlyV2.close();
    v2Open = false;
    const withV1 = await open(store, ["1"]);
    opened.push(() => withV1.close());
    // The page, left open, refreshes: the run is woken on v1 and completes.
    await expect
      .poll(() => text(page.locator("#heading-status")), { timeout: 20_000, interval: 250 })
      .toContain("completed");
    expect(await withV1.wait(oldRun)).toMatchObject({ status: "completed", output: { version: "1" } });
  }, 60_000);
});
