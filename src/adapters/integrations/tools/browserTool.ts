import * as Schema from "effect/Schema";
import type { Page, Request, Response } from "playwright-core";
import { type CallContext, defineTool, type Reconciler, type ToolDef } from "../../../runtime/define.js";
import { DefiniteFailure } from "../../../runtime/errors.js";
import { BrowserSession, type BrowserSessionOptions } from "./browserSession.js";
import { builtInSource } from "./moduleSource.js";

const HttpUrl = Schema.String.pipe(Schema.pattern(/^https?:\/\//));
const Selector = Schema.NonEmptyString;

/**
 * The arguments of the browser's acting tool (`browser`): one action on the chat's page.
 * `navigate` loads a URL; `click` clicks the first element the selector matches; `fill` types a
 * value into a field; `submit` submits a form (the selector names the form or its submit button)
 * and waits for the page it leads to; `evaluate` runs a JavaScript expression in the page and
 * returns its (JSON) value.
 */
export const BrowserActArgs = Schema.Union(
  Schema.Struct({ action: Schema.Literal("navigate"), url: HttpUrl }),
  Schema.Struct({ action: Schema.Literal("click"), selector: Selector }),
  Schema.Struct({ action: Schema.Literal("fill"), selector: Selector, value: Schema.String }),
  Schema.Struct({ action: Schema.Literal("submit"), selector: Selector }),
  Schema.Struct({ action: Schema.Literal("evaluate"), expression: Schema.NonEmptyString }),
);
export type BrowserActArgs = typeof BrowserActArgs.Type;

/** An action of the acting tool: each may change something outside (a click can order, a GET can delete). */
export type BrowserAction = BrowserActArgs["action"];

/**
 * The arguments of the browser's reading tool (`browser_read`): `text` (the page's, or the first
 * match's, visible text) or `screenshot` (PNG). With `url`, the page is loaded first, so that a
 * replayed read needs nothing of a session a restart lost.
 */
export const BrowserReadArgs = Schema.Union(
  Schema.Struct({
    action: Schema.Literal("text"),
    url: Schema.optional(HttpUrl),
    selector: Schema.optional(Selector),
  }),
  Schema.Struct({
    action: Schema.Literal("screenshot"),
    url: Schema.optional(HttpUrl),
    selector: Schema.optional(Selector),
    fullPage: Schema.optional(Schema.Boolean),
  }),
);
export type BrowserReadArgs = typeof BrowserReadArgs.Type;

/** What an action returns: where the page is after it, and `evaluate`'s value. */
export interface BrowserActResult {
  readonly action: BrowserAction;
  readonly url: string;
  readonly title: string;
  /** The HTTP status of the page `navigate` or `submit` led to (null when unknown). */
  readonly status?: number | null;
  /** `evaluate`'s value (JSON). */
  readonly value?: unknown;
  /** Set when the outcome was proven by the probe during recovery, not seen by the call. */
  readonly byProbe?: true;
}

/** What a read returns: the page's URL and title, and its text or its PNG (base64). */
export interface BrowserReadResult {
  readonly url: string;
  readonly title: string;
  readonly text?: string;
  /** Characters of the text that were not kept (beyond `maxTextChars`). */
  readonly cut?: number;
  readonly png?: string;
}

/** What a probe's URL and request are worked out from, and what `check` is told. */
export interface BrowserProbeCall {
  /** The arguments of the call in doubt, as the intent stored them (masked). */
  readonly args: BrowserActArgs;
  readonly idempotencyKey: string;
  readonly runId: string;
  readonly callId: string;
}

/** What a probe saw: the page it loaded, the selector's matches on it, and the answer to its request. */
export interface BrowserProbeAnswer {
  /** Where the probe's page ended (after redirects). */
  readonly url: string;
  /** The HTTP status of the probe's page (null when the browser did not report one). */
  readonly status: number | null;
  readonly title: string;
  /** How many elements the probe's `selector` matched (absent without a selector). */
  readonly found?: number;
  /** The first match's text, at most 2,000 characters (absent without a selector or a match). */
  readonly text?: string;
  /** The answer to the probe's `request`, made by the page (its cookies): status and body (64 KiB at most). */
  readonly response?: { readonly status: number; readonly body: string };
}

/** The probe's conclusion: the action took effect, it did not, or the answer proves neither. */
export type BrowserProbeVerdict = "done" | "not-done" | "unknown";

/**
 * How recovery finds out whether an action in doubt took effect: a page to load in a new tab of the
 * session, a selector to look for on it, and/or a request the page makes; `check` maps what it saw
 * to a verdict. The URL, selector and request are worked out when the intent is written and recorded
 * in it; the probe and its answer are the evidence of the verdict.
 *
 * Answer `not-done` only when the site itself guarantees the action can no longer take effect (the
 * probe consumed the form's one-time token, the order window closed): a request already sent by a
 * browser that is dying may still arrive after the probe looked. When unsure, answer `unknown`: the
 * run is held for a person.
 *
 * @example
 * probes: {
 *   submit: {
 *     url: "https://shop.example/orders",
 *     selector: '[data-order-ref="A-17"]',
 *     check: (answer) => ((answer.found ?? 0) > 0 ? "done" : "unknown"),
 *   },
 * }
 */
export interface BrowserProbe {
  readonly url: string | ((call: BrowserProbeCall) => string);
  readonly selector?: string;
  readonly request?: {
    readonly url: string | ((call: BrowserProbeCall) => string);
    readonly method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
    readonly headers?: Readonly<Record<string, string>>;
    readonly body?: string;
  };
  readonly check: (
    answer: BrowserProbeAnswer,
    call: BrowserProbeCall,
  ) => BrowserProbeVerdict | Promise<BrowserProbeVerdict>;
}

/** How `makeBrowserTool` launches the browser, names its tools and reconciles its actions. */
export interface BrowserToolOptions extends BrowserSessionOptions {
  /** The acting tool's name (default `browser`); the reading tool is `<name>_read`. */
  readonly name?: string;
  /** A probe for every acting action without its own in `probes`. */
  readonly probe?: BrowserProbe;
  /** A probe per action. An action with no probe is held when in doubt. */
  readonly probes?: Partial<Record<BrowserAction, BrowserProbe>>;
  /**
   * Send the call's idempotency key in this header with every request the page makes during an
   * action (e.g. `Idempotency-Key`), so a site can record it and a probe can ask for it. Off by
   * default: an extra header makes cross-origin fetches of the page ask for CORS preflight.
   */
  readonly keyHeader?: string;
  /**
   * Whether the reading tool asks for replay (default `true`). Recovery replays a read in doubt
   * only while the tool is on the safe list with its pin; otherwise it is held.
   */
  readonly replayReads?: boolean;
  /** How long an action, a read or a probe may wait for a page or an element; default 30 s. */
  readonly timeoutMs?: number;
  /** Characters of text a read keeps; default 64 Ki. */
  readonly maxTextChars?: number;
  /** Bytes of PNG a screenshot may have; default 1 MiB (a larger one fails, definitely). */
  readonly maxScreenshotBytes?: number;
}

/** The two tools of a browser and the browser they share. */
export interface BrowserTools {
  /** `navigate`, `click`, `fill`, `submit`, `evaluate`: held in doubt unless a probe proves the outcome. */
  readonly act: ToolDef<BrowserActArgs, typeof BrowserActArgs.Encoded, BrowserActResult>;
  /** `text`, `screenshot`: replayed in doubt when on the safe list. */
  readonly read: ToolDef<BrowserReadArgs, typeof BrowserReadArgs.Encoded, BrowserReadResult>;
  /** Both, to register: `openRuntime({ tools: [...browser.definitions] })`. */
  readonly definitions: readonly [
    ToolDef<BrowserActArgs, typeof BrowserActArgs.Encoded, BrowserActResult>,
    ToolDef<BrowserReadArgs, typeof BrowserReadArgs.Encoded, BrowserReadResult>,
  ];
  /** Close the browser (call it before the process ends; a persistent profile stays on disk). */
  close(): Promise<void>;
}

/** What the intent records for an action: the probe as worked out for this call, or none. */
interface RecordedProbe {
  readonly action: BrowserAction;
  readonly probe: {
    readonly url: string;
    readonly selector?: string;
    readonly request?: {
      readonly url: string;
      readonly method: string;
      readonly headers?: Readonly<Record<string, string>>;
      readonly body?: string;
    };
  } | null;
}

const NEVER_SENT = /net::ERR_(CONNECTION_REFUSED|NAME_NOT_RESOLVED|ADDRESS_UNREACHABLE|INVALID_URL)/;

const firstLine = (error: unknown): string => String((error as Error)?.message ?? error).split("\n")[0]!;

const resolveUrl = (url: string | ((call: BrowserProbeCall) => string), call: BrowserProbeCall): string =>
  typeof url === "function" ? url(call) : url;

/** Load the probe's page in a new tab, look for its selector, make its request: what it saw. */
const runProbe = async (
  page: Page,
  probe: NonNullable<RecordedProbe["probe"]>,
  timeoutMs: number,
): Promise<BrowserProbeAnswer> => {
  const response = await page.goto(probe.url, { timeout: timeoutMs, waitUntil: "load" });
  const base = { url: page.url(), status: response?.status() ?? null, title: await page.title() };
  let matched: { found?: number; text?: string } = {};
  if (probe.selector !== undefined) {
    const found = await page.locator(probe.selector).count();
    matched = { found };
    if (found > 0) {
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText, the visible text as a person reads it
      const text = await page.locator(probe.selector).first().innerText({ timeout: timeoutMs });
      matched = { found, text: text.slice(0, 2000) };
    }
  }
  if (probe.request === undefined) return { ...base, ...matched };
  const answer = await page.evaluate(async (request) => {
    const res = await fetch(request.url, {
      method: request.method,
      ...(request.headers ? { headers: request.headers } : {}),
      ...(request.body !== undefined ? { body: request.body } : {}),
    });
    return { status: res.status, body: (await res.text()).slice(0, 65_536) };
  }, probe.request);
  return { ...base, ...matched, response: answer };
};

/**
 * A browser for agents, on `playwright-core` (an optional peer dependency, imported on first use)
 * with the system's Chromium (`executablePath`; never a downloaded one). Two tools share it, one
 * page per chat:
 *
 * - `browser` acts: `navigate`, `click`, `fill`, `submit`, `evaluate`, each a journaled call. A call
 *   in doubt (the browser or this process died between the intent and the outcome) is never run
 *   again by itself: it is held, unless the author declared a probe for the action (`probe`,
 *   `probes`) — a page to load, a selector to look for, a request the page makes — whose `check`
 *   proves it done (completed, with the probe and its answer as evidence) or not done (run again).
 * - `browser_read` reads: `text`, `screenshot`. It asks for replay; recovery runs a read in doubt
 *   again only while the tool is on the safe list with its pin (`holdfast allowlist add`).
 *
 * An action that provably did nothing is a definite failure: the element never appeared, the site
 * refused the connection, the chat's page is blank because the session was lost (a restart without
 * a persistent profile, a crashed browser) and the action is not `navigate`. The session (cookies,
 * storage) outlives the process only in a persistent profile (`userDataDir`, 0700); losing it never
 * runs an action again.
 *
 * @example
 * const browser = makeBrowserTool({
 *   executablePath: "/usr/bin/chromium-headless-shell",
 *   probes: {
 *     submit: {
 *       url: "https://shop.example/orders",
 *       selector: '[data-ref="A-17"]',
 *       check: (answer) => ((answer.found ?? 0) > 0 ? "done" : "unknown"),
 *     },
 *   },
 * });
 * const runtime = await openRuntime({ agents: [agent], tools: [...browser.definitions] });
 * // in the agent:
 * await turn.tool(browser.act, { action: "navigate", url: "https://shop.example/order" });
 * await turn.tool(browser.act, { action: "fill", selector: "#ref", value: "A-17" });
 * await turn.tool(browser.act, { action: "submit", selector: "form#order" });
 * const { text } = await turn.tool(browser.read, { action: "text", url: "https://shop.example/orders" });
 */
export const makeBrowserTool = (options: BrowserToolOptions = {}): BrowserTools => {
  const name = options.name ?? "browser";
  const readName = `${name}_read`;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const maxTextChars = options.maxTextChars ?? 64 * 1024;
  const maxScreenshotBytes = options.maxScreenshotBytes ?? 1024 * 1024;
  const session = new BrowserSession(options);
  const probeFor = (action: BrowserAction): BrowserProbe | undefined =>
    options.probes?.[action] ?? options.probe;
  const anyProbe = options.probe !== undefined || Object.values(options.probes ?? {}).some(Boolean);

  const callOf = (
    args: BrowserActArgs,
    context: { idempotencyKey: string; runId: string; callId: string },
  ) => ({
    args,
    idempotencyKey: context.idempotencyKey,
    runId: context.runId,
    callId: context.callId,
  });

  const reconciler: Reconciler<BrowserActArgs> = {
    name: "browser-probe",
    timeoutMs: timeoutMs * 2,
    probe: (args, context): RecordedProbe => {
      const declared = probeFor(args.action);
      if (!declared) return { action: args.action, probe: null };
      const call = callOf(args, context);
      const request = declared.request;
      return {
        action: args.action,
        probe: {
          url: resolveUrl(declared.url, call),
          ...(declared.selector === undefined ? {} : { selector: declared.selector }),
          ...(request === undefined
            ? {}
            : {
                request: {
                  url: resolveUrl(request.url, call),
                  method: request.method ?? "GET",
                  ...(request.headers === undefined ? {} : { headers: request.headers }),
                  ...(request.body === undefined ? {} : { body: request.body }),
                },
              }),
        },
      };
    },
    check: async (recorded, context) => {
      const { action, probe } = recorded as RecordedProbe;
      const declared = probeFor(action);
      if (probe === null || declared === undefined) {
        return {
          outcome: "unknown",
          evidence: { action, probe: null, reason: `no probe is declared for "${action}"` },
        };
      }
      const page = await session.scratchPage();
      let answer: BrowserProbeAnswer;
      try {
        answer = await runProbe(page, probe, timeoutMs);
      } finally {
        await page.close().catch(() => undefined);
      }
      const call = callOf(context.args as BrowserActArgs, context);
      const verdict = await declared.check(answer, call);
      const evidence = { action, probe, answer, verdict };
      if (verdict === "done") {
        const result: BrowserActResult = {
          action,
          url: answer.url,
          title: answer.title,
          byProbe: true,
        };
        return { outcome: "completed", result, evidence };
      }
      if (verdict === "not-done") return { outcome: "not-completed", evidence };
      return { outcome: "unknown", evidence };
    },
  };

  /** The chat's page: a failure to get it comes before any action, so nothing was sent. */
  const pageFor = async (chatId: string, action: string) => {
    try {
      const opened = await session.page(chatId);
      opened.page.setDefaultTimeout(timeoutMs);
      return opened;
    } catch (error) {
      if (error instanceof DefiniteFailure) throw error;
      throw new DefiniteFailure(
        `the browser's page could not be opened (${firstLine(error)}); "${action}" was not done, nothing was sent`,
        { sent: false, action },
      );
    }
  };

  const act = async (args: BrowserActArgs, context: CallContext): Promise<BrowserActResult> => {
    const { page, fresh } = await pageFor(context.chatId, args.action);
    if (args.action !== "navigate" && (fresh || page.url() === "about:blank")) {
      throw new DefiniteFailure(
        `the chat's page is blank: the browser session was lost (a restart, a browser that closed) or never navigated; "${args.action}" was not done; navigate first`,
        { sent: false, action: args.action },
      );
    }
    if (args.action === "click" || args.action === "fill" || args.action === "submit") {
      try {
        await page.locator(args.selector).first().waitFor({ state: "attached", timeout: timeoutMs });
      } catch (error) {
        throw new DefiniteFailure(
          `no element matches ${JSON.stringify(args.selector)} on ${page.url()} (${firstLine(error)}); "${args.action}" was not done`,
          { sent: false, action: args.action },
        );
      }
    }
    // Law 10: the effect starts only while the lease holds.
    context.checkLease();
    if (options.keyHeader !== undefined) {
      try {
        await page.setExtraHTTPHeaders({ [options.keyHeader]: context.idempotencyKey });
      } catch (error) {
        throw new DefiniteFailure(
          `the key header ${JSON.stringify(options.keyHeader)} could not be set (${firstLine(error)}); "${args.action}" was not done, nothing was sent`,
          { sent: false, action: args.action },
        );
      }
    }
    try {
      const done = (extra: Partial<BrowserActResult> = {}) =>
        page.title().then((title) => ({ action: args.action, url: page.url(), title, ...extra }));
      switch (args.action) {
        case "navigate": {
          // What the navigation's requests met, watched while it lasts: the proof that nothing
          // reached the site is a failed main-frame request that was not a redirect's, with no
          // response at all for the navigation (a 302 means the site answered, and acted).
          const mainFrame = page.mainFrame();
          const failed: Request[] = [];
          let answered = false;
          const onFailed = (request: Request) => {
            if (request.isNavigationRequest() && request.frame() === mainFrame) failed.push(request);
          };
          const onResponse = (response: Response) => {
            const request = response.request();
            if (request.isNavigationRequest() && request.frame() === mainFrame) answered = true;
          };
          page.on("requestfailed", onFailed);
          page.on("response", onResponse);
          let response: Awaited<ReturnType<Page["goto"]>>;
          try {
            response = await page.goto(args.url, { waitUntil: "load" });
          } catch (error) {
            const message = firstLine(error);
            const neverSent =
              NEVER_SENT.test(message) &&
              !answered &&
              failed.length > 0 &&
              failed.every((request) => request.redirectedFrom() === null);
            if (neverSent)
              throw new DefiniteFailure(`${args.url} could not be reached (${message}); nothing was sent`, {
                sent: false,
                action: "navigate",
              });
            throw error;
          } finally {
            page.off("requestfailed", onFailed);
            page.off("response", onResponse);
          }
          return done({ status: response?.status() ?? null });
        }
        case "click":
          await page.locator(args.selector).first().click();
          return done();
        case "fill":
          await page.locator(args.selector).first().fill(args.value);
          return done();
        case "submit": {
          const target = page.locator(args.selector).first();
          // The navigation the submit starts, awaited (and its failure rethrown) below.
          const navigation = page
            .waitForNavigation({ waitUntil: "load" })
            .catch((error: unknown) => (error instanceof Error ? error : new Error(String(error))));
          const isForm = await target.evaluate((element) => element.tagName === "FORM");
          if (isForm) {
            // Deferred, so the evaluation returns before the page starts to unload.
            await target.evaluate((form) => {
              setTimeout(() => (form as unknown as { requestSubmit: () => void }).requestSubmit(), 0);
            });
          } else {
            await target.click();
          }
          const response = await navigation;
          if (response instanceof Error) throw response;
          return done({ status: response?.status() ?? null });
        }
        case "evaluate": {
          const value = await page.evaluate(args.expression);
          return done({ value: value === undefined ? null : value });
        }
      }
    } catch (error) {
      if (error instanceof DefiniteFailure) throw error;
      throw new Error(
        `the browser's "${args.action}" on ${page.isClosed() ? "a closed page" : page.url()} may or may not have taken effect (${firstLine(error)}); it is in doubt`,
      );
    } finally {
      if (options.keyHeader !== undefined && !page.isClosed()) {
        await page.setExtraHTTPHeaders({}).catch(() => undefined);
      }
    }
  };

  const read = async (args: BrowserReadArgs, context: CallContext): Promise<BrowserReadResult> => {
    const { page, fresh } = await pageFor(context.chatId, args.action);
    if (args.url !== undefined) {
      await page.goto(args.url, { waitUntil: "load" });
    } else if (fresh || page.url() === "about:blank") {
      throw new DefiniteFailure(
        `the chat's page is blank: the browser session was lost (a restart, a browser that closed) or never navigated; give the read a url`,
        { action: args.action },
      );
    }
    const base = { url: page.url(), title: await page.title() };
    const where = args.selector === undefined ? page.locator("body") : page.locator(args.selector).first();
    if (args.action === "text") {
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText, the visible text as a person reads it
      const text = await where.innerText();
      return text.length > maxTextChars
        ? { ...base, text: text.slice(0, maxTextChars), cut: text.length - maxTextChars }
        : { ...base, text };
    }
    const png =
      args.selector === undefined
        ? await page.screenshot({ type: "png", fullPage: args.fullPage === true })
        : await where.screenshot({ type: "png" });
    if (png.byteLength > maxScreenshotBytes) {
      throw new DefiniteFailure(
        `the screenshot of ${base.url} has ${png.byteLength} bytes, more than maxScreenshotBytes (${maxScreenshotBytes})`,
        { bytes: png.byteLength },
      );
    }
    return { ...base, png: png.toString("base64") };
  };

  const actTool = defineTool({
    name,
    description:
      "Act in a web browser: navigate to a URL, click or fill an element (CSS selector), submit a form, or evaluate a JavaScript expression in the page.",
    args: BrowserActArgs,
    ...(anyProbe ? { reconciler } : {}),
    checkHint: (args) =>
      args.action === "navigate"
        ? `whether loading ${args.url} changed anything on the site`
        : `on the site, whether the browser's ${args.action} took effect`,
    ...builtInSource(import.meta.url),
    run: act,
  });
  const readTool = defineTool({
    name: readName,
    description:
      "Read the web browser's page: its visible text, or a PNG screenshot (base64); optionally of a URL loaded first, or of one element (CSS selector).",
    args: BrowserReadArgs,
    disposition: options.replayReads === false ? "hold" : "replay",
    ...builtInSource(import.meta.url),
    // A read that asks for replay changes nothing by the author's word: its failure is definite
    // (the agent sees it), not a doubt that would hold the run.
    run:
      options.replayReads === false
        ? read
        : (args, context) =>
            read(args, context).catch((error: unknown) => {
              if (error instanceof DefiniteFailure) throw error;
              throw new DefiniteFailure(
                `the browser's ${args.action} failed (${firstLine(error)}); a read changes nothing`,
                { action: args.action },
              );
            }),
  });
  return {
    act: actTool,
    read: readTool,
    definitions: [actTool, readTool],
    close: () => session.close(),
  };
};
