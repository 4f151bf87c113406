import type { ControlOutcome } from "../../../../runtime/control.js";
import type { NextStep } from "../../../../runtime/liveness.js";
import { ExitCode } from "../CliError.js";
import type { Io } from "../Output.js";
import { nextStepAfter, openOperatorRuntime, operatorName, refusal } from "./decide.js";

export interface ControlOptions {
  readonly by?: string;
  readonly note?: string;
  readonly db?: string;
  readonly json?: boolean;
}

type Action = "cancel" | "pause" | "resume";

/**
 * `holdfast cancel|pause|resume <runId>` (decisions 0043, 0044): record the request from this
 * process; the run's owner carries it out (or, when it has none alive, this process does). A cancel
 * of a run that already ended is a no-op that says so (exit 0); a pause or resume that does not
 * apply is refused (exit 1). Nothing is written when `accepted` is false.
 */
export const controlCommand = async (
  action: Action,
  runId: string,
  options: ControlOptions,
  io: Io,
): Promise<number> => {
  const by = operatorName(options.by);
  const runtime = await openOperatorRuntime(options.db);
  try {
    const request = { by, ...(options.note === undefined ? {} : { note: options.note }) };
    let outcome: ControlOutcome;
    let step: NextStep | null = null;
    try {
      if (action === "resume") {
        const resumed = await runtime.resume(runId, request);
        outcome = resumed;
        if (resumed.accepted) step = await nextStepAfter(runId, await resumed.result, options.db);
      } else {
        outcome = await (action === "cancel"
          ? runtime.cancel(runId, request)
          : runtime.pause(runId, request));
        if (outcome.accepted) step = await nextStepAfter(runId, { status: outcome.status }, options.db);
      }
    } catch (error) {
      throw refusal(error);
    }
    const next = step?.text ?? null;
    const code = outcome.accepted || action === "cancel" ? ExitCode.ok : ExitCode.failed;
    if (options.json) {
      await io.out.json({ ...outcome, by, ...(step === null ? {} : { next: step.text, live: step.live }) });
      return code;
    }
    await io.out.lines([outcome.message, ...(next === null ? [] : [next])]);
    return code;
  } finally {
    await runtime.close();
  }
};
