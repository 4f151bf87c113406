import type {
  AnyEvent,
  CallKind,
  Disposition,
  ErrorInfo,
  EventOf,
  HoldReason,
  KeyedHash,
  Masker,
} from "../events/index.js";
import { makeMasker, secretsByName } from "../events/index.js";
import { contextOf, type RunFold, statusOf } from "../machines/index.js";
import { crashPointFor, pausePointFor } from "./crash.js";
import type { Recorded, RecordedRetry } from "./cursor.js";
import type { CallContext, SettledContext } from "./define.js";
import { type RunWriter, recordOutcome, type WriteSlot } from "./dispatch.js";
import { withDocumentRetry } from "./documents.js";
import {
  CallFailed,
  CallTimedOut,
  DefiniteFailure,
  FencedOut,
  JournalUnavailable,
  LeaseLost,
  RunCancelled,
  RunHeld,
  RunMovedOn,
  type RunPausing,
} from "./errors.js";
import type { AppendRequest } from "./Journal.js";
import { storedCopy, storedDigest } from "./json.js";
import type { LeaseRenewal } from "./ownership.js";
import { type Due, nextDue, policyDue, type ResolvedRetry, recordedFailure } from "./retry.js";

/** What a journaled call needs: its identity, what is stored, and the effect. */
export interface CallSpec<R> {
  kind: CallKind;
  name: string;
  /** The encoded, JSON-clean arguments: fingerprinted, masked and stored. */
  args: unknown;
  /** What the effect receives (decoded by the tool's Schema). */
  runArgs: unknown;
  disposition: Disposition;
  pin: string | null;
  reconciler: string | null;
  probe?: (args: unknown, context: CallContext) => unknown;
  run: (args: unknown, context: CallContext) => Promise<R>;
  /**
   * An internal effect (a document change): instead of running between intent and outcome, it is
   * prepared and committed together with both, so the call is never in doubt.
   */
  atomic?: (context: CallContext) => Promise<AtomicEffect>;
  /** The reconciler's clean-up once an attempt is over ({@link Reconciler.settled}). */
  settled?: (context: SettledContext) => void;
  /** The retry policy declared in code: recorded in the intent, applied to definite failures. */
  retry?: ResolvedRetry;
  /** Abort each attempt through its signal after this long. */
  timeoutMs?: number;
  /** Where a person looks to learn whether the call happened: recorded in each intent, masked. */
  checkHint?: (runArgs: unknown, context: CallContext) => string;
  /**
   * A tool whose calls may need approval (decision 0057): whether this call does (asked of a new
   * call only), whether edits are allowed, what the tool does, and how to decode edited arguments
   * into what the effect receives (throws when they no longer fit the tool's Schema).
   */
  approval?: {
    readonly needed: () => boolean;
    readonly editable: boolean;
    readonly description: string;
    readonly decode: (stored: unknown) => unknown;
  };
}

/** For warnings: token shapes and secret-like keys masked, with no registered secrets at hand. */
const WARNING_MASK = makeMasker({});

/** Run a reconciler's clean-up for attempts `from`..`to` of a call; a failure is a warning only. */
export const settledAttempts = (
  spec: { readonly name: string; readonly settled?: (context: SettledContext) => void },
  runId: string,
  callId: string,
  from: number,
  to: number,
): void => {
  if (!spec.settled) return;
  for (let attempt = from; attempt <= to; attempt++) {
    const idempotencyKey = `${callId}#${attempt}`;
    try {
      spec.settled({ runId, callId, attempt, idempotencyKey });
    } catch (error) {
      process.emitWarning(
        `tool "${spec.name}" could not clean up after attempt ${idempotencyKey}: ${errorInfo(WARNING_MASK, error).message}`,
        { code: "HOLDFAST_SETTLE_CLEANUP" },
      );
    }
  }
};

/** What an internal effect commits with its call: the outcome and the appends to other streams. */
export interface AtomicEffect {
  readonly outcome: { readonly ok: unknown } | { readonly error: ErrorInfo };
  readonly others: ReadonlyArray<AppendRequest>;
}

