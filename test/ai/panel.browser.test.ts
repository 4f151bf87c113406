import { join } from "node:path";
import { APICallError } from "ai";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { serve } from "../../src/index.js";
import { launchChromium, signIn } from "../http/browser/chromium.js";
import { useTempDir } from "../support/tmp.js";
import { count, type Mode, openAiRuntime, submitTrip } from "./given.js";

/** The Recovery panel on AI SDK runs, in real Chromium (Debian's headless shell, never skipped). */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

const badGateway = () =>
  new APICallError({ message: "bad gateway", url: "u", requestBodyValues: {}, statusCode: 502 });

describe.each<Mode>(["generate", "stream"])("the panel, a held %s model call", (mode) => {
  it(`"It happened" with the answer typed in the panel's text box: the run completes with that text (${mode})`, async () => {
    const dir = tempDir();
    const { runtime, witness } = await openAiRuntime(dir, {
      mode,
      failStep: { step: 1, times: 1, error: badGateway },
    });
    const { runId, result } = await submitTrip(runtime);
    expect(result).toMatchObject({ status: "held" });
    const server = await serve({ store: join(dir, "journal.db"), port: 0, runtime });
    const context = await browser.newContext();
    try {
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${runId}`);
      const form = page.locator(`form.decide[data-call="${runId}/0"]`);
      // A model call's form asks for the answer as text; it has no raw JSON result box.
      expect(await form.locator('textarea[name="result"]').count()).toBe(0);
      await form.locator('input[name="decision"][value="confirmed-completed"]').check();
      await form.locator('textarea[name="note"]').fill("the provider's dashboard shows the answer");
      await form.locator('textarea[name="answer"]').fill("Paris is lovely in spring.\nShall I book?");
      await form.locator("button[type=submit]").click();
      expect(await page.locator("#confirm-answer").textContent()).toBe(
        "Paris is lovely in spring.\nShall I book?",
      );
      await Promise.all([page.waitForURL(`${server.panelUrl}/runs/${runId}`), page.click("#confirm")]);
      expect(await runtime.wait(runId)).toMatchObject({
        status: "completed",
        output: { text: "Paris is lovely in spring.\nShall I book?", steps: 1 },
      });
      expect(count(witness, `model:${mode}:1`)).toBe(1);
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});

describe("the panel, a model call without its answer", () => {
  it('"It happened" with an empty answer box is refused, says what to enter, and writes nothing', async () => {
    const dir = tempDir();
    const { runtime } = await openAiRuntime(dir, { failStep: { step: 1, times: 1, error: badGateway } });
    const { runId } = await submitTrip(runtime);
    const before = (await runtime.events(runId)).length;
    const server = await serve({ store: join(dir, "journal.db"), port: 0, runtime });
    const context = await browser.newContext();
    try {
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${runId}`);
      const form = page.locator(`form.decide[data-call="${runId}/0"]`);
      await form.locator('input[name="decision"][value="confirmed-completed"]').check();
      await form.locator('textarea[name="note"]').fill("checked the dashboard");
      await form.locator("button[type=submit]").click();
      await expect
        .poll(async () => (await page.locator(".banner").first().textContent()) ?? "")
        .toContain("Run it again");
      expect((await runtime.events(runId)).length).toBe(before);
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});
