/**
 * The torture's browser agent (`npm run torture -- --agent browser`): a real Chromium driven through
 * the browser tool (`makeBrowserTool`, Debian's chromium-headless-shell) against the witness server's
 * test site (torture/witness-server.ts, `/site/…`). The run navigates to the form, fills it, submits
 * it (the mutating action: the site counts the POST under the call's idempotency key, then answers
 * late, so kills land while the submit is in flight) and reads the orders page.
 *
 * Two modes, by trial: without a probe, a submit in doubt is held (and decided through the API from
 * the witness); with the probe, recovery asks the site, from a page of a new browser, whether this
 * attempt's key was received: `POST /lookup/<key>` answers found (done) or reserves the key so a
 * submit still on its way is refused (not done, the form is sent again in a new attempt).
 *   TORTURE_SERVER         the witness server (the site is under /site/)
 *   TORTURE_BROWSER_PROBE  "1": the submit's probe is declared
 */
import { makeBrowserTool } from "../src/adapters/integrations/tools/index.js";
import { CallFailed, defineAgent } from "../src/index.js";

/** The acting tool's name in the journal (and for HOLDFAST_CRASH_CALL); the reading tool is `browser_read`. */
export const BROWSER_TOOL = "browser";
/** The reading tool's name: on the safe list with its pin, so a read in doubt is replayed. */
export const BROWSER_READ_TOOL = `${BROWSER_TOOL}_read`;
/** How many times the run goes through the form when a try fails definitely (a lost session: a blank page). */
export const BROWSER_TRIES = 3;

/** The probe's answer: the lookup's JSON (`found`, or `reserved`); anything else proves nothing. */
export const lookupVerdict = (body: string | undefined): "done" | "not-done" | "unknown" => {
  try {
    const answer = JSON.parse(body ?? "") as { found?: unknown; reserved?: unknown };
    if (answer.found === true) return "done";
    if (answer.found === false && answer.reserved === true) return "not-done";
  } catch {
    // Not the lookup's answer.
  }
  return "unknown";
};

export const makeBrowserTortureDefinitions = ({
  site,
  probe,
}: {
  readonly site: string;
  readonly probe: boolean;
}) => {
  const browser = makeBrowserTool({
    name: BROWSER_TOOL,
    ...(process.env.HOLDFAST_CHROMIUM ? { executablePath: process.env.HOLDFAST_CHROMIUM } : {}),
    keyHeader: "Idempotency-Key",
    timeoutMs: 15_000,
    ...(probe
      ? {
          probes: {
            submit: {
              url: `${site}/site/orders`,
              request: {
                url: (call) => `${site}/lookup/${encodeURIComponent(call.idempotencyKey)}`,
                method: "POST" as const,
              },
              check: (answer) => lookupVerdict(answer.response?.body),
            },
          },
        }
      : {}),
  });
  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      // A try that fails definitely (the session was lost: the page is blank) goes through the form
      // again from its start, with new calls; a submit in doubt is never sent again by the agent.
      let submitted: unknown = null;
      const failures: string[] = [];
      for (let tries = 0; tries < BROWSER_TRIES && submitted === null; tries++) {
        try {
          await turn.tool(browser.act, {
            action: "navigate",
            url: `${site}/site/form?label=${encodeURIComponent(input.label)}`,
          });
          await turn.tool(browser.act, { action: "fill", selector: "#name", value: input.label });
          submitted = await turn.tool(browser.act, { action: "submit", selector: "form#order" });
        } catch (error) {
          if (!(error instanceof CallFailed)) throw error;
          failures.push(error.message.split("\n")[0]!);
        }
      }
      const orders = await turn.tool(browser.read, {
        action: "text",
        url: `${site}/site/orders?label=${encodeURIComponent(input.label)}`,
      });
      return { submitted, failures, orders: orders.text };
    },
  });
  return {
    agents: [agent],
    tools: [...browser.definitions],
    allowlist: { [browser.read.name]: browser.read.pin },
    close: () => browser.close(),
  };
};
