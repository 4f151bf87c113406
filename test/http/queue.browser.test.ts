import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { launchChromium, signIn } from "./browser/chromium.js";
import { heldRun, openPanelRuntime } from "./browser/runs.js";

/** A chat's queue in the Recovery panel, in real Chromium (Debian's headless shell, never skipped). */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe("a chat's queue in the panel", () => {
  it("the held run's page shows the inputs waiting behind it; Withdraw… asks to confirm, then the input leaves the queue", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    const server = await serve({ store, port: 0, runtime });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const run = await heldRun(runtime, "once", "c");
      const queued = await runtime.submit({
        chatId: "c",
        inputId: "m2",
        agent: "pair",
        content: { prefix: "m2" },
        whenBusy: "queue",
      });
      expect(queued.queued).toBe(true);

      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${run.runId}`);
      const section = page.locator("#queue");
      expect((await section.locator("h2").textContent())?.replace(/\s+/g, " ")).toBe(
        "1 input queued in chat c",
      );
      expect(await page.locator("#queue-waiting").textContent()).toContain(
        "They wait for this run: held: waiting for a decision",
      );
      await Promise.all([page.waitForURL(/\/queue\/m2\/withdraw$/), section.locator("button").click()]);
      expect(await page.locator("#confirm-input").textContent()).toBe("m2");
      expect((await runtime.queue("c")).items).toHaveLength(1);
      await Promise.all([page.waitForLoadState("load"), page.locator("#confirm").click()]);
      await page.locator("#queue-empty").waitFor();
      expect(await page.locator(".banner").first().textContent()).toContain(
        "input m2 of chat c was withdrawn",
      );
      expect((await runtime.queue("c")).items).toEqual([]);
      expect(await queued.result).toMatchObject({ status: "withdrawn", by: "ada" });
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});