/** What an attempt needs from the turn that runs it. */
export interface AttemptHost {
  readonly runId: string;
  readonly chatId: string;
  readonly writer: RunWriter;
  readonly masker: Masker;
  /** Law 10: whether this worker may start an effect of the run now (lease with margin). */
  mayStartEffect(): boolean;
  /** Renew the lease now (`Ownership.renewNow`); `lost` once this execution lost the run. */
  renewLease(): Promise<LeaseRenewal>;
  /** Keep what the journal now holds for a call, for this execution's later calls. */
  record(callId: string, outcome: Recorded): void;
  /** Hold the run (unless it is no longer running) and throw `RunHeld`. */
  hold(reasons: [HoldReason, ...HoldReason[]]): Promise<never>;
  /** This execution no longer owns the run: nothing more may be written or started by it. */
  ownershipLost(reason?: string): void;
  /** The same, because retention removed the run while a call of it ran. */
  runPruned(): void;
  /** A keyed digest under the journal's key, for content a call must recognise without storing it. */
  keyedHash(): KeyedHash;
  /** The signal a new attempt's signal follows (the turn's, aborted by a cancel); none for clean-up calls. */
  callSignal(): AbortSignal | undefined;
  /**
   * Why no attempt may start now (the run is being cancelled or paused); null when it may. Asked of
   * `fold` when given (the fold an append is being made on), else of the writer's.
   */
  controlRefusal(fold?: RunFold): RunCancelled | RunPausing | null;
  /** Set only while `holdfast replay` re-executes the run (decision 0082); see {@link ReplayHooks}. */
  readonly replay?: ReplayHooks | undefined;
}

/**
 * What a replay (decision 0082) changes in how calls run: no reconciler clean-up (`settled`) is
 * called — it acts outside the process — and a scheduled retry is not waited for: the replay stops
 * at that call with the error `stopAt` gives.
 */
export interface ReplayHooks {
  /** Note that the replay stops at call `seq` (the journal knows no more of it) and give the error to throw. */
  stopAt(seq: number, callId: string, detail: string): Error;
}

/** Mask and shape an error for storage: name and message only, never a stack. */
export const errorInfo = (masker: Masker, error: unknown): ErrorInfo => {
  try {
    return describeError(masker, error);
  } catch (cause) {
    // A thrown value that cannot be described (a getter or `toString` that throws, no prototype)
    // must not become an error of holdfast's own: the run records that much instead.
    const why = cause instanceof Error ? masker.maskString(cause.message) : "it cannot be described";
    return { name: "Error", message: `a value was thrown that cannot be read (${why})` };
  }
};

const describeError = (masker: Masker, error: unknown): ErrorInfo => {
  if (error instanceof DefiniteFailure) {
    const details =
      error.details === undefined ? {} : { details: masker.mask(storedCopy(error.details, "error details")) };
    return { name: error.name, message: masker.maskString(error.message), ...details };
  }
  // A tagged error's own `name` field can be a call's name (CallFailed, OutcomeUnknown): its tag names the error.
  const tag = (error as { _tag?: unknown })?._tag;
  if (error instanceof Error)
    return { name: typeof tag === "string" ? tag : error.name, message: masker.maskString(error.message) };
  return { name: "Error", message: masker.maskString(String(error)) };
};

const callContext = (
  host: AttemptHost,
  callId: string,
  attempt: number,
  signal: AbortSignal,
): CallContext => ({
  runId: host.runId,
  chatId: host.chatId,
  callId,
  attempt,
  idempotencyKey: `${callId}#${attempt}`,
  checkLease: () => {
    if (!host.mayStartEffect()) throw new LeaseLost({ runId: host.runId, callId });
  },
  keyedHash: () => host.keyedHash(),
  signal,
});

/**
 * One live attempt: the intent committed first (law 1), the lease checked with its margin (law 10),
 * then the effect, then its outcome — recorded whatever happened to the run meanwhile (law 5).
 * `slot` is the call's place in the run's append order, taken when its seq was.
 */
