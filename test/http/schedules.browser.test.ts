import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { launchChromium, signIn } from "./browser/chromium.js";
import { openPanelRuntime } from "./browser/runs.js";

/** The Schedules page of the Recovery panel, in real Chromium (Debian's headless shell, never skipped). */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

describe("schedules in the panel", () => {
  it("lists a schedule with its next tick and its runs; Pause stops the ticks and Resume starts them again", async () => {
    const { store, runtime } = await openPanelRuntime(tempDir());
    const server = await serve({ store, port: 0, runtime });
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      await runtime.schedules.upsert({
        id: "pulse",
        everyMs: 1_000,
        agent: "pair",
        input: { prefix: "tick" },
      });
      for (let i = 0; i < 100 && !(await runtime.schedules.get("pulse"))?.lastTick; i++)
        await new Promise((r) => setTimeout(r, 100));
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", "/schedules");
      const row = page.locator('tr[data-schedule="pulse"]');
      expect(await row.locator(".schedule-status").textContent()).toBe("active");
      const firstRun = row.locator("ol.ticks a").first();
      const runId = (await firstRun.textContent())!;
      expect((await runtime.run(runId))?.chatId).toBe("schedule-pulse");

      await Promise.all([page.waitForLoadState("load"), page.locator("#pause-pulse").click()]);
      await page.locator("#resume-pulse").waitFor();
      expect(await page.locator(".banner").first().textContent()).toContain(
        "Recorded: schedule pulse paused by ada.",
      );
      expect(await page.locator('tr[data-schedule="pulse"] .schedule-status').textContent()).toBe("paused");
      const ticks = (await runtime.schedules.get("pulse"))!.ticks.admitted;
      await new Promise((r) => setTimeout(r, 1_500));
      expect((await runtime.schedules.get("pulse"))!.ticks.admitted).toBe(ticks);

      await Promise.all([page.waitForLoadState("load"), page.locator("#resume-pulse").click()]);
      await page.locator("#pause-pulse").waitFor();
      expect(await page.locator('tr[data-schedule="pulse"] .schedule-status').textContent()).toBe("active");
      expect((await runtime.schedules.get("pulse"))!.status).toBe("active");
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});
