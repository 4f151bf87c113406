import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { CliError, ExitCode, usageError } from "../CliError.js";
import type { Io } from "../Output.js";
import { openOperatorRuntime, operatorName, refusal } from "./decide.js";

export interface SignalOptions {
  readonly payload?: string;
  readonly payloadFile?: string;
  readonly signalId?: string;
  readonly by?: string;
  readonly db?: string;
  readonly json?: boolean;
}

/** A payload file far beyond what anyone sends as a signal is refused before it is read. */
const PAYLOAD_FILE_MAX_BYTES = 16 * 1024 * 1024;

const parsePayload = (text: string, where: string): unknown => {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new CliError(
      ExitCode.failed,
      `${where} is not JSON (${error instanceof Error ? error.message : String(error)}); nothing was written`,
      `pass the payload as JSON, e.g. --payload '{"approved":true}', or a file of JSON with --payload-file`,
    );
  }
};

const payloadOf = (options: SignalOptions): unknown => {
  if (options.payload !== undefined && options.payloadFile !== undefined)
    throw usageError(
      "--payload and --payload-file both given",
      "pass the payload one way: --payload JSON or --payload-file F",
    );
  if (options.payload !== undefined) return parsePayload(options.payload, "--payload");
  if (options.payloadFile === undefined) return null;
  const path = resolve(options.payloadFile);
  let text: string;
  try {
    const size = statSync(path).size;
    if (size > PAYLOAD_FILE_MAX_BYTES)
      throw new CliError(
        ExitCode.failed,
        `${path} is ${size} bytes; nothing was written`,
        "send a smaller payload",
      );
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (error instanceof CliError) throw error;
    throw new CliError(
      ExitCode.failed,
      `cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
      "pass --payload-file with the path of a JSON file",
    );
  }
  return parsePayload(text, path);
};

/**
 * `holdfast signal <runId> <name>` (decision 0054): record the signal in the run's stream from this
 * process; a run waiting for it is woken by any worker with its agent, else it is buffered until a
 * wait takes it. The same `--signal-id` again is accepted and writes nothing (exit 0); with another
 * payload, or to a run that ended, it is refused (exit 1) and nothing is written.
 */
export const signalCommand = async (
  runId: string,
  name: string,
  options: SignalOptions,
  io: Io,
): Promise<number> => {
  if (options.signalId === undefined || options.signalId.trim() === "")
    throw usageError(
      "--signal-id is required",
      "name the signal once for all its retries, e.g. --signal-id order-42-approved: the same id is recorded once",
    );
  const payload = payloadOf(options);
  const by = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime
      .signal(runId, name, payload, { signalId: options.signalId, by })
      .catch((error: unknown) => {
        throw refusal(error);
      });
    const code = outcome.accepted ? ExitCode.ok : ExitCode.failed;
    if (options.json) await io.out.json({ ...outcome, by });
    else await io.out.lines([outcome.message]);
    return code;
  } finally {
    await runtime.close();
  }
};
