/**
 * A second process that reconciles one call of a built-in tool, as a new owner's recovery would,
 * while the test's process (the old owner) is stopped inside its lease check. Prints the verdict.
 * Usage: reconcile-process.ts '{"tool":"shell"|"write_file","work":…,"probe":…,"key":…}'
 */
import { makeShellTool, makeWriteFileTool } from "../../src/adapters/integrations/tools/index.js";
import { checkOf } from "./calls.js";

const { tool, work, probe, key } = JSON.parse(process.argv[2] ?? "{}") as {
  tool: "shell" | "write_file";
  work: string;
  probe: unknown;
  key: string;
};
const made = tool === "shell" ? makeShellTool(work) : makeWriteFileTool(work);
const verdict = await checkOf(made, probe, key);
process.stdout.write(JSON.stringify(verdict));