export const runAttempt = async <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  seq: number,
  callId: string,
  fingerprint: string,
  attempt: number,
  slot: WriteSlot,
  extraProbe?: Readonly<Record<string, unknown>>,
): Promise<R> => {
  const controller = new AbortController();
  const context = callContext(host, callId, attempt, controller.signal);
  let intent: EventOf<"call.intended">;
  try {
    const refused = host.controlRefusal();
    if (refused) throw refused;
    intent = intentOf(host, spec, seq, callId, fingerprint, attempt, context, extraProbe);
  } catch (error) {
    slot.release();
    throw error;
  }
  if (spec.atomic) return commitAtomic(host, spec, intent, spec.atomic, context, slot);
  // A cancel or pause another process recorded after the check above reaches the fold the intent
  // is appended on (the append meets the request as a version conflict and folds it in): the intent
  // then commits with its not-started outcome, so a death right after the commit leaves the journal
  // itself saying the effect never started (decision 0091).
  let refusedAtCommit: RunCancelled | RunPausing | null = null;
  const intentEvents = (fold: RunFold): ReadonlyArray<AnyEvent> => {
    refusedAtCommit = host.controlRefusal(fold);
    return refusedAtCommit ? [intent, notStartedForControlEvent(host, callId, attempt)] : [intent];
  };
  try {
    crashPointFor("before-intent", spec.name);
    pausePointFor("before-intent", spec.name);
    // Law 1: the effect starts only after this commit.
    await slot.appendWith(intentEvents, []);
  } catch (error) {
    // Whether the intent is stored nobody can tell now (decision 0068): its effect is not started,
    // and nothing more is written by this execution — the run stays in doubt, never "not started",
    // for recovery to classify once the journal answers (it finds the intent or it does not).
    if (error instanceof JournalUnavailable && error.written === "unknown")
      host.ownershipLost(
        `whether the intent of ${callId} was committed is unknown (${error.reason}); its effect was not started and the run is left in doubt for recovery`,
      );
    // A sibling held the run while this intent waited for its turn: nothing was started.
    const fold = host.writer.fold;
    if (statusOf(fold) !== "running") {
      throw new RunHeld({
        runId: host.runId,
        reasons: contextOf(fold).heldReasons.length
          ? contextOf(fold).heldReasons
          : [{ code: "decision-needed", detail: `the run is ${statusOf(fold)}` }],
      });
    }
    throw error;
  } finally {
    slot.release();
  }
  crashPointFor("after-intent", spec.name);
  if (refusedAtCommit) throw refusedAtCommit;
  // A cancel or pause learnt after the intent committed (by the engine's watch of the stream): the
  // effect is not started, and this process knows it, but the journal orders the request after the
  // intent — a death before this record leaves the call in doubt, as it must (the effect might have
  // started, for all the journal tells).
  const refused = host.controlRefusal();
  if (refused) return notStartedForControl(host, callId, attempt, refused);
  const parent = host.callSignal();
  const follow = () => controller.abort(parent?.reason);
  if (parent?.aborted) follow();
  else parent?.addEventListener("abort", follow, { once: true });
  try {
    return await effect(host, spec, seq, callId, fingerprint, attempt, context, controller);
  } finally {
    parent?.removeEventListener("abort", follow);
  }
};

/** What a cancel or pause leaves of an attempt whose intent is committed but whose effect never started. */
export const NOT_STARTED_CONTROL_EVIDENCE = "cancel or pause requested before the effect";

const notStartedForControlEvent = (
  host: AttemptHost,
  callId: string,
  attempt: number,
): EventOf<"call.reconciled"> => ({
  type: "call.reconciled",
  runId: host.runId,
  callId,
  attempt,
  outcome: "not-completed",
  evidence: NOT_STARTED_CONTROL_EVIDENCE,
});

const notStartedForControl = async (
  host: AttemptHost,
  callId: string,
  attempt: number,
  refused: RunCancelled | RunPausing,
): Promise<never> => {
  try {
    await host.writer.append([notStartedForControlEvent(host, callId, attempt)]);
  } catch (error) {
    if (error instanceof FencedOut) host.ownershipLost();
    // Otherwise the intent stays in doubt: the run is held for it, never silently forgotten.
  }
  throw refused;
};

