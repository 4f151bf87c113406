import * as Either from "effect/Either";
import * as ParseResult from "effect/ParseResult";
import * as Schema from "effect/Schema";
import {
  type AnyEvent,
  type CallDecision,
  DecisionKind,
  type EventOf,
  type HoldReason,
  type Masker,
  RunId,
  runStreamId,
} from "../events/index.js";
import {
  blockingCalls,
  type CallState,
  type CallTable,
  contextOf,
  ENDING_STATUSES,
  foldRun,
  RUN_MACHINE_V1,
  type RunFold,
  statusOf,
  step,
} from "../machines/index.js";
import { CHILD_CHAT_PREFIX } from "./admit.js";
import type { EngineCore } from "./core.js";
import type { AnyToolDef } from "./define.js";
import { RunWriter } from "./dispatch.js";
import {
  CallNotFound,
  CallNotInDoubt,
  DecisionNeedsCalls,
  InvalidInput,
  NoteRequired,
  RetryLimitExceeded,
  RetryNotAllowed,
  RunNotFound,
  RunNotHeld,
  StaleDecision,
  TransitionRejected,
  WrongExpectedVersion,
} from "./errors.js";
import { execute, type RunResult } from "./execute.js";
import { handled } from "./handled.js";
import { decodeInput } from "./input.js";
import { storedCopy } from "./json.js";
import { decodeModelAnswer, MODEL_ANSWER_HINT } from "./modelAnswer.js";
import { inspectRun } from "./recover.js";

export const DECISIONS: ReadonlyArray<DecisionKind> = DecisionKind.literals;

/** One call's decision. */
export interface CallDecisionRequest {
  readonly decision: DecisionKind;
  /** Why; required for the two confirmations (the request's `note` is used when this one is absent). */
  readonly note?: string;
  /**
   * With `confirmed-completed`: the result the call produced, if the person knows it. For a model
   * call it is required and is the answer, `{ text, toolCalls? }` (`ModelAnswer`).
   */
  readonly result?: unknown;
}

/**
 * A person's decisions on a held run, made on the stream version they looked at (law 9).
 * Per call: `calls: { [callId]: { decision, note?, result? } }`, applied together. The run-level
 * shorthand `decision` (with `note`, `result`) applies to the one call in doubt — or, when no call
 * is in doubt, to the run (`resume` or `stop`); with several calls in doubt only `stop` is
 * unambiguous, anything else is refused with the list of calls.
 */
export interface DecisionRequest {
  /** The stream version the person looked at (`holdfast show` prints it). */
  readonly basedOnVersion: number;
  readonly decidedBy: string;
  readonly calls?: Readonly<Record<string, CallDecisionRequest>>;
  readonly decision?: DecisionKind;
  readonly note?: string;
  readonly result?: unknown;
}

/** A retry grant: how many more attempts a definitely failed call may have, and who grants them. */
export interface RetryGrantRequest {
  readonly attempts: number;
  readonly grantedBy: string;
  readonly note?: string;
  /**
   * The stream version the person looked at (a bulk grant, decision 0081): a run that moved on
   * since is refused with `StaleDecision`, nothing written. Absent: the version read now.
   */
  readonly basedOnVersion?: number;
}

/** A recorded decision or grant, and how the run goes on from there. */
export interface DecisionOutcome {
  readonly runId: string;
  /** The run's stream version after the decision. */
  readonly version: number;
  /** Results a person supplied that could not be checked: the runtime has no Schema for that tool. */
  readonly unchecked: ReadonlyArray<string>;
  readonly result: Promise<RunResult>;
}

const Person = Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "say who decides (--by NAME)"));

const CallDecisionRequestSchema = Schema.Struct({
  decision: DecisionKind,
  note: Schema.optional(Schema.String),
  result: Schema.optional(Schema.Unknown),
});

const DecisionRequestSchema = Schema.Struct({
  basedOnVersion: Schema.Int.pipe(Schema.nonNegative()),
  decidedBy: Person,
  calls: Schema.optional(Schema.Record({ key: Schema.String, value: CallDecisionRequestSchema })),
  decision: Schema.optional(DecisionKind),
  note: Schema.optional(Schema.String),
  result: Schema.optional(Schema.Unknown),
});

