/**
 * A holdfast process whose agent drives the browser tool against the test site, for the browser's
 * crash tests. Configured by environment:
 *   HF_DB                 the journal file
 *   HF_SITE               the test site's base URL (http://127.0.0.1:PORT)
 *   HF_AGENT              "order" (navigate, fill, submit, read the orders) or "session" (input
 *                         { step: "login" } navigates to /login, { step: "who" } reads /whoami)
 *   HF_PROBE              "page": the submit's probe loads /orders and looks for the order
 *   HF_PROFILE            a persistent profile folder (userDataDir)
 *   HF_ALLOWLIST          "read": the safe list holds the reading tool's pin
 *   HF_ACTION             "submit" (open, recover, submit one input, wait) or "recover" (open, recover, wait)
 *   HF_INPUT              the input's id and, for "session", its step (default "i")
 *   HOLDFAST_CRASH_AT / HOLDFAST_CRASH_CALL / HOLDFAST_CRASH_SKIP   as for any holdfast process
 * Prints one JSON object per line on stdout.
 */
import { makeBrowserTool } from "../../src/adapters/integrations/tools/index.js";
import { defineAgent, openRuntime } from "../../src/index.js";

const env = process.env;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
const site = env.HF_SITE!;

const browser = makeBrowserTool({
  ...(env.HOLDFAST_CHROMIUM ? { executablePath: env.HOLDFAST_CHROMIUM } : {}),
  ...(env.HF_PROFILE ? { userDataDir: env.HF_PROFILE } : {}),
  keyHeader: "Idempotency-Key",
  ...(env.HF_PROBE === "page"
    ? {
        probes: {
          submit: {
            url: `${site}/orders`,
            selector: '[data-name="alice"]',
            check: (answer) => ((answer.found ?? 0) > 0 ? "done" : "unknown"),
          },
        },
      }
    : {}),
});

const order = defineAgent({
  name: "order",
  version: "1",
  run: async (turn) => {
    await turn.tool(browser.act, { action: "navigate", url: `${site}/form` });
    await turn.tool(browser.act, { action: "fill", selector: "#name", value: "alice" });
    const submitted = await turn.tool(browser.act, { action: "submit", selector: "form" });
    const orders = await turn.tool(browser.read, { action: "text", url: `${site}/orders` });
    return { submitted, orders: orders.text };
  },
});

const session = defineAgent({
  name: "session",
  version: "1",
  run: async (turn, input: { step: string }) => {
    if (input.step === "login") return turn.tool(browser.act, { action: "navigate", url: `${site}/login` });
    return (await turn.tool(browser.read, { action: "text", url: `${site}/whoami` })).text;
  },
});

const main = async () => {
  const runtime = await openRuntime({
    store: env.HF_DB!,
    agents: [order, session],
    tools: [...browser.definitions],
    allowlist: env.HF_ALLOWLIST === "read" ? { [browser.read.name]: browser.read.pin } : {},
    recovery: { leaseMs: 60_000 },
  });
  try {
    const { done, ...report } = runtime.recovery as typeof runtime.recovery & { done?: Promise<unknown> };
    out({ kind: "recovery", report });
    if (done) out({ kind: "recovered", results: await done });
    if (env.HF_ACTION === "submit") {
      const input = env.HF_INPUT ?? "i";
      const agent = env.HF_AGENT ?? "order";
      const handle = await runtime.submit({
        chatId: "c",
        inputId: input,
        agent,
        content: agent === "session" ? { step: input } : {},
      });
      out({ kind: "submitted", runId: handle.runId });
      out({ kind: "result", result: await handle.result });
    }
  } finally {
    await browser.close();
    await runtime.close();
  }
};

main().catch((error) => {
  out({ kind: "crash", message: String(error?.stack ?? error) });
  process.exit(1);
});