const intentOf = <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  seq: number,
  callId: string,
  fingerprint: string,
  attempt: number,
  context: CallContext,
  extraProbe?: Readonly<Record<string, unknown>>,
): EventOf<"call.intended"> => {
  const probed = spec.probe
    ? storedCopy(spec.probe(spec.runArgs, context), `probe of "${spec.name}"`)
    : undefined;
  const probe =
    extraProbe === undefined ? probed : { ...(probed as Record<string, unknown> | undefined), ...extraProbe };
  return {
    type: "call.intended",
    runId: host.runId,
    callId,
    seq,
    attempt,
    kind: spec.kind,
    name: spec.name,
    args: host.masker.mask(spec.args),
    fingerprint,
    disposition: spec.disposition,
    pin: spec.pin,
    reconciler: spec.reconciler,
    ...(probe === undefined ? {} : { probe: host.masker.mask(probe) }),
    idempotencyKey: context.idempotencyKey,
    ...(spec.retry ? { retry: spec.retry.recorded } : {}),
    ...checkHintField(host, spec, context),
  };
};

/** The most a recorded hint keeps (a hint is a sentence, not a log). */
const CHECK_HINT_MAX = 1_000;

/** The tool's hint for this attempt, masked; left out when it throws or says nothing. */
const checkHintField = <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  context: CallContext,
): { readonly checkHint?: string } => {
  if (!spec.checkHint) return {};
  let hint: unknown;
  try {
    hint = spec.checkHint(spec.runArgs, context);
  } catch {
    return {};
  }
  if (typeof hint !== "string" || hint.trim() === "") return {};
  return { checkHint: host.masker.maskString(hint.trim().slice(0, CHECK_HINT_MAX)) };
};

