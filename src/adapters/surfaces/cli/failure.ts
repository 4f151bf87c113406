import { EventDecryptError, SealError } from "../../../events/index.js";
import { JournalTooNew, JournalUnavailable, LostCommits } from "../../../runtime/errors.js";
import { CliError, ExitCode } from "./CliError.js";

export interface Failure {
  readonly exitCode: ExitCode;
  readonly reason: string;
  readonly hint: string;
}

const oneLine = (text: string): string => text.replace(/\s*\n\s*/g, " ").trim();

/**
 * Tagged errors end their message with what to do, after the last "; " (`…; list runs with
 * \`holdfast runs\``). Splitting there gives the reason line and the hint line.
 */
const splitMessage = (message: string, fallbackHint: string): { reason: string; hint: string } => {
  const text = oneLine(message);
  const at = text.lastIndexOf("; ");
  if (at <= 0) return { reason: text, hint: fallbackHint };
  return { reason: text.slice(0, at), hint: text.slice(at + 2) };
};

const hasTag = (error: unknown): error is { readonly _tag: string; readonly message: string } =>
  typeof error === "object" && error !== null && "_tag" in error && "message" in error;

/** What to print, and the exit code, for anything a command throws. Never a stack trace. */
export const describeFailure = (error: unknown): Failure => {
  if (error instanceof CliError) return error;
  if (error instanceof JournalUnavailable) {
    return {
      exitCode: ExitCode.journalUnavailable,
      reason: oneLine(`journal ${error.location}: ${error.reason}`),
      hint: oneLine(error.hint),
    };
  }
  if (
    error instanceof JournalTooNew ||
    error instanceof LostCommits ||
    error instanceof EventDecryptError ||
    error instanceof SealError
  ) {
    return {
      exitCode: ExitCode.journalUnavailable,
      ...splitMessage(error.message, "upgrade holdfast"),
    };
  }
  if (hasTag(error)) {
    return { exitCode: ExitCode.failed, ...splitMessage(error.message, "see `holdfast --help`") };
  }
  const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return {
    exitCode: ExitCode.failed,
    reason: oneLine(message),
    hint: "this is unexpected; please report it with the command you ran",
  };
};

export const failureLines = (failure: Failure): string =>
  `holdfast: ${failure.reason}\nhint: ${failure.hint}\n`;
