/**
 * Named crash points for the crash tests. A no-op unless `HOLDFAST_CRASH_AT` names the point, in
 * which case the process kills itself with SIGKILL right there: no cleanup, no flush, exactly like
 * a power cut from the journal's point of view.
 */
export type CrashPointName =
  | "before-intent"
  | "after-intent"
  | "after-effect-before-outcome"
  | "after-outcome"
  | "mid-checkpoint"
  | "mid-group-commit"
  | "after-interrupted"
  | "after-replay-authorized";

export const CRASH_POINTS: ReadonlyArray<CrashPointName> = [
  "before-intent",
  "after-intent",
  "after-effect-before-outcome",
  "after-outcome",
  "mid-checkpoint",
  "mid-group-commit",
  "after-interrupted",
  "after-replay-authorized",
];

export const crashPoint = (name: CrashPointName): void => {
  const env = globalThis.process?.env;
  if (!env || env.HOLDFAST_CRASH_AT !== name) return;
  globalThis.process.kill(globalThis.process.pid, "SIGKILL");
};

/** A crash point that fires only for the call named by `HOLDFAST_CRASH_CALL` (a tool or model name). */
export const crashPointFor = (name: CrashPointName, callName: string): void => {
  const env = globalThis.process?.env;
  if (!env || env.HOLDFAST_CRASH_AT !== name) return;
  if (env.HOLDFAST_CRASH_CALL && env.HOLDFAST_CRASH_CALL !== callName) return;
  globalThis.process.kill(globalThis.process.pid, "SIGKILL");
};
