import { Schema } from "effect";
import { defineAgent, defineTool } from "../../src/index.js";

/**
 * A safe-listed read, pinned by a fixed source text so that the crashed worker (under tsx) and the
 * test (under vitest) compute the same pin.
 */
export const fetchPage = defineTool({
  name: "fetch_page",
  args: Schema.Struct({ url: Schema.String }),
  disposition: "replay",
  source: "fetch_page v1: reads a page, changes nothing",
  run: async ({ url }) => ({ url, words: 3 }),
});

export const fetcher = defineAgent({
  name: "fetcher",
  version: "2",
  run: async (turn, input: { url: string }) => turn.tool("fetch_page", { url: input.url }),
});

export const fetcherOptions = (store: string) => ({
  store,
  agents: [fetcher],
  tools: [fetchPage],
  allowlist: { fetch_page: fetchPage.pin },
});