const RetryGrantRequestSchema = Schema.Struct({
  attempts: Schema.Int.pipe(Schema.positive({ message: () => "it must be a whole number of at least 1" })),
  grantedBy: Schema.String.pipe(Schema.filter((s) => s.trim() !== "" || "say who grants (--by NAME)")),
  note: Schema.optional(Schema.String),
  basedOnVersion: Schema.optional(Schema.Int.pipe(Schema.nonNegative())),
});

const CONFIRMATIONS: ReadonlySet<DecisionKind> = new Set(["confirmed-completed", "confirmed-not-completed"]);

/**
 * Read, verify and fold a run for a decision; refuses (writing nothing) when the run is not held.
 * The chain is verified first (law 11): a run whose history cannot be trusted takes only `stop`.
 */
export const loadHeldRun = async (
  core: Pick<EngineCore, "journal">,
  runId: string,
): Promise<{ readonly fold: RunFold; readonly corrupt: string | null }> => {
  const rows = await core.journal.readStreamRows(runStreamId(runId));
  if (rows.length === 0) throw new RunNotFound({ runId });
  const inspected = inspectRun(rows, core.journal.keyring);
  let fold: RunFold;
  let corrupt: string | null = null;
  if ("corrupt" in inspected) {
    corrupt = inspected.corrupt;
    try {
      fold = foldRun((await core.journal.readStream(runStreamId(runId))).map((e) => e.event));
    } catch {
      throw new RunNotHeld({
        runId,
        status: `needs attention and cannot be folded (${inspected.corrupt}); restore the journal from a backup`,
      });
    }
  } else fold = inspected.fold;
  const status = statusOf(fold);
  if (status !== "held") throw new RunNotHeld({ runId, status });
  corrupt ??= contextOf(fold).heldReasons.find((r) => r.code === "corrupt")?.detail ?? null;
  return { fold, corrupt };
};

/**
 * Validate a decision and build the events it records: `decision.recorded`, then (from run@2) what
 * becomes of the run — `run.resumed` when nothing is left in doubt, `run.stopped` on a stop, or
 * `run.held` with the calls still undecided. Every refusal happens here, before anything is written.
 */
