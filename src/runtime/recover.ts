import * as Either from "effect/Either";
import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  decodeRow,
  digestOf,
  EventDecryptError,
  type EventOf,
  type HoldReason,
  type Interruption,
  type Keyring,
  keyedHash,
  type Masker,
  type RecordedEvent,
  type StoredRow,
  verifyStreamChain,
} from "../events/index.js";
import { type CallState, foldRun, type RunFold } from "../machines/index.js";
import { errorInfo } from "./attempt.js";
import type { AnyToolDef } from "./define.js";
import { storedCopy, storedDigest } from "./json.js";

/** What recovery decided for one in-doubt call: events to record, or why the run must be held. */
export type Classification =
  | {
      readonly kind: "record";
      readonly events: ReadonlyArray<AnyEvent>;
      readonly note: "replayed" | "reconciled";
    }
  | { readonly kind: "hold"; readonly reason: HoldReason };

export interface ClassifyDeps {
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  /** The safe list: tool name → pinned SHA-256 of its source. */
  readonly allowlist: Readonly<Record<string, string>>;
  readonly masker: Masker;
  /** The journal's key, for the keyed digests reconcilers compare with their probes. */
  readonly fingerprintKey: Uint8Array;
  /**
   * The longest a reconciler may take (default: its own timeout): bounded below the lease, so a
   * slow adapter cannot keep one classification going for longer than a lease; the run's claim is
   * renewed meanwhile.
   */
  readonly maxReconcileMs?: number;
}

/** What a reconciler may answer; anything else is "unknown" (the run is held, the pass goes on). */
const Verdict = Schema.Union(
  Schema.Struct({ outcome: Schema.Literal("completed"), result: Schema.Unknown, evidence: Schema.Unknown }),
  Schema.Struct({ outcome: Schema.Literal("not-completed"), evidence: Schema.Unknown }),
  Schema.Struct({ outcome: Schema.Literal("unknown"), evidence: Schema.Unknown }),
);

const DEFAULT_RECONCILE_TIMEOUT_MS = 10_000;

const withTimeout = <T>(promise: Promise<T>, ms: number, what: string): Promise<T> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });

/**
 * Whether classifying `call` asks an adapter (its tool's reconciler) what happened: the only
 * classification that leaves the process and can take time. Every other row of the recovery table
 * is decided from the intent, the registry and the safe list alone.
 */
export const asksReconciler = (call: CallState, tools: ReadonlyMap<string, AnyToolDef>): boolean => {
  if (call.kind === "child" || call.disposition !== "reconcile") return false;
  const reconciler = tools.get(call.name)?.reconciler;
  return reconciler != null && reconciler.name === call.reconciler;
};

/**
 * The recovery table (DESIGN §6) for one in-doubt call. Law 3: it runs again only if its tool is
 * on the safe list with the pin recorded in the intent equal to both the allowlist pin and the
 * current source; or an adapter proves it did not complete; otherwise the run is held.
 */
