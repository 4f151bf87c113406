/**
 * Named crash points for the crash tests. A no-op unless `HOLDFAST_CRASH_AT` names the point, in
 * which case the process kills itself with SIGKILL right there: no cleanup, no flush, exactly like
 * a power cut from the journal's point of view.
 *   HOLDFAST_CRASH_CALL  only for calls of that name (a tool, model or agent name)
 *   HOLDFAST_CRASH_SKIP  let the first N matching hits pass
 */
export type CrashPointName =
  | "before-intent"
  | "after-intent"
  | "after-effect-before-outcome"
  | "after-outcome"
  | "during-backoff"
  | "mid-checkpoint"
  | "mid-group-commit"
  | "after-interrupted"
  | "after-replay-authorized"
  /** `holdfast backup`: the copy is written and verified under its temporary name, not yet linked to the target. */
  | "backup-verified"
  | QueueCrashPointName
  | RetryCrashPointName
  | SignalCrashPointName
  | WakeCrashPointName
  | ApprovalCrashPointName
  | ScheduleCrashPointName;

/**
 * Crash points of a schedule's tick (decision 0064, the `schedule` kind): `before-tick-admit` — a
 * worker read the schedule and chose to admit the tick's run, nothing written yet;
 * `after-tick-admit` — the tick's run admitted (`<id>@<tick>` committed), `schedule.ticked` not yet
 * recorded; `after-tick-recorded` — `schedule.ticked` committed. Apart from {@link CRASH_POINTS}:
 * only the torture's `schedule` kind has schedules.
 */
export type ScheduleCrashPointName = "before-tick-admit" | "after-tick-admit" | "after-tick-recorded";
/** The tick's crash points, in order. */
export const SCHEDULE_CRASH_POINTS: ReadonlyArray<ScheduleCrashPointName> = [
  "before-tick-admit",
  "after-tick-admit",
  "after-tick-recorded",
];

/**
 * Crash points of a wake-up (decision 0064): `before-wake` right after a waker claimed a due wait
 * and read its run, before `run.woken` is appended (the timer is due and not fired); `after-woken`
 * right after `run.woken` committed, before the run is executed again. Apart from
 * {@link CRASH_POINTS}: only the torture's `sleep` and `signal` kinds park a run.
 */
export type WakeCrashPointName = "before-wake" | "after-woken";
/** The wake-up's crash points, in order. */
export const WAKE_CRASH_POINTS: ReadonlyArray<WakeCrashPointName> = ["before-wake", "after-woken"];

/**
 * Crash points of an approval (decision 0057): right after `approval.recorded` committed, before
 * the approver returns or wakes anything; and right after the wake-up committed, before the
 * approved call's next attempt (its intent) is written. Apart from {@link CRASH_POINTS}.
 */
export type ApprovalCrashPointName = "after-approval" | "after-approval-wake";

/**
 * A crash point of a signal (decision 0054): right after `signal.received` committed, before the
 * sender returns or wakes anything. Apart from {@link CRASH_POINTS}: the torture agents wait for no
 * signal.
 */
export type SignalCrashPointName = "after-signal";

/**
 * A crash point of a policy's retries (decision 0046): right after a definite failure's `call.failed`
 * committed, before the policy's `retry.scheduled`. Apart from {@link CRASH_POINTS}: the torture
 * agents' calls mostly declare no retry policy.
 */
export type RetryCrashPointName = "after-failed";

/**
 * Crash points of a chat's queue (decision 0045): before a queued input's admission is written,
 * and after it committed but before its run started. Apart from {@link CRASH_POINTS}: the torture
 * agents queue nothing, so these would never fire there.
 */
export type QueueCrashPointName = "before-queue-admit" | "after-queue-admit";
export const QUEUE_CRASH_POINTS: ReadonlyArray<QueueCrashPointName> = [
  "before-queue-admit",
  "after-queue-admit",
];

export const CRASH_POINTS: ReadonlyArray<CrashPointName> = [
  "before-intent",
  "after-intent",
  "after-effect-before-outcome",
  "after-outcome",
  "during-backoff",
  "mid-checkpoint",
  "mid-group-commit",
  "after-interrupted",
  "after-replay-authorized",
];

let hits = 0;

const fire = (name: CrashPointName, callName?: string): void => {
  const process = globalThis.process;
  const skip = Number(process.env.HOLDFAST_CRASH_SKIP ?? 0);
  if (hits++ < skip) return;
  // A person at a terminal (the demo's crash experiment) would see only the shell's "Killed": say it
  // was deliberate. Only on a terminal, where the write is synchronous and no harness reads stderr.
  if (process.stderr?.isTTY) {
    const at = callName === undefined ? "" : ` at ${callName}`;
    process.stderr.write(
      `holdfast: crash point ${name} reached${at} (HOLDFAST_CRASH_AT): killing this process with SIGKILL\n`,
    );
  }
  process.kill(process.pid, "SIGKILL");
};

/** Kill this process with SIGKILL here when `HOLDFAST_CRASH_AT` names `name`; else nothing. */
export const crashPoint = (name: CrashPointName): void => {
  const env = globalThis.process?.env;
  if (!env || env.HOLDFAST_CRASH_AT !== name) return;
  fire(name);
};

/** A crash point that fires only for the call named by `HOLDFAST_CRASH_CALL`, when set. */
export const crashPointFor = (name: CrashPointName, callName: string): void => {
  const env = globalThis.process?.env;
  if (!env || env.HOLDFAST_CRASH_AT !== name) return;
  if (env.HOLDFAST_CRASH_CALL && env.HOLDFAST_CRASH_CALL !== callName) return;
  fire(name, callName);
};

/**
 * Named pause points for the multi-worker torture: a no-op unless `HOLDFAST_PAUSE_AT` names the
 * point, in which case the process stops itself with SIGSTOP right there (after
 * `HOLDFAST_PAUSE_SKIP` hits, and again every `HOLDFAST_PAUSE_EVERY` hits when set), as a long GC,
 * a swapped-out page or a VM migration would stop it.
 * Whoever runs it sends SIGCONT. `after-lease-check`: between the owner's lease check and the
 * effect, the window law 10's fencing proofs close. `before-intent`: after the owner found no cancel
 * or pause request and before its intent's append, the window a request can slip into (decision 0091).
 */
export type PausePointName = "after-lease-check" | "before-intent";

let pauseHits = 0;

export const pausePointFor = (name: PausePointName, callName: string): void => {
  const env = globalThis.process?.env;
  if (!env || env.HOLDFAST_PAUSE_AT !== name) return;
  if (env.HOLDFAST_PAUSE_CALL && env.HOLDFAST_PAUSE_CALL !== callName) return;
  const skip = Number(env.HOLDFAST_PAUSE_SKIP ?? 0);
  const every = Number(env.HOLDFAST_PAUSE_EVERY ?? 0);
  const hit = pauseHits++;
  const due = hit === skip || (every > 0 && hit > skip && (hit - skip) % every === 0);
  if (!due) return;
  globalThis.process.kill(globalThis.process.pid, "SIGSTOP");
};
