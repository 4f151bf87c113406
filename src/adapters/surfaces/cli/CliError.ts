/** The exit codes of `holdfast` (docs/cli.md lists them). */
export const ExitCode = {
  ok: 0,
  /** The operation ran and failed, or what was asked for is not there. */
  failed: 1,
  /** Bad flags, arguments or command. */
  usage: 2,
  /** The journal cannot be used: missing folder, not a database, not writable, newer schema. */
  journalUnavailable: 3,
} as const;
export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** A failure the CLI itself detects, with the line to print and what to do about it. */
export class CliError extends Error {
  override readonly name = "CliError";
  constructor(
    readonly exitCode: ExitCode,
    readonly reason: string,
    readonly hint: string,
  ) {
    super(reason);
  }
}

export const usageError = (reason: string, hint: string): CliError =>
  new CliError(ExitCode.usage, reason, hint);