export const classifyInDoubt = async (
  call: CallState,
  intent: EventOf<"call.intended">,
  deps: ClassifyDeps,
): Promise<Classification> => {
  const { runId, callId, attempt } = intent;
  const hold = (code: HoldReason["code"], detail: string): Classification => ({
    kind: "hold",
    reason: { code, callId, detail },
  });

  if (call.kind === "child") {
    return {
      kind: "record",
      note: "replayed",
      events: [{ type: "call.replay-authorized", runId, callId, attempt, reason: "idempotent-child" }],
    };
  }

  // A model call has no source to pin: its intent records the embedder's declaration that it
  // changes nothing outside (ModelCallOptions.inDoubt), and that declaration is what allows it.
  if (call.kind === "model" && call.disposition === "replay") {
    return {
      kind: "record",
      note: "replayed",
      events: [{ type: "call.replay-authorized", runId, callId, attempt, reason: "model-policy" }],
    };
  }

  if (call.disposition === "replay") {
    const tool = deps.tools.get(call.name);
    const listed = deps.allowlist[call.name];
    if (!listed)
      return hold("pin-mismatch", `tool "${call.name}" is not on the safe list; it may not be replayed`);
    if (call.pin !== listed) {
      return hold(
        "pin-mismatch",
        `the intent's pin ${short(call.pin)} differs from the safe list's ${short(listed)}`,
      );
    }
    if (!tool || tool.pin !== call.pin) {
      return hold(
        "pin-mismatch",
        tool
          ? `tool "${call.name}" changed since the intent (source ${short(tool.pin)}, intent ${short(call.pin)})`
          : `tool "${call.name}" is not registered in this runtime`,
      );
    }
    return {
      kind: "record",
      note: "replayed",
      events: [{ type: "call.replay-authorized", runId, callId, attempt, reason: "allowlisted" }],
    };
  }

  if (call.disposition === "reconcile") {
    const reconciler = deps.tools.get(call.name)?.reconciler;
    if (!reconciler || !asksReconciler(call, deps.tools)) {
      return hold(
        "reconcile-unknown",
        `no reconciler "${call.reconciler}" is registered for tool "${call.name}"`,
      );
    }
    const budget = Math.min(
      reconciler.timeoutMs ?? DEFAULT_RECONCILE_TIMEOUT_MS,
      deps.maxReconcileMs ?? Number.POSITIVE_INFINITY,
    );
    let answer: unknown;
    try {
      answer = await withTimeout(
        Promise.resolve().then(() =>
          reconciler.check(intent.probe ?? null, {
            runId,
            callId,
            attempt,
            idempotencyKey: intent.idempotencyKey,
            args: intent.args,
            keyedHash: () => keyedHash(deps.fingerprintKey),
          }),
        ),
        budget,
        `reconciler "${reconciler.name}"`,
      );
    } catch (error) {
      const { message } = errorInfo(deps.masker, error);
      return hold(
        "reconcile-unknown",
        `reconciler "${reconciler.name}" failed, so nothing is proven: ${message}`,
      );
    }
    const decoded = Schema.decodeUnknownEither(Verdict)(answer);
    if (Either.isLeft(decoded)) {
      return hold(
        "reconcile-unknown",
        `reconciler "${reconciler.name}" answered something that is not a verdict ({ outcome: "completed" | "not-completed" | "unknown", evidence, result? }), so nothing is proven`,
      );
    }
    const verdict = decoded.right;
    let evidence: unknown;
    let result: unknown;
    try {
      evidence = deps.masker.mask(storedCopy(verdict.evidence ?? null, "reconciler evidence"));
      if (verdict.outcome === "completed")
        result = deps.masker.mask(storedCopy(verdict.result, "reconciled result"));
    } catch (error) {
      const { message } = errorInfo(deps.masker, error);
      return hold(
        "reconcile-unknown",
        `reconciler "${reconciler.name}" answered with values that cannot be stored: ${message}`,
      );
    }
    if (verdict.outcome === "completed") {
      return {
        kind: "record",
        note: "reconciled",
        events: [
          {
            type: "call.reconciled",
            runId,
            callId,
            attempt,
            outcome: "completed",
            evidence,
            result,
            resultDigest: storedDigest(result),
          },
        ],
      };
    }
    if (verdict.outcome === "not-completed") {
      return {
        kind: "record",
        note: "reconciled",
        events: [{ type: "call.reconciled", runId, callId, attempt, outcome: "not-completed", evidence }],
      };
    }
    return hold(
      "reconcile-unknown",
      `reconciler "${reconciler.name}" cannot tell whether it happened: ${JSON.stringify(evidence)}`,
    );
  }

  return hold(
    "in-doubt",
    `${call.kind} "${call.name}" attempt ${call.attempt} has an intent but no outcome (disposition hold); nothing proves whether it took effect`,
  );
};

const short = (pin: string | null): string => (pin ? pin.slice(0, 12) : "(none)");

/** The latest intent of each call, from a run's events. */
export const latestIntents = (
  events: ReadonlyArray<RecordedEvent>,
): Map<string, EventOf<"call.intended">> => {
  const intents = new Map<string, EventOf<"call.intended">>();
  for (const { event } of events) if (event.type === "call.intended") intents.set(event.callId, event);
  return intents;
};