export const decisionEvents = (
  runId: string,
  fold: RunFold,
  raw: DecisionRequest,
  deps: {
    readonly tools: ReadonlyMap<string, AnyToolDef>;
    readonly masker: Masker;
    readonly corrupt?: string | null;
    /** Child calls in doubt whose child run the journal shows admitted: call id → child run id. */
    readonly startedChildren?: ReadonlyMap<string, string>;
  },
): { readonly events: ReadonlyArray<AnyEvent>; readonly unchecked: ReadonlyArray<string> } => {
  const request = decodeInput(DecisionRequestSchema, raw, "decision");
  const context = contextOf(fold);
  if (request.basedOnVersion !== context.version) {
    throw new StaleDecision({ runId, basedOn: request.basedOnVersion, current: context.version });
  }
  const inDoubt = blockingCalls(context);
  const runNote = deps.masker.maskString((request.note ?? "").trim());
  const wanted = wantedDecisions(runId, context.calls, inDoubt, request);
  if (
    deps.corrupt &&
    (wanted.some((w) => w.decision !== "stop") || (wanted.length === 0 && request.decision !== "stop"))
  ) {
    throw new InvalidInput({
      what: "decision",
      detail: `run ${runId} needs attention (${deps.corrupt}); its history cannot be trusted, so only \`stop\` is accepted`,
    });
  }
  const unchecked: string[] = [];
  const calls: CallDecision[] = wanted.map(({ call, decision, note, result }) => {
    const why = deps.masker.maskString((note ?? "").trim()) || runNote;
    if (CONFIRMATIONS.has(decision) && why === "") throw new NoteRequired({ runId, decision });
    const child = deps.startedChildren?.get(call.callId);
    if (child !== undefined && decision === "confirmed-not-completed") {
      // The journal proves the child started: "it did not happen" would start a second child.
      throw new InvalidInput({
        what: `decision for call ${call.callId} (child agent ${call.name})`,
        detail: `its child run ${child} was admitted, so the call did start (deciding it did not would start a second child); see the child run (holdfast show ${child}) and decide confirmed-completed with its output, new-attempt to run a fresh child on purpose, resume (the agent sees OutcomeUnknown) or stop`,
      });
    }
    if (call.kind === "model" && decision === "confirmed-completed") {
      // A model call's only outcome is its answer: without one, the agent would go on from nothing.
      if (result === undefined) {
        throw new InvalidInput({
          what: `result for model call ${call.callId} (${call.name})`,
          detail: `"It happened" needs ${MODEL_ANSWER_HINT}; or decide new-attempt, which asks the model again (a model call has no effect besides its answer)`,
        });
      }
      const stored = storedCopy(result, `result for model call ${call.callId}`);
      const answer = decodeModelAnswer(stored, call.callId, call.name);
      return { callId: call.callId, decision, note: why, result: deps.masker.mask(answer) };
    }
    if (result === undefined) return { callId: call.callId, decision, note: why };
    if (decision !== "confirmed-completed") {
      throw new InvalidInput({
        what: `result for call ${call.callId}`,
        detail: "a result goes only with confirmed-completed",
      });
    }
    const stored = storedCopy(result, `result for call ${call.callId}`);
    const schema = deps.tools.get(call.name)?.result;
    if (!schema) unchecked.push(call.callId);
    else {
      const decoded = Schema.decodeUnknownEither(schema)(stored);
      if (Either.isLeft(decoded)) {
        throw new InvalidInput({
          what: `result for call ${call.callId} (${call.name})`,
          detail: ParseResult.TreeFormatter.formatErrorSync(decoded.left),
        });
      }
    }
    return { callId: call.callId, decision, note: why, result: deps.masker.mask(stored) };
  });
  const stop =
    calls.some((c) => c.decision === "stop") || (calls.length === 0 && request.decision === "stop");
  if (context.machine === RUN_MACHINE_V1) {
    const undecided = inDoubt.filter((c) => !calls.some((d) => d.callId === c.callId));
    if (undecided.length > 0 && !stop) {
      throw new InvalidInput({
        what: "decision",
        detail: `run ${runId} was started under machine ${RUN_MACHINE_V1}, which applies one decision to every call in doubt: decide ${undecided.map((c) => c.callId).join(", ")} too`,
      });
    }
  }
  const decided: EventOf<"decision.recorded"> = {
    type: "decision.recorded",
    runId,
    basedOnVersion: request.basedOnVersion,
    decidedBy: deps.masker.maskString(request.decidedBy.trim()),
    calls,
    run: stop ? "stop" : "continue",
    note: runNote,
  };
  if (context.machine === RUN_MACHINE_V1) return { events: [decided], unchecked };
  const after = contextOf(step(fold, decided));
  const next: AnyEvent = stop
    ? {
        type: "run.stopped",
        runId,
        reason: `stopped by a person's decision at version ${request.basedOnVersion}`,
      }
    : blockingCalls(after).length === 0
      ? { type: "run.resumed", runId, by: decided.decidedBy }
      : { type: "run.held", runId, reasons: stillHeld(after.heldReasons, blockingCalls(after)) };
  return { events: [decided, next], unchecked };
};

/** The decisions asked for, each on an in-doubt call; the shorthand resolved to calls. */
const wantedDecisions = (
  runId: string,
  calls: CallTable<CallState>,
  inDoubt: ReadonlyArray<CallState>,
  request: typeof DecisionRequestSchema.Type,
): Array<{ call: CallState; decision: DecisionKind; note?: string | undefined; result?: unknown }> => {
  const inDoubtIds = inDoubt.map((c) => c.callId);
  if (request.calls !== undefined) {
    if (request.decision !== undefined || request.result !== undefined) {
      throw new InvalidInput({
        what: "decision",
        detail: "give either `calls` (a decision per call) or the run-level `decision`, not both",
      });
    }
    const entries = Object.entries(request.calls);
    if (entries.length === 0) throw new InvalidInput({ what: "decision", detail: "`calls` names no call" });
    return entries.map(([callId, d]) => {
      const call = calls.get(callId);
      if (!call) throw new CallNotFound({ runId, callId });
      if (call.status !== "in-doubt") {
        throw new CallNotInDoubt({ runId, callId, status: call.status, inDoubt: inDoubtIds });
      }
      return { call, decision: d.decision, note: d.note, result: d.result };
    });
  }
  const decision = request.decision;
  if (decision === undefined) {
    throw new InvalidInput({
      what: "decision",
      detail:
        "name a decision (resume, stop, new-attempt, confirmed-completed, confirmed-not-completed) or give `calls`",
    });
  }
  if (inDoubt.length === 0) {
    if (decision !== "resume" && decision !== "stop") {
      throw new InvalidInput({
        what: "decision",
        detail: `no call of run ${runId} is in doubt, so ${decision} names nothing; decide resume (run the agent again) or stop`,
      });
    }
    if (request.result !== undefined)
      throw new InvalidInput({ what: "result", detail: "no call is in doubt to take it" });
    return [];
  }
  if (inDoubt.length > 1 && decision !== "stop") {
    throw new DecisionNeedsCalls({ runId, decision, callIds: inDoubtIds });
  }
  if (inDoubt.length > 1 && request.result !== undefined)
    throw new InvalidInput({
      what: "result",
      detail: "several calls are in doubt; give each its result in `calls`",
    });
  return inDoubt.map((call) => ({ call, decision, note: request.note, result: request.result }));
};