/** The effect of a committed intent, and its outcome. */
const effect = async <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  seq: number,
  callId: string,
  fingerprint: string,
  attempt: number,
  context: CallContext,
  controller: AbortController,
): Promise<R> => {
  // Law 8: a credential masked by its key name in the call's arguments (an `X-Api-Key` header) is
  // masked as an exact value in the call's result and error too, where the answer may echo it.
  const masker = host.masker.withSecrets(secretsByName(spec.args));
  if (!host.mayStartEffect()) {
    // Near or past the lease (a pause, a heartbeat that waited behind a long write): a renewal now
    // may give the margin back; if it does not, this worker starts nothing.
    const lease = await host.renewLease();
    if (lease !== "regained" || !host.mayStartEffect()) return notStarted(host, callId, attempt, lease);
  }
  pausePointFor("after-lease-check", spec.name);
  let result: unknown;
  let running: Promise<R> | undefined;
  try {
    running = spec.run(spec.runArgs, context);
    result = await (spec.timeoutMs === undefined
      ? running
      : withTimeout(
          running,
          controller,
          spec.timeoutMs,
          // Made only when the timer expires: an error (its stack captured) is not built for every call.
          (timeoutMs) => new CallTimedOut({ runId: host.runId, callId, name: spec.name, timeoutMs }),
        ));
  } catch (error) {
    if (error instanceof LeaseLost)
      // The tool's own re-check (after its receipt) refused: the effect was not started.
      return notStarted(host, callId, attempt, await host.renewLease());
    if (error instanceof DefiniteFailure) {
      // The policy's wait is decided before the failure is recorded: a wait it will not take (a
      // Retry-After past its maxRetryAfterMs) is named in the recorded error, live and replayed alike.
      const due = policyDue(spec.retry, attempt, error, Date.now());
      const described = errorInfo(masker, error);
      const info =
        due !== undefined && "refused" in due
          ? { ...described, message: `${described.message} (${due.refused})` }
          : described;
      await settle(host, callId, {
        type: "call.failed",
        runId: host.runId,
        callId,
        attempt,
        definite: true,
        error: info,
      });
      crashPointFor("after-failed", spec.name);
      if (!host.replay) settledAttempts(spec, host.runId, callId, attempt, attempt);
      host.record(callId, { kind: "error", error: info });
      // A person granted retries for this call: use them, one recorded attempt each.
      if ((contextOf(host.writer.fold).calls.get(callId)?.retriesLeft ?? 0) > 0) {
        const slot = host.writer.reserve();
        return runAttempt(host, spec, seq, callId, fingerprint, attempt + 1, slot);
      }
      if (await schedulePolicyRetry(host, callId, attempt, due, Date.now()))
        return attemptWhenDue(host, spec, seq, callId, fingerprint, attempt + 1);
      throw new CallFailed({ runId: host.runId, callId, name: spec.name, error: info });
    }
    // Aborted by a cancel and not proven definite: the call stays in doubt and the run's end holds
    // it (`cancelled-in-doubt`, decision 0043); nothing retries.
    if (controller.signal.reason instanceof RunCancelled && !(error instanceof CallTimedOut))
      throw controller.signal.reason;
    // Law 4: anything not proven definite leaves the call in doubt; nothing retries by itself,
    // except a model call declared replayable whose policy has attempts left (§13).
    const inDoubtDue =
      spec.kind === "model" &&
      spec.disposition === "replay" &&
      spec.retry &&
      attempt < spec.retry.recorded.attempts
        ? nextDue(spec.retry.recorded, attempt, error, Date.now())
        : undefined;
    if (
      inDoubtDue !== undefined &&
      !("refused" in inDoubtDue) &&
      (await scheduleRetry(host, callId, attempt, inDoubtDue, errorInfo(masker, error)))
    ) {
      // Law 5: the timed-out attempt may still answer. Its answer is recorded, never dropped: the
      // call moved on to the next attempt, so it lands as a conflict.recorded (the first outcome stands).
      if (error instanceof CallTimedOut && running)
        recordLateAnswer(host, masker, spec, callId, attempt, running);
      return attemptWhenDue(host, spec, seq, callId, fingerprint, attempt + 1);
    }
    const info = errorInfo(masker, error);
    const notRetried = inDoubtDue !== undefined && "refused" in inDoubtDue ? ` (${inDoubtDue.refused})` : "";
    if (error instanceof CallTimedOut && running)
      recordLateAnswer(host, masker, spec, callId, attempt, running);
    return host.hold([
      {
        code: "indefinite-failure",
        callId,
        detail: `${spec.kind} "${spec.name}" failed without proof that it did not take effect: ${info.name}: ${info.message}${notRetried}`,
      },
    ]);
  }
  crashPointFor("after-effect-before-outcome", spec.name);
  let value: unknown;
  try {
    value = storedResult(masker, spec, result);
  } catch (error) {
    // It happened, but its result cannot be stored: the call stays in doubt for a person.
    const info = errorInfo(masker, error);
    return host.hold([
      {
        code: "indefinite-failure",
        callId,
        detail: `${spec.kind} "${spec.name}" took effect but its result cannot be stored: ${info.message}`,
      },
    ]);
  }
  await settle(host, callId, completedEvent(host, callId, attempt, value));
  crashPointFor("after-outcome", spec.name);
  if (!host.replay) settledAttempts(spec, host.runId, callId, attempt, attempt);
  host.record(callId, { kind: "result", value });
  return value as R;
};

/** A call's result as the journal keeps it: a JSON copy, masked (throws when it cannot be stored). */
const storedResult = <R>(masker: Masker, spec: CallSpec<R>, result: unknown): unknown =>
  masker.mask(storedCopy(result, `result of ${spec.kind} "${spec.name}"`));

const completedEvent = (
  host: AttemptHost,
  callId: string,
  attempt: number,
  value: unknown,
): EventOf<"call.completed"> => ({
  type: "call.completed",
  runId: host.runId,
  callId,
  attempt,
  result: value,
  resultDigest: storedDigest(value),
});

/**
 * Law 5: an effect that ignored its timeout may still answer. Its answer is recorded when it comes —
 * a result as the call's outcome (on the held run, which then says the outcome arrived after the
 * hold), a `DefiniteFailure` as a definite failure — never dropped; any other error proves nothing.
 * A failure to record is a warning, never an unhandled rejection.
 */
