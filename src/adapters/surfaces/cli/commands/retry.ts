import { ExitCode, usageError } from "../CliError.js";
import type { Io } from "../Output.js";
import { nextStepAfter, openOperatorRuntime, operatorName, refusal } from "./decide.js";

export interface RetryOptions {
  readonly attempts: number;
  readonly by?: string;
  readonly note?: string;
  readonly db?: string;
  readonly json?: boolean;
}

/**
 * `holdfast retry <runId> <callId> --attempts N`: allow a definitely failed call of a held run to be
 * tried again, at most N times (each attempt is recorded). Never for a call in doubt: that takes a
 * decision.
 */
export const retryCommand = async (
  runId: string,
  callId: string,
  options: RetryOptions,
  io: Io,
): Promise<number> => {
  if (options.attempts < 1) {
    throw usageError("--attempts must be at least 1", `e.g. holdfast retry ${runId} ${callId} --attempts 1`);
  }
  const grantedBy = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const outcome = await runtime
      .grantRetry(runId, callId, {
        attempts: options.attempts,
        grantedBy,
        ...(options.note === undefined ? {} : { note: options.note }),
      })
      .catch((error: unknown) => {
        throw refusal(error);
      });
    const after = await outcome.result;
    const step = await nextStepAfter(runId, after, options.db);
    const { agent } = step;
    const next = step.text;
    if (options.json) {
      await io.out.json({
        runId,
        callId,
        attempts: options.attempts,
        grantedBy,
        version: outcome.version,
        status: after.status === "elsewhere" ? after.state : after.status,
        agent,
        next,
        live: step.live,
      });
      return ExitCode.ok;
    }
    await io.out.lines([
      `granted ${options.attempts} more attempt${options.attempts === 1 ? "" : "s"} to call ${callId} of run ${runId}, by ${grantedBy} (run version ${outcome.version})`,
      next,
    ]);
    return ExitCode.ok;
  } finally {
    await runtime.close();
  }
};
