/**
 * The torture's terminal agent (`npm run torture -- --agent terminal`): three commands through the
 * terminal tool (`makeTerminalTool`), one bash session in a pseudo-terminal for the chat. The first
 * command exports a variable the others use (the session's state), and each appends one line to
 * the outside witness `witness/terminal.txt` itself, with its attempt's idempotency key, then takes
 * a moment, so random kills and the harness's killed sessions land while it runs. The tool's
 * disposition is `reconcile`: a call in doubt is read back from the receipts the session wrote, or
 * held; a lost session is never sent the command again, the next command opens a new one.
 */
import { join } from "node:path";
import { makeTerminalTool } from "../src/adapters/integrations/tools/index.js";
import { defineAgent } from "../src/index.js";
import { witnessCommand } from "./ssh-definitions.js";

/** The terminal tool's name in the journal (and for HOLDFAST_CRASH_CALL). */
export const TERMINAL_TOOL = "terminal";
/** Commands per run. */
export const TERMINAL_COMMANDS = 3;

export const makeTerminalTortureDefinitions = ({ dir }: { readonly dir: string }) => {
  const terminal = makeTerminalTool(join(dir, "work"), { name: TERMINAL_TOOL, timeoutMs: 20_000 });
  const witness = join(dir, "witness", "terminal.txt");
  const agent = defineAgent({
    name: "torture",
    version: "1",
    run: async (turn, input: { label: string }) => {
      const results: Array<{ exitCode: number; stdout: string }> = [];
      for (let step = 1; step <= TERMINAL_COMMANDS; step++) {
        const command = `export TORTURE_STEP=${step}; ${witnessCommand(witness, input.label, step)}`;
        const done = await turn.tool(terminal, { command });
        results.push({ exitCode: done.exitCode, stdout: done.stdout });
      }
      return { results };
    },
  });
  return { agents: [agent], tools: [terminal], allowlist: {}, close: () => terminal.close() };
};
