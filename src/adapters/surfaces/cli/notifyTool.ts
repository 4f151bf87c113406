import { appendFileSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import * as Schema from "effect/Schema";
import { defineTool } from "../../../runtime/define.js";
import { builtInSource } from "../../integrations/tools/moduleSource.js";

/**
 * The demo's `notify`: appends a message to `outbox.txt` in the work folder, standing in for an
 * email. It has no reconciler on purpose (disposition `hold`): like a real send, nothing can prove
 * afterwards whether an interrupted one went out, so recovery holds the run for a person.
 */
export const makeNotifyTool = (workDir: string) =>
  defineTool({
    name: "notify",
    description: "Send a short message (demo: appended to outbox.txt).",
    args: Schema.Struct({ to: Schema.String, message: Schema.String }),
    checkHint: (_args, { idempotencyKey }) =>
      `look in ${join(resolve(workDir), "outbox.txt")} for a line ending in ${idempotencyKey}: there, it happened (confirmed-completed); absent, it did not (confirmed-not-completed)`,
    ...builtInSource(import.meta.url),
    run: async ({ to, message }, { idempotencyKey }) => {
      const folder = resolve(workDir);
      mkdirSync(folder, { recursive: true, mode: 0o700 });
      appendFileSync(join(folder, "outbox.txt"), `${to}\t${message}\t${idempotencyKey}\n`, { mode: 0o600 });
      return { delivered: true as const };
    },
  });
