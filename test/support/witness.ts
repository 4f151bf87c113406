import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { Schema } from "effect";
import { defineAgent, defineTool } from "../../src/index.js";

/**
 * The outside witness: every real side effect appends one line to a file that the journal knows
 * nothing about. Counting lines tells how many times an effect really happened.
 */
export const witnessLines = (path: string): string[] =>
  existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l !== "")
    : [];

export const countOf = (path: string, label: string): number =>
  witnessLines(path).filter((l) => l === label).length;

/** A non-allowlisted side effect (disposition hold) that the witness counts. */
export const makeRecordTool = (witnessPath: string) =>
  defineTool({
    name: "record",
    args: Schema.Struct({ label: Schema.String }),
    checkHint: ({ label }) => `the witness file has a line "${label}"`,
    run: async ({ label }) => {
      appendFileSync(witnessPath, `${label}\n`);
      return { label, recorded: true };
    },
  });

/**
 * Three witnessed steps. `variant: "changed"` alters the arguments of the second call: the agent
 * code "changed" between the crash and the restart (law 7).
 */
export const makeStepsAgent = (variant: "original" | "changed" = "original") =>
  defineAgent({
    name: "steps",
    version: "1",
    run: async (turn, input: { prefix: string }) => {
      const a = await turn.tool("record", { label: `${input.prefix}-a` });
      await turn.checkpoint({ after: "a" });
      const b = await turn.tool("record", {
        label: variant === "changed" ? `${input.prefix}-B` : `${input.prefix}-b`,
      });
      const c = await turn.tool("record", { label: `${input.prefix}-c` });
      return { a, b, c };
    },
  });
