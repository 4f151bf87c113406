import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openRuntime, serve } from "../../src/index.js";
import { launchChromium, signIn } from "../http/browser/chromium.js";
import { agents, tools } from "../support/fork-module.js";
import { useTempDir } from "../support/tmp.js";

/** "Fork from here" on a call row of the Recovery panel, in real Chromium. */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});
afterEach(() => {
  delete process.env.HF_WITNESS;
});

describe("Fork from here, in the panel", () => {
  it("a call row's button asks to confirm with a note, then records the fork and shows the new run; the calls before it are not run again", async () => {
    const dir = tempDir();
    const store = join(dir, "journal.db");
    const witness = join(dir, "witness.txt");
    process.env.HF_WITNESS = witness;
    const runtime = await openRuntime({ store, agents, tools, tracing: false });
    const server = await serve({ store, port: 0, runtime });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const original = await runtime.submit({ chatId: "c", inputId: "m1", agent: "steps", content: {} });
      await original.result;
      const page = await signIn(
        context,
        server.panelUrl,
        server.token.token,
        "ada",
        `/runs/${original.runId}`,
      );
      const button = page.locator(`#calls a[data-fork-at="2"]`);
      await Promise.all([page.waitForURL(/\/fork\?at=2$/), button.click()]);
      expect(await page.locator("#fork-reused").textContent()).toContain("calls 0, 1");
      expect(await runtime.runs()).toHaveLength(1);
      await page.locator("#fork-note").fill("step 3 should see the new price");
      await Promise.all([
        page.waitForURL((url) => !url.pathname.includes(original.runId)),
        page.locator("#confirm").click(),
      ]);
      expect(await page.locator(".banner").first().textContent()).toContain(
        `Forked from run ${original.runId} at call 2`,
      );
      const forkId = decodeURIComponent(new URL(page.url()).pathname.split("/").at(-1)!);
      expect(await runtime.wait(forkId)).toMatchObject({ status: "completed" });
      const forked = (await runtime.events(forkId)).map((e) => e.event).find((e) => e.type === "run.forked");
      expect(forked).toMatchObject({ by: "ada", note: "step 3 should see the new price", reused: [0, 1] });
      expect(readFileSync(witness, "utf8").split("\n").filter(Boolean)).toEqual([
        "1",
        "2",
        "3",
        "4",
        "5",
        "3",
        "4",
        "5",
      ]);
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});
