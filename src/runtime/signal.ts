import * as Schema from "effect/Schema";
import { type AnyEvent, keyedDigestOf, RunId, runStreamId } from "../events/index.js";
import { contextOf, ENDING_STATUSES, foldRun, type RunFold, statusOf } from "../machines/index.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import { RunWriter } from "./dispatch.js";
import { RunNotFound, TransitionRejected, WrongExpectedVersion } from "./errors.js";
import { prunedResult } from "./execute.js";
import { decodeInput, refuseSecretIds } from "./input.js";
import { storedCopy } from "./json.js";

/** How a signal is sent: its idempotency id, and who sends it (masked like every payload). */
export interface SignalRequest {
  /** The same id again is the same signal: accepted, nothing new written (another payload: refused). */
  readonly signalId: string;
  /** Who sends it (a person, a service); `"api"` when not said. */
  readonly by?: string;
}

/**
 * What became of a signal (decision 0054). `accepted: true`: recorded now (`recorded: true`), or
 * the same signal was recorded before (`recorded: false`, nothing written); `wakes`: the run was
 * waiting for it and is woken. `accepted: false` wrote nothing; `reason` says why and `message`
 * what to do.
 */
export type SignalOutcome =
  | {
      readonly accepted: true;
      readonly runId: string;
      readonly signalId: string;
      readonly name: string;
      readonly recorded: boolean;
      readonly wakes: boolean;
      readonly message: string;
    }
  | {
      readonly accepted: false;
      readonly runId: string;
      readonly signalId: string;
      readonly name: string;
      /** `run-ended`: the run is completed, failed, stopped or cancelled (or pruned); `signal-id-conflict`: the id was used with another name or payload. */
      readonly reason: "run-ended" | "signal-id-conflict";
      readonly message: string;
    };

const NonEmpty = (what: string) =>
  Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || `${what} must not be empty`));
const SignalRequestSchema = Schema.Struct({
  signalId: NonEmpty("signalId"),
  by: Schema.optional(Schema.String),
});

const load = async (core: EngineCore, runId: string): Promise<RunFold | null> => {
  const events = await core.journal.readStream(runStreamId(runId));
  if (events.length > 0) return foldRun(events.map((e) => e.event));
  if (await prunedResult(core.journal, runId)) return null;
  throw new RunNotFound({ runId });
};

/**
 * `runtime.signal` (decision 0054): record `signal.received` in the run's stream on the version
 * read (no claim: a live owner folds it in), idempotent by `signalId`, refused for a run that
 * ended. When the run waits for this name, the event names the wait and the due index marks the
 * run due in the same commit, so any worker wakes it once — even if this process dies right after.
 */
export const sendSignal = async (
  core: EngineCore,
  runId: string,
  name: string,
  payload: unknown,
  raw: SignalRequest,
): Promise<SignalOutcome> => {
  decodeInput(RunId, runId, "runId");
  decodeInput(NonEmpty("name"), name, "signal name");
  const request = decodeInput(SignalRequestSchema, raw, "signal request");
  const { signalId } = request;
  refuseSecretIds(core.masker, "signal", { signalId, name });
  const by = core.masker.maskString((request.by ?? "").trim() || "api");
  const stored = storedCopy(payload ?? null, `payload of signal "${name}"`);
  // Keyed over the payload before masking: a changed secret is another payload; the secret is not stored.
  const payloadDigest = keyedDigestOf(core.journal.fingerprintKey, { signal: name, payload: stored });
  const refused = (reason: "run-ended" | "signal-id-conflict", message: string): SignalOutcome => ({
    accepted: false,
    runId,
    signalId,
    name,
    reason,
    message,
  });
  let fold = await load(core, runId);
  for (let attempt = 0; ; attempt++) {
    if (!fold)
      return refused(
        "run-ended",
        `run ${runId} ended and was removed by retention; signal ${signalId} ("${name}") was not recorded`,
      );
    const context = contextOf(fold);
    const status = statusOf(fold);
    const known = context.signals?.find((s) => s.signalId === signalId);
    if (known) {
      if (known.name === name && known.payloadDigest === payloadDigest)
        return {
          accepted: true,
          runId,
          signalId,
          name,
          recorded: false,
          wakes: false,
          message: `signal ${signalId} ("${name}") was recorded in run ${runId} before; nothing new was written`,
        };
      return refused(
        "signal-id-conflict",
        `signal ${signalId} was recorded in run ${runId} with ${known.name === name ? "another payload" : `another name ("${known.name}")`}; send a new signal under a new --signal-id`,
      );
    }
    if (ENDING_STATUSES.has(status))
      return refused(
        "run-ended",
        `run ${runId} already ended (${status}); signal ${signalId} ("${name}") was not recorded, no wait can take it`,
      );
    const waiting = context.waiting;
    const wakes =
      waiting?.wait === "signal" && waiting.name === name && waiting.signalId === undefined
        ? waiting.callId
        : undefined;
    const event: AnyEvent = {
      type: "signal.received",
      runId,
      signalId,
      name,
      payload: core.masker.mask(stored),
      payloadDigest,
      by,
      ...(wakes === undefined ? {} : { wakes }),
    };
    const writer = new RunWriter(core.journal, runId, fold, context.machine);
    try {
      await writer.append([event]);
    } catch (error) {
      // The run moved meanwhile (its owner appended, the same signal came twice at once): read again.
      if (!(error instanceof WrongExpectedVersion || error instanceof TransitionRejected) || attempt >= 20)
        throw error;
      fold = await load(core, runId);
      continue;
    }
    crashPoint("after-signal");
    return {
      accepted: true,
      runId,
      signalId,
      name,
      recorded: true,
      wakes: wakes !== undefined,
      message:
        wakes !== undefined
          ? `signal ${signalId} ("${name}") recorded; run ${runId} was waiting for it and is woken`
          : `signal ${signalId} ("${name}") recorded in run ${runId}; it is buffered until a wait for "${name}" takes it`,
    };
  }
};
