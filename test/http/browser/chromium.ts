import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";

/** Debian's headless Chromium; the panel tests run in it and fail when it is missing (never skipped). */
export const CHROMIUM = process.env.HOLDFAST_CHROMIUM ?? "/usr/bin/chromium-headless-shell";

export const launchChromium = async (): Promise<Browser> => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `no Chromium at ${CHROMIUM}: install Debian's chromium-headless-shell (apt-get install chromium-headless-shell) or set HOLDFAST_CHROMIUM; the panel is tested in a real browser`,
    );
  }
  return chromium.launch({ executablePath: CHROMIUM });
};

/** Sign in through the panel's form; resolves on the page the login lands on. */
export const signIn = async (
  context: BrowserContext,
  url: string,
  token: string,
  name = "ada",
  next = "/",
): Promise<Page> => {
  const page = await context.newPage();
  await page.goto(`${url}/login?next=${encodeURIComponent(next)}`);
  await page.fill("#token", token);
  await page.fill("#name", name);
  await Promise.all([
    page.waitForURL((u) => !u.pathname.startsWith("/login")),
    page.click("button[type=submit]"),
  ]);
  return page;
};

/** Wait until the page's live stream is connected (`#live-status` says "live"). */
export const waitLive = (page: Page, timeout = 15_000) =>
  page.waitForSelector('#live-status[data-state="live"]', { timeout });

const SCREENSHOTS = join(import.meta.dirname, "..", "..", "..", "docs", "panel");

/**
 * Save a screenshot for docs/panel.md, only when HOLDFAST_SCREENSHOTS=1 (a normal test run does not
 * rewrite the committed images).
 */
export const screenshot = async (page: Page, name: string): Promise<void> => {
  if (process.env.HOLDFAST_SCREENSHOTS !== "1") return;
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
};