const recordLateAnswer = <R>(
  host: AttemptHost,
  masker: Masker,
  spec: CallSpec<R>,
  callId: string,
  attempt: number,
  running: Promise<R>,
): void => {
  running
    .then(
      async (result) => {
        await recordOutcome(
          host.writer,
          completedEvent(host, callId, attempt, storedResult(masker, spec, result)),
        );
      },
      async (error: unknown) => {
        if (!(error instanceof DefiniteFailure)) return;
        await recordOutcome(host.writer, {
          type: "call.failed",
          runId: host.runId,
          callId,
          attempt,
          definite: true,
          error: errorInfo(masker, error),
        });
      },
    )
    .catch((error: unknown) => {
      process.emitWarning(
        `holdfast: the late answer of timed-out call ${callId} attempt ${attempt} could not be recorded: ${
          errorInfo(masker, error).message
        }`,
        { code: "HOLDFAST_LATE_OUTCOME" },
      );
    });
};

/** How long an aborted call has to answer its abort (with a `DefiniteFailure` that proves it did nothing). */
const ABORT_GRACE_MS = 1_000;

/**
 * The effect, aborted through its signal after `timeoutMs`. What it answers within a short grace
 * after the abort counts as usual: a result, or a `DefiniteFailure` that proves nothing happened.
 * Any other error, or no answer, leaves the call in doubt with `timedOut` (law 4).
 */
const withTimeout = async <R>(
  running: Promise<R>,
  controller: AbortController,
  timeoutMs: number,
  timedOutError: (timeoutMs: number) => CallTimedOut,
): Promise<R> => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const expired = new Promise<"expired">((resolve) => {
    timer = setTimeout(() => resolve("expired"), timeoutMs);
  });
  try {
    // Settled after the run was held, its late answer has no one to hear it: never an unhandled rejection.
    running.catch(() => undefined);
    const first = await Promise.race([running, expired]);
    if (first !== "expired") return first as R;
    const timedOut = timedOutError(timeoutMs);
    controller.abort(timedOut);
    const grace = new Promise<"ignored">((resolve) => {
      timer = setTimeout(() => resolve("ignored"), ABORT_GRACE_MS);
    });
    const answer = await Promise.race([running.then(() => "answered" as const), grace]).catch((error) => {
      // It answered the abort with a failure: a DefiniteFailure proves nothing happened; else in doubt.
      if (error instanceof DefiniteFailure) throw error;
      throw timedOut;
    });
    // An effect that ignores the abort may still be taking place: in doubt, for a person.
    if (answer === "ignored") throw timedOut;
    return await running;
  } finally {
    clearTimeout(timer);
  }
};

/**
 * Take the policy's retry of a definitely failed attempt: append its `retry.scheduled` (due `delayMs`
 * after `from`) unless the policy does not retry it (`due` absent or refused) or the run is being
 * cancelled. True once the retry is recorded: the caller then waits for it ({@link attemptWhenDue}).
 * The one place that decides this, for a failure met live and for one re-execution finds recorded
 * without its retry ({@link retryRecordedFailure}).
 */
const schedulePolicyRetry = async (
  host: AttemptHost,
  callId: string,
  failed: number,
  due: Due | undefined,
  from: number,
): Promise<boolean> =>
  contextOf(host.writer.fold).cancelRequested === undefined &&
  due !== undefined &&
  !("refused" in due) &&
  scheduleRetry(host, callId, failed, due, undefined, from);

/**
 * Re-execution found attempt `failed` of a call failed definitely, its intent's policy with attempts
 * left, and nothing after the failure: a process died between `call.failed` and `retry.scheduled`.
 * The policy decides now what it would have decided then — the intent's recorded policy with the
 * code's `when`, given the recorded failure rebuilt as a `DefiniteFailure`, the wait counted from
 * when the failure was recorded — and its retry is appended. True when it was: the caller then
 * waits for the attempt; false when the failure stands (decision 0046).
 */