/**
 * Whether an event shows the run got further, or that a person took it on: the crash-loop count
 * starts again. An outcome counts, whoever recorded it (a reconciler's `completed` moves the run
 * past that call as surely as the tool's own). A verdict that the attempt did not happen
 * (`call.reconciled` not-completed, a replay authorization) does not: recovery records one on every
 * pass of a run whose call kills its process, and the run is no further for it.
 */
export const isProgress = (event: AnyEvent): boolean => {
  switch (event.type) {
    case "call.completed":
    case "call.failed":
    case "decision.recorded":
    case "retry.granted":
      return true;
    case "call.reconciled":
      return event.outcome === "completed";
    default:
      return false;
  }
};

/**
 * The run's interruptions since its last outcome or decision (DESIGN §13, crash-loop cap), read
 * from its events alone, so every process and engine counts the same. An interruption recorded
 * with `cause: "journal-unavailable"` is not counted: the worker that recorded it had stopped the
 * execution itself for a journal outage and was still alive to re-open the run (decision 0086).
 */
export const interruptionsSinceProgress = (events: ReadonlyArray<RecordedEvent>): Interruption[] => {
  let found: Interruption[] = [];
  for (const { event, recordedAt } of events) {
    if (isProgress(event)) found = [];
    else if (event.type === "run.interrupted" && event.cause === undefined)
      found.push({ at: recordedAt, by: event.detectedBy });
  }
  return found;
};

/**
 * The `crash-loop` hold reason of a run interrupted `interruptions.length` times with nothing
 * recorded in between: each re-execution died at the same place (or before anything new was done),
 * so running it again would most likely take down the process that does.
 */
export const crashLoopReason = (interruptions: ReadonlyArray<Interruption>): HoldReason => ({
  code: "crash-loop",
  detail: `the run was interrupted ${interruptions.length} times since its last outcome or decision (${interruptions.map((i) => `${i.at} by ${i.by}`).join(", ")}); each re-execution ended with its process, so it is not re-executed again. Look at what the process logged at those times, then decide: resume runs the agent again from the top (the count starts again), stop ends the run`,
  interruptions: [...interruptions],
});

/**
 * The hold reason of an in-doubt call recovery would have authorized to run again, in a run held
 * `crash-loop`: running it again is what the cap stops, so a person decides it.
 */
export const replayWithheldReason = (call: CallState): HoldReason => ({
  code: "in-doubt",
  callId: call.callId,
  detail: `${call.kind} "${call.name}" attempt ${call.attempt} has an intent but no outcome; its disposition would let it run again, but the run is held crash-loop, so it is not authorized. Once what ended the processes is fixed, decide new-attempt to run it again`,
});

/**
 * Law 11: read a run's stored rows for recovery and say why it cannot be trusted, if it cannot:
 * a broken chain (checked over the stored bytes), an event that does not decode, a transition the
 * machine refuses, or a checkpoint whose digest does not match. A key that cannot open an event is
 * not corruption: the `EventDecryptError` is thrown.
 */
export const inspectRun = (
  rows: ReadonlyArray<StoredRow>,
  ring: Keyring | null,
):
  | { readonly fold: RunFold; readonly events: ReadonlyArray<RecordedEvent> }
  | { readonly corrupt: string } => {
  const broken = verifyStreamChain(rows);
  if (broken) return { corrupt: `${broken.streamId}@${broken.version}: ${broken.reason}` };
  let events: RecordedEvent[];
  try {
    events = rows.map((row) => decodeRow(row, ring));
  } catch (error) {
    if (error instanceof EventDecryptError) throw error;
    return { corrupt: error instanceof Error ? error.message : String(error) };
  }
  let fold: RunFold;
  try {
    fold = foldRun(events.map((e) => e.event));
  } catch (error) {
    return { corrupt: error instanceof Error ? error.message : String(error) };
  }
  for (const e of events) {
    if (e.event.type === "checkpoint.saved" && digestOf(e.event.state) !== e.event.digest) {
      return { corrupt: `${e.streamId}@${e.version}: the checkpoint does not match its digest` };
    }
  }
  return { fold, events };
};