/** The hold reasons left once some calls were decided (one per call still in doubt). */
const stillHeld = (
  reasons: ReadonlyArray<HoldReason>,
  inDoubt: ReadonlyArray<CallState>,
): [HoldReason, ...HoldReason[]] => {
  const kept = inDoubt.map(
    (call): HoldReason =>
      reasons.find((r) => r.callId === call.callId) ?? {
        code: "in-doubt",
        callId: call.callId,
        detail: `${call.kind} "${call.name}" attempt ${call.attempt} has an intent but no outcome; it still needs a decision`,
      },
  );
  return [kept[0]!, ...kept.slice(1)];
};

/** Validate a retry grant and build its events; refusals write nothing. */
export const retryEvents = (
  runId: string,
  fold: RunFold,
  callId: string,
  raw: RetryGrantRequest,
  maxAttempts: number,
  masker: Masker,
): ReadonlyArray<AnyEvent> => {
  const request = decodeInput(RetryGrantRequestSchema, raw, "retry grant");
  if (request.attempts > maxAttempts) {
    throw new RetryLimitExceeded({ runId, callId, attempts: request.attempts, max: maxAttempts });
  }
  const calls = contextOf(fold).calls;
  const call = calls.get(callId);
  if (!call) throw new CallNotFound({ runId, callId });
  if (call.copied) {
    throw new RetryNotAllowed({
      runId,
      callId,
      status: "failed",
      reason: `its outcome was copied when the run was forked (reused from the source run or given by a person), so it belongs to the source; no call before the fork point runs in a fork. Fork the source again at or before this call's seq to run it live`,
    });
  }
  if (call.status !== "failed") {
    throw new RetryNotAllowed({
      runId,
      callId,
      status: call.status === "in-doubt" ? "in doubt" : call.status,
    });
  }
  const grantedBy = masker.maskString(request.grantedBy.trim());
  return [
    {
      type: "retry.granted",
      runId,
      callId,
      attempts: request.attempts,
      grantedBy,
      note: masker.maskString((request.note ?? "").trim()),
    },
    { type: "run.resumed", runId, by: grantedBy },
  ];
};

/**
 * Record a person's decision on a held run (law 9) and, when the run continues and this runtime
 * has its agent, continue it here. Refusals (not held, stale version, missing note, bad result)
 * write nothing. Of two decisions made on the same version exactly one is recorded: the append
 * expects that version.
 */
export const decide = async (
  core: EngineCore,
  runId: string,
  request: DecisionRequest,
): Promise<DecisionOutcome> => {
  decodeInput(RunId, runId, "runId");
  decodeInput(DecisionRequestSchema, request, "decision");
  if (core.isLive(runId)) throw new RunNotHeld({ runId, status: "running" });
  const { fold, corrupt } = await loadHeldRun(core, runId);
  const { events, unchecked } = decisionEvents(runId, fold, request, {
    tools: core.tools,
    masker: core.masker,
    corrupt,
    startedChildren: await startedChildren(core, runId, fold),
  });
  return continueAfter(core, runId, fold, events, request.basedOnVersion, unchecked, true);
};

/**
 * The child calls in doubt whose child run exists: a child is admitted with the input id its
 * latest intent names (the call id unless re-run on purpose) in chat `child:<input id>`.
 */
const startedChildren = async (
  core: Pick<EngineCore, "journal">,
  runId: string,
  fold: RunFold,
): Promise<ReadonlyMap<string, string>> => {
  const children = blockingCalls(contextOf(fold)).filter((c) => c.kind === "child");
  const started = new Map<string, string>();
  if (children.length === 0) return started;
  const keys = new Map<string, string>();
  for (const { event } of await core.journal.readStream(runStreamId(runId))) {
    if (event.type !== "call.intended" || event.kind !== "child") continue;
    const key = (event.probe as { childInputId?: unknown } | undefined)?.childInputId;
    keys.set(event.callId, typeof key === "string" ? key : event.callId);
  }
  for (const call of children) {
    const key = keys.get(call.callId) ?? call.callId;
    const admitted = await core.journal.admission(`${CHILD_CHAT_PREFIX}${key}`, key);
    if (admitted) started.set(call.callId, admitted.runId);
  }
  return started;
};

