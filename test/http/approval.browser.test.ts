import { appendFileSync } from "node:fs";
import { join } from "node:path";
import { Schema } from "effect";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { defineAgent, defineTool, openRuntime, type Runtime, serve } from "../../src/index.js";
import { useTempDir } from "../support/tmp.js";
import { witnessLines } from "../support/witness.js";
import { launchChromium, screenshot, signIn } from "./browser/chromium.js";

/**
 * Approvals in the Recovery panel, in real Chromium (Debian's headless shell, never skipped).
 * HOLDFAST_SCREENSHOTS=1 writes the screenshots docs/panel.md shows.
 */
const tempDir = useTempDir();

let browser: Browser;
beforeAll(async () => {
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
});

const SECRET = "sk-approval-4b8e1d2f9a";

const setUp = async () => {
  const dir = tempDir();
  const store = join(dir, "journal.db");
  const witness = join(dir, "witness.txt");
  const refund = defineTool({
    name: "refund",
    description: "Refunds a customer's card",
    args: Schema.Struct({ customer: Schema.String, amount: Schema.Number, apiKey: Schema.String }),
    approval: { editable: true },
    run: async ({ customer, amount }) => {
      appendFileSync(witness, `refund ${customer} ${amount}\n`);
      return "refunded";
    },
  });
  const refunder = defineAgent({
    name: "refunder",
    version: "1",
    run: async (turn, input: { customer: string }) => {
      try {
        return await turn.tool(refund, { customer: input.customer, amount: 40, apiKey: SECRET });
      } catch (error) {
        return `not refunded: ${(error as Error).message}`;
      }
    },
  });
  const runtime = await openRuntime({
    store,
    agents: [refunder],
    tools: [refund],
    tracing: false,
    secrets: { STRIPE_KEY: SECRET },
  });
  const server = await serve({ store, port: 0, runtime });
  const awaiting = async (customer: string) => {
    const handle = await runtime.submit({
      chatId: customer,
      inputId: "m1",
      agent: "refunder",
      content: { customer },
    });
    expect(await handle.result).toMatchObject({ status: "waiting", wait: "approval" });
    return handle.runId;
  };
  return { runtime, server, witness, awaiting };
};

const until = async (runtime: Runtime, runId: string, status: string) => {
  while ((await runtime.run(runId))?.status !== status) await new Promise((r) => setTimeout(r, 50));
};

const submitAndConfirm = async (page: Page, action: "approve" | "deny") => {
  await Promise.all([page.waitForURL(/\/approval$/), page.locator(`#${action}`).click()]);
  await Promise.all([page.waitForURL(/\/runs\/[^/]+$/), page.locator("#confirm").click()]);
};

describe("approvals in the panel", () => {
  it("Needs you lists the call with its masked arguments, what it does and who asked; approve starts the effect exactly once", async () => {
    const { runtime, server, witness, awaiting } = await setUp();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const runId = await awaiting("cus-1");
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", "/");
      const row = page.locator(`#approvals tr[data-run="${runId}"]`);
      await screenshot(page, "approvals");
      const text = (await row.textContent()) ?? "";
      expect(text).toContain("refund");
      expect(text).toContain("Refunds a customer's card");
      expect(text).toContain("cus-1");
      expect(text).toContain("«secret:apiKey»");
      expect(text).not.toContain(SECRET);
      expect(text).toContain("refunder@1");
      await Promise.all([page.waitForURL(/\/runs\//), row.locator("a.button").click()]);
      await page.locator("#approval-note").fill("customer called");
      await screenshot(page, "approval");
      await Promise.all([page.waitForURL(/\/approval$/), page.locator("#approve").click()]);
      // The confirm step records nothing yet, and nothing has run.
      expect(await page.locator("#confirm-decision").textContent()).toBe("Approve");
      await screenshot(page, "approval-confirm");
      expect((await runtime.events(runId)).some((e) => e.event.type === "approval.recorded")).toBe(false);
      expect(witnessLines(witness)).toEqual([]);
      await Promise.all([page.waitForURL(/\/runs\/[^/]+$/), page.locator("#confirm").click()]);
      await until(runtime, runId, "completed");
      expect(witnessLines(witness)).toEqual(["refund cus-1 40"]);
      const approvals = (await runtime.events(runId)).filter((e) => e.event.type === "approval.recorded");
      expect(approvals.map((e) => e.event)).toEqual([
        expect.objectContaining({ decision: "approved", decidedBy: "ada", note: "customer called" }),
      ]);
      // Back on the list, nothing awaits approval any more.
      await page.goto(`${server.panelUrl}/`);
      expect(await page.locator("#approvals").count()).toBe(0);
      expect((await runtime.audit()).findings).toEqual([]);
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });

  it("deny fails the call: the agent sees the note; the effect never runs", async () => {
    const { runtime, server, witness, awaiting } = await setUp();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const runId = await awaiting("cus-2");
      const page = await signIn(context, server.panelUrl, server.token.token, "bob", `/runs/${runId}`);
      expect(await page.locator("#approval-description").textContent()).toBe("Refunds a customer's card");
      // A denial without a note is refused on the page, nothing written.
      const before = (await runtime.events(runId)).length;
      await Promise.all([page.waitForLoadState("load"), page.locator("#deny").click()]);
      expect(await page.locator(".banner").first().textContent()).toContain("A denial needs a note");
      expect((await runtime.events(runId)).length).toBe(before);
      await page.locator("#approval-note").fill("fraud suspected");
      await submitAndConfirm(page, "deny");
      await until(runtime, runId, "completed");
      expect(await runtime.wait(runId)).toMatchObject({
        output: expect.stringContaining("fraud suspected"),
      });
      expect(witnessLines(witness)).toEqual([]);
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });

  it("a stale approval (the run moved after the page was loaded) is refused with nothing written", async () => {
    const { runtime, server, witness, awaiting } = await setUp();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    try {
      const runId = await awaiting("cus-3");
      const page = await signIn(context, server.panelUrl, server.token.token, "ada", `/runs/${runId}`);
      await page.locator("#approval-note").fill("looks fine");
      await Promise.all([page.waitForURL(/\/approval$/), page.locator("#approve").click()]);
      // Meanwhile someone else records a signal: the run moves to the next version.
      await runtime.signal(runId, "unrelated", null, { signalId: "s-1", by: "eve" });
      const before = (await runtime.events(runId)).length;
      await Promise.all([page.waitForLoadState("load"), page.locator("#confirm").click()]);
      expect(await page.locator(".banner").first().textContent()).toContain("Nothing was written");
      const after = await runtime.events(runId);
      expect(after.length).toBe(before);
      expect(after.some((e) => e.event.type === "approval.recorded")).toBe(false);
      expect(witnessLines(witness)).toEqual([]);
      expect((await runtime.run(runId))?.status).toBe("waiting");
    } finally {
      await context.close();
      await server.close();
      await runtime.close();
    }
  });
});
