import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test, vi } from "vitest";
import type { HoldfastSaver } from "../../src/langgraph.js";

/**
 * `@langchain/langgraph-checkpoint-validation` calls vitest's globals (`describe`, `it`, …). This
 * file's tests get them here instead of through `globals: true`, so no other test file sees them.
 */
Object.assign(globalThis, { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, test, vi });

/**
 * Run LangGraph's checkpointer validation suite (every spec, and the delta-channel history spec the
 * suite's entry point leaves out) against savers from `open`; each spec gets a fresh journal.
 */
export const validateSaver = async (name: string, open: () => Promise<HoldfastSaver>): Promise<void> => {
  const { deltaChannelHistoryTests, validate } = await import("@langchain/langgraph-checkpoint-validation");
  const initializer = {
    checkpointerName: name,
    createCheckpointer: open,
    destroyCheckpointer: (saver: HoldfastSaver) => saver.close(),
  };
  validate(initializer);
  deltaChannelHistoryTests(initializer);
};