/** Grant bounded retries to a definitely failed call of a held run, and continue it. */
export const grantRetry = async (
  core: EngineCore,
  runId: string,
  callId: string,
  request: RetryGrantRequest,
): Promise<DecisionOutcome> => {
  decodeInput(RunId, runId, "runId");
  decodeInput(RetryGrantRequestSchema, request, "retry grant");
  if (core.isLive(runId)) throw new RunNotHeld({ runId, status: "running" });
  const { fold } = await loadHeldRun(core, runId);
  const current = contextOf(fold).version;
  // The append expects the version read here: checked against the one looked at, it is that one.
  if (request.basedOnVersion !== undefined && request.basedOnVersion !== current)
    throw new StaleDecision({ runId, basedOn: request.basedOnVersion, current });
  const events = retryEvents(runId, fold, callId, request, core.maxRetryAttempts, core.masker);
  return continueAfter(
    core,
    runId,
    fold,
    events,
    request.basedOnVersion ?? current,
    [],
    request.basedOnVersion !== undefined,
  );
};

const continueAfter = async (
  core: EngineCore,
  runId: string,
  fold: RunFold,
  events: ReadonlyArray<AnyEvent>,
  basedOn: number,
  unchecked: ReadonlyArray<string>,
  strict: boolean,
): Promise<DecisionOutcome> => {
  // A person's decision is not a worker's write: no fence, the expected version decides (law 9).
  // Strict when the caller named the version it looked at: a stream that moved on (a signal, a
  // cancel request) refuses the write instead of having it recorded on a version nobody saw.
  const writer = new RunWriter(core.journal, runId, fold, contextOf(fold).machine);
  writer.strict = strict;
  try {
    await writer.append(events);
  } catch (error) {
    if (error instanceof WrongExpectedVersion)
      throw new StaleDecision({ runId, basedOn, current: error.actual });
    // The writer folded in what another process appended and the machine refused the events on
    // top of it: the same lost race, not a bad request.
    if (error instanceof TransitionRejected && contextOf(writer.fold).version !== contextOf(fold).version)
      throw new StaleDecision({ runId, basedOn, current: contextOf(writer.fold).version });
    throw error;
  }
  const version = contextOf(writer.fold).version;
  // A stop ends the run: its chat's next queued input is admitted (decision 0045).
  if (ENDING_STATUSES.has(statusOf(writer.fold))) await core.runEnded(contextOf(writer.fold).chatId);
  return { runId, version, unchecked, ...(await continueHere(core, runId, writer)) };
};

/**
 * A run the journal now says is running, with no execution (after a decision, a retry grant, a
 * resume): executed here when this runtime has its agent's version and gets the claim; otherwise whoever owns
 * it, or the next recovery with the agent registered, continues it. Its result, either way.
 */
export const continueHere = async (
  core: EngineCore,
  runId: string,
  writer: RunWriter,
): Promise<{ readonly result: Promise<RunResult> }> => {
  const waiting = () => ({ result: handled(core.wait(runId)) });
  if (statusOf(writer.fold) !== "running") return waiting();
  const context = contextOf(writer.fold);
  // Only a runtime that can execute the run claims it (an operator's runtime never does), with the
  // version that admitted it (decision 0062).
  const agent = core.agents.get(context.agent.name, context.agent.version);
  const claim = agent ? await core.ownership.claim(runId) : null;
  if (!agent || !claim) return waiting();
  writer.setFence(core.ownership.fence(runId));
  // Read again under the claim: a worker may have gone through the run between the append and the claim.
  const history = await core.journal.readStream(runStreamId(runId));
  await writer.refresh();
  if (statusOf(writer.fold) !== "running") {
    await core.ownership.release(runId);
    return waiting();
  }
  const admitted = history[0]?.event;
  const input = admitted?.type === "run.admitted" ? admitted.input : null;
  const result = core.start(runId, () =>
    execute(core.executeDeps, {
      agent,
      writer,
      chatId: context.chatId,
      inputId: context.inputId,
      input,
      history,
    }),
  );
  return { result };
};
