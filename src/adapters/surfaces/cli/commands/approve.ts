import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { CliError, ExitCode, usageError } from "../CliError.js";
import type { Io } from "../Output.js";
import { openOperatorRuntime, operatorName, refusal } from "./decide.js";

export interface ApproveOptions {
  readonly basedOn: number;
  readonly note?: string;
  readonly args?: string;
  readonly argsFile?: string;
  readonly by?: string;
  readonly db?: string;
  readonly json?: boolean;
}

const parseArgs = (text: string, where: string): unknown => {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `${where} is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      `pass the edited arguments as JSON, e.g. --args '{"amount":250}' (the whole arguments object), or a file of JSON with --args-file`,
    );
  }
};

const editedArgs = (options: ApproveOptions): unknown => {
  if (options.args !== undefined && options.argsFile !== undefined)
    throw usageError("--args and --args-file both given", "pass the edited arguments one way");
  if (options.args !== undefined) return parseArgs(options.args, "--args");
  if (options.argsFile === undefined) return undefined;
  const path = resolve(options.argsFile);
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      "pass --args-file with the path of a JSON file",
    );
  }
  return parseArgs(text, path);
};

/**
 * `holdfast approve <runId> <call>` / `holdfast deny <runId> <call>` (decision 0057): record a
 * person's decision on a tool call that awaits approval, on the version they looked at. `<call>` is
 * the call id or its seq. Refused (exit 1, nothing written) when the run does not await approval of
 * that call, when it moved since `--based-on`, for a denial without `--note`, or for edited
 * arguments the tool does not allow.
 */
export const approveCommand = async (
  action: "approve" | "deny",
  runId: string,
  call: string,
  options: ApproveOptions,
  io: Io,
): Promise<number> => {
  const args = editedArgs(options);
  if (action === "deny" && args !== undefined)
    throw usageError("deny takes no --args", "edited arguments go only with approve");
  if (action === "deny" && (options.note ?? "").trim() === "")
    throw usageError("deny needs --note", 'say why: the agent sees it (--note "over budget")');
  const by = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const request = {
      by,
      basedOnVersion: options.basedOn,
      ...(options.note === undefined ? {} : { note: options.note }),
      ...(args === undefined ? {} : { args }),
    };
    const outcome = await (action === "approve"
      ? runtime.approve(runId, call, request)
      : runtime.deny(runId, call, request)
    ).catch((error: unknown) => {
      throw refusal(error);
    });
    if (options.json) await io.out.json({ ...outcome, by });
    else await io.out.lines([outcome.message]);
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};
