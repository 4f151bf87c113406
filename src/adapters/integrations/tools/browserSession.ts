import { chmodSync, mkdirSync } from "node:fs";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { DefiniteFailure } from "../../../runtime/errors.js";

/** Where the browser comes from and what it keeps: the options the session needs. */
export interface BrowserSessionOptions {
  /** The Chromium to launch (never downloaded); default `HOLDFAST_CHROMIUM` or `/usr/bin/chromium-headless-shell`. */
  readonly executablePath?: string;
  /**
   * A persistent profile (cookies, storage) kept in this folder, created owner-only (0700); absent,
   * every process starts with an empty session and a restart loses it.
   */
  readonly userDataDir?: string;
}

/** The Chromium the tool launches when `executablePath` is not given. */
export const defaultChromium = (): string =>
  process.env.HOLDFAST_CHROMIUM ?? "/usr/bin/chromium-headless-shell";

/**
 * `playwright-core`, an optional peer dependency: loaded when the browser is first needed, so that
 * holdfast and its other tools install and start without it. Missing, the call fails definitely —
 * nothing was done — saying what to install.
 */
const loadPlaywright = async (): Promise<typeof import("playwright-core")> => {
  try {
    const loaded = (await import("playwright-core")) as typeof import("playwright-core") & {
      default?: typeof import("playwright-core");
    };
    return loaded.chromium ? loaded : (loaded.default ?? loaded);
  } catch (error) {
    throw new DefiniteFailure(
      `the browser tool needs the playwright-core package, which is not installed (${(error as Error).message}); install it next to holdfast (\`npm i playwright-core@1.65.1\`); nothing was done`,
      { sent: false },
    );
  }
};

/**
 * One browser for the tools of one `makeBrowserTool`: launched on first use, one page (tab) per
 * chat. A browser that closes or crashes is forgotten: the next call launches a new one, whose
 * pages are blank (and whose cookies are empty unless the profile is persistent). A page that
 * crashes is closed and forgotten: the chat's next call gets a new, blank page.
 */
export class BrowserSession {
  private context: Promise<BrowserContext> | null = null;
  private readonly pages = new Map<string, Page>();

  constructor(private readonly options: BrowserSessionOptions) {}

  private launch(): Promise<BrowserContext> {
    const executablePath = this.options.executablePath ?? defaultChromium();
    const opened = (async () => {
      const { chromium } = await loadPlaywright();
      let browser: Browser | null = null;
      let context: BrowserContext;
      try {
        if (this.options.userDataDir !== undefined) {
          mkdirSync(this.options.userDataDir, { recursive: true, mode: 0o700 });
          chmodSync(this.options.userDataDir, 0o700);
          context = await chromium.launchPersistentContext(this.options.userDataDir, { executablePath });
        } else {
          browser = await chromium.launch({ executablePath });
          context = await browser.newContext();
        }
      } catch (error) {
        // A browser that launched but gave no context would be left running: close it.
        await browser?.close().catch(() => undefined);
        throw new DefiniteFailure(
          `the browser could not be started (${executablePath}: ${(error as Error).message.split("\n")[0]}); nothing was done`,
          { sent: false },
        );
      }
      context.on("close", () => {
        if (this.context === opened) this.context = null;
        this.pages.clear();
        browser?.close().catch(() => undefined);
      });
      return context;
    })();
    opened.catch(() => {
      if (this.context === opened) this.context = null;
    });
    this.context = opened;
    return opened;
  }

  /** The browser context, launched when first asked for. */
  browser(): Promise<BrowserContext> {
    return this.context ?? this.launch();
  }

  /** The chat's page, and whether it was opened just now (blank: nothing of an earlier session). */
  async page(chatId: string): Promise<{ readonly page: Page; readonly fresh: boolean }> {
    const known = this.pages.get(chatId);
    if (known && !known.isClosed()) return { page: known, fresh: false };
    const page = await (await this.browser()).newPage();
    this.pages.set(chatId, page);
    // A crashed page never reports itself closed: close it and forget it, so the chat's next call
    // gets a new (blank) page instead of a dead one.
    page.once("crash", () => {
      if (this.pages.get(chatId) === page) this.pages.delete(chatId);
      page.close().catch(() => undefined);
    });
    return { page, fresh: true };
  }

  /** A new page of the same session (its cookies), for a probe; the caller closes it. */
  async scratchPage(): Promise<Page> {
    return (await this.browser()).newPage();
  }

  /** Close the browser (a persistent profile stays on disk). */
  async close(): Promise<void> {
    const context = this.context;
    this.context = null;
    this.pages.clear();
    if (!context) return;
    const opened = await context.catch(() => null);
    const browser = opened?.browser();
    await opened?.close().catch(() => undefined);
    await browser?.close().catch(() => undefined);
  }
}
