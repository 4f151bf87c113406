import { appendFileSync } from "node:fs";
import { Schema } from "effect";
import type { Reconciler } from "../../src/index.js";
import { defineAgent, defineTool } from "../../src/index.js";
import { witnessLines } from "./witness.js";

/**
 * Tools for the recovery-table tests, one per disposition, all counted by the outside witness.
 *  - read_safe  (replay): asks for replay; on the safe list when the test says so
 *  - reconciled (reconcile): its reconciler reads the witness for the call's idempotency key
 *  - record     (hold)
 */
export const makeTableTools = (
  witness: string,
  options: { readonly edited?: boolean; readonly reconciler?: "honest" | "throws" | "unknown" } = {},
) => {
  const readSafe = options.edited
    ? defineTool({
        name: "read_safe",
        args: Schema.Struct({ label: Schema.String }),
        disposition: "replay",
        // Edited after the intent: a different source, so a different pin.
        run: async ({ label }) => {
          appendFileSync(witness, `read ${label}\n`);
          return { label, read: "v2" };
        },
      })
    : defineTool({
        name: "read_safe",
        args: Schema.Struct({ label: Schema.String }),
        disposition: "replay",
        run: async ({ label }) => {
          appendFileSync(witness, `read ${label}\n`);
          return { label, read: true };
        },
      });

  const mode = options.reconciler ?? "honest";
  const witnessReconciler: Reconciler<{ readonly label: string }> = {
    name: "witness-file",
    probe: (_args, context) => ({ key: context.idempotencyKey }),
    check: async (probe) => {
      if (mode === "throws") throw new Error("the status service is unreachable");
      if (mode === "unknown")
        return { outcome: "unknown", evidence: { reason: "status service says: maybe" } };
      const key = (probe as { key: string }).key;
      const line = witnessLines(witness).find((l) => l.endsWith(` ${key}`));
      return line
        ? { outcome: "completed", result: { label: line.split(" ")[1], sent: true }, evidence: { line } }
        : { outcome: "not-completed", evidence: { searched: key } };
    },
  };
  const reconciled = defineTool({
    name: "reconciled",
    args: Schema.Struct({ label: Schema.String }),
    reconciler: witnessReconciler,
    run: async ({ label }, { idempotencyKey }) => {
      appendFileSync(witness, `sent ${label} ${idempotencyKey}\n`);
      return { label, sent: true };
    },
  });

  const record = defineTool({
    name: "record",
    args: Schema.Struct({ label: Schema.String }),
    checkHint: ({ label }) => `the witness file has a line "${label}"`,
    run: async ({ label }) => {
      appendFileSync(witness, `${label}\n`);
      return { label, recorded: true };
    },
  });
  return { readSafe, reconciled, record, all: [readSafe, reconciled, record] };
};

/** One call per disposition, in order: read_safe, reconciled, record. */
export const tableAgent = defineAgent({
  name: "table",
  version: "1",
  run: async (turn, input: { prefix: string }) => {
    const read = await turn.tool("read_safe", { label: `${input.prefix}-read` });
    const sent = await turn.tool("reconciled", { label: `${input.prefix}-sent` });
    const recorded = await turn.tool("record", { label: `${input.prefix}-rec` });
    return { read, sent, recorded };
  },
});

/**
 * `late_send`: its effect (a witness line with the call's idempotency key) happens at once, then it
 * waits `holdMs` before it answers `{ via: "live" }`. Its reconciler finds the line and answers
 * `{ via: "reconciled" }`: a second, different outcome for the same call when both reach the journal.
 */
export const makeLateTool = (witness: string, holdMs: number) =>
  defineTool({
    name: "late_send",
    args: Schema.Struct({ label: Schema.String }),
    reconciler: {
      name: "late-witness",
      probe: (_args, context) => ({ key: context.idempotencyKey }),
      check: async (probe) => {
        const key = (probe as { key: string }).key;
        const line = witnessLines(witness).find((l) => l.endsWith(` ${key}`));
        return line
          ? { outcome: "completed", result: { via: "reconciled" }, evidence: { line } }
          : { outcome: "unknown", evidence: { searched: key } };
      },
    },
    run: async ({ label }, { idempotencyKey }) => {
      appendFileSync(witness, `late ${label} ${idempotencyKey}\n`);
      await new Promise((r) => setTimeout(r, holdMs));
      return { via: "live" };
    },
  });

export const lateAgent = defineAgent({
  name: "late",
  version: "1",
  run: async (turn, input: { prefix: string }) => turn.tool("late_send", { label: input.prefix }),
});