export const retryRecordedFailure = async (
  host: AttemptHost,
  spec: { readonly retry?: ResolvedRetry },
  callId: string,
  failed: number,
  error: ErrorInfo,
  recorded: RecordedRetry,
): Promise<boolean> => {
  if (!spec.retry) return false;
  const retry: ResolvedRetry = { recorded: recorded.policy, when: spec.retry.when };
  const due = policyDue(retry, failed, recordedFailure(error), recorded.failedAt);
  return schedulePolicyRetry(host, callId, failed, due, recorded.failedAt);
};

/**
 * Record that the policy retries a definitely failed attempt, and when: the due time is in the
 * journal before the wait starts, so a crash during the wait resumes only the rest of it.
 * False when the run no longer takes the retry (held meanwhile): the failure then stands.
 */
const scheduleRetry = async (
  host: AttemptHost,
  callId: string,
  failed: number,
  due: { readonly delayMs: number; readonly reason: "backoff" | "retry-after" },
  /** The error of an attempt left in doubt (no `call.failed` holds it). */
  inDoubt?: ErrorInfo,
  /** What the delay counts from (ms since the epoch): now, or when a recorded failure was recorded. */
  now: number = Date.now(),
): Promise<boolean> => {
  const { delayMs, reason } = due;
  // Never an invalid date or a delay the event cannot hold: the failure then stands.
  const dueTime = now + delayMs;
  if (!Number.isSafeInteger(delayMs) || delayMs < 0 || !Number.isFinite(new Date(dueTime).getTime()))
    return false;
  const scheduled: EventOf<"retry.scheduled"> = {
    type: "retry.scheduled",
    runId: host.runId,
    callId,
    attempt: failed + 1,
    dueAt: new Date(dueTime).toISOString(),
    delayMs,
    reason,
    ...(inDoubt === undefined ? {} : { error: inDoubt }),
  };
  if (!host.writer.accepts(scheduled)) return false;
  try {
    await host.writer.append([scheduled]);
  } catch (error) {
    if (error instanceof FencedOut) host.ownershipLost();
    throw error;
  }
  return true;
};

/** The longest delay `setTimeout` keeps (2^31-1 ms); a longer one fires after 1 ms. */
const MAX_TIMER_MS = 2_147_483_647;

/** Wait until a recorded due time; then the attempt, in a fresh place in the run's append order. */
export const attemptWhenDue = async <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  seq: number,
  callId: string,
  fingerprint: string,
  attempt: number,
): Promise<R> => {
  const dueAt = contextOf(host.writer.fold).calls.get(callId)?.dueAt;
  const due = dueAt === undefined ? Number.NaN : Date.parse(dueAt);
  // The scheduled retry stays authorized, with its due time: a resume re-executes it.
  let refused = host.controlRefusal();
  if (refused) throw refused;
  // A replay never waits for a retry: the journal holds no outcome of it, so the run would go on live here.
  if (host.replay)
    throw host.replay.stopAt(
      seq,
      callId,
      `call ${seq} ("${spec.name}") waits for a retry (attempt ${attempt}) scheduled for ${dueAt ?? "now"}`,
    );
  if (Number.isFinite(due) && due > Date.now()) {
    crashPointFor("during-backoff", spec.name);
    // In pieces below setTimeout's limit (2^31-1 ms, beyond which it fires at once).
    // A cancel ends the wait at once (the retry stays authorized and never starts).
    const signal = host.callSignal();
    for (let wait = due - Date.now(); wait > 0 && !signal?.aborted; wait = due - Date.now())
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, Math.min(wait, MAX_TIMER_MS));
        signal?.addEventListener("abort", done, { once: true });
      });
  }
  refused = host.controlRefusal();
  if (refused) throw refused;
  return runAttempt(host, spec, seq, callId, fingerprint, attempt, host.writer.reserve());
};

/** What the owner records when its lease check refused an attempt's effect (`call.reconciled`'s evidence). */
export const NOT_STARTED_EVIDENCE = "lease check refused before the effect";

/**
 * The lease check refused the effect, so it never started, and this worker knows it. While the run
 * is still this worker's (the renewal found its claim at the same epoch), it says so with a fenced
 * `call.reconciled { outcome: "not-completed" }`: the next recovery resumes the run and the call
 * runs afresh, instead of holding it for a person. When the claim was taken over (or nobody can
 * tell), nothing is written and the intent stays in doubt for the new owner to classify (law 10).
 * Either way this execution stops.
 */
const notStarted = async (
  host: AttemptHost,
  callId: string,
  attempt: number,
  lease: LeaseRenewal,
): Promise<never> => {
  if (lease !== "lost" && statusOf(host.writer.fold) === "running") {
    try {
      await host.writer.append([
        {
          type: "call.reconciled",
          runId: host.runId,
          callId,
          attempt,
          outcome: "not-completed",
          evidence: NOT_STARTED_EVIDENCE,
        },
      ]);
      host.ownershipLost(
        `the lease check refused call ${callId} before its effect; recorded as not started, so the next recovery resumes the run`,
      );
    } catch {
      // Fenced out or moved meanwhile: the intent stays in doubt, as for a lost lease.
    }
  }
  host.ownershipLost();
  throw new LeaseLost({ runId: host.runId, callId });
};

/** Record an outcome; if the run moved on to another owner meanwhile, stop this execution. */
const settle = async (
  host: AttemptHost,
  callId: string,
  outcome: Extract<AnyEvent, { type: "call.completed" | "call.failed" }>,
): Promise<void> => {
  let where: Awaited<ReturnType<typeof recordOutcome>>;
  try {
    where = await recordOutcome(host.writer, outcome);
  } catch (error) {
    // The effect happened and its outcome could not be recorded (the journal stayed away through
    // every retry): the call stays in doubt, and this execution writes nothing more — no run.failed
    // that would bury it. Recovery holds the run for it once the journal answers.
    if (error instanceof JournalUnavailable)
      host.ownershipLost(
        `the outcome of ${callId} could not be recorded (${error.reason}); the call stays in doubt for recovery`,
      );
    throw error;
  }
  if (where === "recorded" || where === "duplicate") return;
  if (where === "after-prune") host.runPruned();
  else host.ownershipLost();
  throw new RunMovedOn({ runId: host.runId, callId, recordedAs: where });
};

/** Intent, outcome and the effect's own appends in one transaction; re-prepared if another writer got there first. */
const commitAtomic = async <R>(
  host: AttemptHost,
  spec: CallSpec<R>,
  intent: EventOf<"call.intended">,
  atomic: (context: CallContext) => Promise<AtomicEffect>,
  context: CallContext,
  slot: WriteSlot,
): Promise<R> => {
  const { callId, attempt } = context;
  // As for any attempt (decision 0091): a control request met on the way commits the intent with
  // its not-started outcome, and the effect (the document change) is not committed.
  let refusedAtCommit: RunCancelled | RunPausing | null = null;
  try {
    return await withDocumentRetry(async () => {
      const { outcome, others } = await atomic(context);
      const result: AnyEvent =
        "ok" in outcome
          ? {
              type: "call.completed",
              runId: host.runId,
              callId,
              attempt,
              result: outcome.ok,
              resultDigest: storedDigest(outcome.ok),
            }
          : { type: "call.failed", runId: host.runId, callId, attempt, definite: true, error: outcome.error };
      crashPointFor("before-intent", spec.name);
      pausePointFor("before-intent", spec.name);
      await slot.appendWith(
        (fold) => {
          refusedAtCommit = host.controlRefusal(fold);
          return [intent, refusedAtCommit ? notStartedForControlEvent(host, callId, attempt) : result];
        },
        (fold) => (host.controlRefusal(fold) ? [] : others),
      );
      crashPointFor("after-outcome", spec.name);
      if (refusedAtCommit) throw refusedAtCommit;
      if ("ok" in outcome) {
        host.record(callId, { kind: "result", value: outcome.ok });
        return outcome.ok as R;
      }
      host.record(callId, { kind: "error", error: outcome.error });
      throw new CallFailed({ runId: host.runId, callId, name: spec.name, error: outcome.error });
    });
  } finally {
    slot.release();
  }
};
