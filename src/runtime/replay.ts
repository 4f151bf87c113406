import { isDeepStrictEqual } from "node:util";
import * as Data from "effect/Data";
import {
  type AnyEvent,
  type CallKind,
  type EventOf,
  type HoldReason,
  type Masker,
  type RecordedEvent,
  runStreamId,
} from "../events/index.js";
import { contextOf, foldRun, type RunFold, type RunStatus, statusOf, step } from "../machines/index.js";
import type { AgentRegistry } from "./agents.js";
import { agentRef } from "./agents.js";
import { NOT_STARTED_CONTROL_EVIDENCE } from "./attempt.js";
import type { AnyToolDef } from "./define.js";
import { type EventsFor, RunWriter, type WriteSlot } from "./dispatch.js";
import type { AppendRequest, AppendResult, Journal, JournalReader } from "./Journal.js";
import { TurnImpl } from "./turn.js";

/** One side of a divergence: a call as the journal recorded it, or as the current code makes it. */
export interface ReplayCall {
  readonly kind: CallKind;
  readonly name: string;
  readonly fingerprint: string;
  /** The arguments, masked (law 8): as the intent stored them, or as the current code passes them. */
  readonly args: unknown;
}

/** Where a replay first went another way than the journal. */
export interface ReplayDivergence {
  /** The call's place in the run (0 is the first call). */
  readonly seq: number;
  readonly callId: string;
  /** The recorded call; null when the run recorded no call there. */
  readonly recorded: ReplayCall | null;
  /** The call the current code makes there; null when it makes none (it ended first). */
  readonly now: ReplayCall | null;
  /** What differs, in a sentence. */
  readonly detail: string;
}

/** How one run replayed against the current code. */
export type RunReplay =
  /** Every recorded call was made again, the same, and the agent ended as the run did. */
  | { readonly runId: string; readonly agent: string; readonly result: "same"; readonly calls: number }
  /**
   * The same up to the recorded frontier, where the code reached a call the journal has no outcome
   * for (`seq`: a new call of a run that has not ended, a call in doubt, a wait, a scheduled retry):
   * the run would continue live from there. Not a failure.
   */
  | {
      readonly runId: string;
      readonly agent: string;
      readonly result: "continues-live";
      readonly calls: number;
      readonly seq: number;
      readonly detail: string;
    }
  /**
   * The first call (by seq) where the current code goes another way — including a call made after
   * a run that ended (completed, failed, cancelled) made its last recorded one.
   */
  | {
      readonly runId: string;
      readonly agent: string;
      readonly result: "divergence";
      readonly calls: number;
      readonly divergence: ReplayDivergence;
    }
  /** The run could not be replayed (agent version not given, no such run, a hang); `detail` says why. */
  | { readonly runId: string; readonly agent: string; readonly result: "error"; readonly detail: string };

/** What a replay needs besides the journal. */
export interface ReplayContext {
  readonly agents: AgentRegistry;
  readonly tools: ReadonlyMap<string, AnyToolDef>;
  readonly masker: Masker;
  /** How long one run's agent may take before the replay gives up on it (default 30 s). */
  readonly timeoutMs?: number;
}

/** A write the replay refused: the agent reached past what the journal recorded. */
class ReplayStop extends Data.TaggedError("ReplayStop")<{ readonly runId: string; readonly detail: string }> {
  override get message(): string {
    return `replay of run ${this.runId} stops here: ${this.detail}`;
  }
}

/**
 * What a replay may ask of the journal: the reader's reads. Every other method — a write, or one
 * added to `Journal` later — is refused (an allow list, never a deny list).
 */
const READS = new Set<string>([
  "engine",
  "location",
  "keyring",
  "activeRun",
  "activeRuns",
  "admission",
  "alertCounts",
  "alerts",
  "countRuns",
  "currentClaim",
  "dueSchedules",
  "dueWaits",
  "headAnchor",
  "idleQueues",
  "liveness",
  "projection",
  "projectionPage",
  "projectionRows",
  "prunedRun",
  "queuePending",
  "readAll",
  "readAllRows",
  "readStream",
  "readStreamRows",
  "searchRuns",
  "streamHead",
  "streamHeads",
]);

/**
 * The journal as one replay sees it: reads go to the reader (opened read-only), appends stay in
 * memory and are never passed on, and every other method is refused. Exported for its tests only.
 *
 * @internal
 */
export const sandbox = (reader: JournalReader, fingerprintKey: Uint8Array): Journal => {
  let version = 0;
  const append = async (request: AppendRequest): Promise<AppendResult> => {
    const recorded = request.events.map(
      (event): RecordedEvent => ({ event, streamId: request.streamId, version: ++version }) as RecordedEvent,
    );
    return { streamId: request.streamId, nextVersion: version + 1, recorded };
  };
  return new Proxy(reader, {
    get(target, property, receiver) {
      if (property === "fingerprintKey") return fingerprintKey;
      if (property === "append") return append;
      if (property === "appendAll")
        return (requests: ReadonlyArray<AppendRequest>) => Promise.all(requests.map(append));
      // Not a thenable (awaiting the journal must not call into it).
      if (property === "then" || typeof property !== "string") return undefined;
      if (!READS.has(property))
        return () => Promise.reject(new Error(`a replay never writes to the journal (${property})`));
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as unknown as Journal;
};

/** What one replay saw being written: where it stopped, and why. */
interface Seen {
  readonly intents: Array<{ readonly seq: number; readonly callId: string; readonly name: string }>;
  readonly determinism: Array<EventOf<"conflict.recorded">>;
  readonly holds: HoldReason[];
  /** Calls the journal knows no more of for another reason (a retry it scheduled). */
  readonly stops: Array<{ readonly seq: number; readonly detail: string }>;
}

/**
 * A writer whose appends never leave the process: an intent (an effect about to start, law 1) stops
 * the replay at that call; a determinism conflict and a hold are kept for the report.
 */
class ReplayWriter extends RunWriter {
  private delivered = false;

  constructor(
    journal: Journal,
    runId: string,
    fold: RunFold,
    private readonly seen: Seen,
    /** The recorded cancel request, when the live run met it at an intent's commit (see {@link cancelPoint}). */
    private readonly cancelAtCommit?: {
      readonly event: EventOf<"run.cancel-requested">;
      readonly callIds: ReadonlySet<string>;
    },
  ) {
    super(journal, runId, fold, contextOf(fold).machine);
  }

  private inspect(events: ReadonlyArray<AnyEvent>): void {
    for (const [i, event] of events.entries()) {
      // An intent committed with its not-started outcome starts no effect (decision 0091): the
      // journal holds all there is to know of it, so the replay goes on.
      if (event.type === "call.intended" && notStartedForControl(event, events[i + 1])) continue;
      if (event.type === "call.intended") {
        this.seen.intents.push({ seq: event.seq, callId: event.callId, name: event.name });
        throw new ReplayStop({
          runId: this.runId,
          detail: `${event.kind} "${event.name}" (${event.callId}) has no recorded outcome`,
        });
      }
      if (event.type === "conflict.recorded" && event.kind === "determinism")
        this.seen.determinism.push(event);
      if (event.type === "run.held") this.seen.holds.push(...event.reasons);
    }
  }

  /**
   * Fold in a control request the run recorded (`run.cancel-requested`) as if it had just arrived,
   * and tell the turn: its signal aborts, as it did when the run was live.
   */
  deliver(event: EventOf<"run.cancel-requested">): void {
    if (this.delivered) return;
    this.delivered = true;
    this.current = step(this.current, event);
    this.onControl?.(this.current);
  }

  /**
   * The events of an append in a slot. The live run met the cancel request at the commit of this
   * call's intent: it is delivered there, so the events are built, as they were live, on a fold
   * that holds it (the intent then comes with its not-started outcome).
   */
  private slotEvents(events: EventsFor): ReadonlyArray<AnyEvent> {
    const built = this.eventsOf(events);
    const intent = built.find((e) => e.type === "call.intended");
    if (!this.delivered && intent && this.cancelAtCommit?.callIds.has(intent.callId)) {
      this.deliver(this.cancelAtCommit.event);
      return this.eventsOf(events);
    }
    return built;
  }

  private eventsOf(events: EventsFor): ReadonlyArray<AnyEvent> {
    return typeof events === "function" ? events(this.fold) : events;
  }

  override append(events: ReadonlyArray<AnyEvent>): Promise<ReadonlyArray<RecordedEvent>> {
    try {
      this.inspect(events);
    } catch (error) {
      return Promise.reject(error);
    }
    return super.append(events);
  }

  override appendAndRelease(events: ReadonlyArray<AnyEvent>): Promise<ReadonlyArray<RecordedEvent>> {
    return this.append(events);
  }

  override appendWith(
    events: ReadonlyArray<AnyEvent>,
    others: ReadonlyArray<AppendRequest>,
  ): Promise<ReadonlyArray<RecordedEvent>> {
    try {
      this.inspect(events);
    } catch (error) {
      return Promise.reject(error);
    }
    return super.appendWith(events, others);
  }

  override reserve(): WriteSlot {
    const slot = super.reserve();
    return {
      appendWith: (events, others) => {
        try {
          this.inspect(this.slotEvents(events));
        } catch (error) {
          return Promise.reject(error);
        }
        return slot.appendWith(events, others);
      },
      release: () => slot.release(),
    };
  }
}

/**
 * The run's fold as a re-execution would start from it: every recorded call known, the run
 * running (a finished, held or waiting run is re-executed as if it had just been resumed).
 */
const runningFold = (fold: RunFold): RunFold => {
  const { cancelRequested: _cancel, pauseRequested: _pause, waiting: _waiting, ...context } = contextOf(fold);
  const snapshot = fold.machine.resolveState({ value: "running", context: { ...context, heldReasons: [] } });
  return { snapshot, machine: fold.machine };
};

const latestIntent = (
  events: ReadonlyArray<RecordedEvent>,
  callId: string,
): EventOf<"call.intended"> | undefined => {
  let found: EventOf<"call.intended"> | undefined;
  for (const { event } of events)
    if (event.type === "call.intended" && event.callId === callId) found = event;
  return found;
};

/** Whether `next` closes `intent` as not started for a cancel or pause, in the intent's own commit. */
const notStartedForControl = (intent: EventOf<"call.intended">, next: AnyEvent | undefined): boolean =>
  next?.type === "call.reconciled" &&
  next.callId === intent.callId &&
  next.attempt === intent.attempt &&
  next.outcome === "not-completed" &&
  next.evidence === NOT_STARTED_CONTROL_EVIDENCE;

/**
 * Where a recorded cancel request sits: the seq of the last call intended before it (the call the
 * re-execution delivers it at), -1 when it came before any call. `atCommit`: the calls whose intent
 * the live run appended after the request, closed not started in the same commit (decision 0091) —
 * the owner had not learnt the request when it made them, so it is delivered at the first of their
 * commits instead, not before they are made.
 */
const cancelPoint = (
  events: ReadonlyArray<RecordedEvent>,
):
  | {
      readonly atSeq: number;
      readonly event: EventOf<"run.cancel-requested">;
      readonly atCommit: ReadonlySet<string>;
    }
  | undefined => {
  let atSeq = -1;
  let found: EventOf<"run.cancel-requested"> | undefined;
  const atCommit = new Set<string>();
  for (const [i, { event }] of events.entries()) {
    if (!found && event.type === "call.intended") atSeq = Math.max(atSeq, event.seq);
    if (!found && event.type === "run.cancel-requested") found = event;
    if (found && event.type === "call.intended" && notStartedForControl(event, events[i + 1]?.event))
      atCommit.add(event.callId);
  }
  return found ? { atSeq, event: found, atCommit } : undefined;
};

const describe = (call: { readonly kind: string; readonly name: string }): string =>
  `${call.kind} "${call.name}"`;

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * Re-execute one recorded run against the current agent code: every call is served from the
 * journal, no effect is started and nothing is written (the reader is never written through).
 */
export const replayRun = async (
  reader: JournalReader,
  runId: string,
  context: ReplayContext,
): Promise<RunReplay> => {
  const events = await reader.readStream(runStreamId(runId));
  const admitted = events[0]?.event;
  if (admitted?.type !== "run.admitted")
    return { runId, agent: "", result: "error", detail: `the journal has no run ${runId}` };
  const agentName = agentRef(admitted.agent);
  const agent = context.agents.get(admitted.agent.name, admitted.agent.version);
  if (!agent) {
    const versions = context.agents.versions(admitted.agent.name);
    return {
      runId,
      agent: agentName,
      result: "error",
      detail: `agent ${agentName} is not among the agents given (${versions.length ? `versions of "${admitted.agent.name}" given: ${versions.join(", ")}` : `no version of "${admitted.agent.name}"`}); pass the module that registers it, as the workers that resume this run do`,
    };
  }
  const key = reader.fingerprintKey;
  if (!key)
    return { runId, agent: agentName, result: "error", detail: "the journal gave no fingerprint key" };
  const recordedFold = foldRun(events.map((e) => e.event));
  const recordedStatus: RunStatus = statusOf(recordedFold);
  const recordedCalls = contextOf(recordedFold).nextSeq;
  const seen: Seen = { intents: [], determinism: [], holds: [], stops: [] };
  const attempted = new Map<number, { kind: CallKind; name: string; args: unknown }>();
  const journal = sandbox(reader, key);
  const cancel = cancelPoint(events);
  const atCommit =
    cancel && cancel.atCommit.size > 0 ? { event: cancel.event, callIds: cancel.atCommit } : undefined;
  const writer = new ReplayWriter(journal, runId, runningFold(recordedFold), seen, atCommit);
  const turn = new TurnImpl({
    writer,
    chatId: admitted.chatId,
    inputId: admitted.inputId,
    fingerprintKey: key,
    masker: context.masker,
    tools: context.tools,
    history: events,
    documents: { journal, masker: context.masker },
    replayAllowed: () => false,
    // Belt and braces: no effect may start even if an intent got past the writer.
    mayStartEffect: () => false,
    renewLease: async () => "lost",
    runChild: () => Promise.reject(new ReplayStop({ runId, detail: "a child run would start" })),
    observeCall: (seq, call) => {
      attempted.set(seq, call);
      if (cancel && !atCommit && seq === cancel.atSeq) writer.deliver(cancel.event);
    },
    replay: {
      stopAt: (seq, _callId, detail) => {
        seen.stops.push({ seq, detail });
        return new ReplayStop({ runId, detail });
      },
    },
  });
  // A cancelled run: the request is delivered where it sits in the stream — as the call that was in
  // flight then is made again — so the turn's signal aborts and the agent takes its clean-up path.
  if (cancel && !atCommit && cancel.atSeq < 0) writer.deliver(cancel.event);
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeoutMs = context.timeoutMs ?? 30_000;
  const timedOut = new Promise<"timeout">((resolve) => {
    timer = setTimeout(resolve, timeoutMs, "timeout");
  });
  let ended: { readonly output: unknown } | { readonly error: unknown } | "timeout" = "timeout";
  try {
    ended = await Promise.race([
      agent.run(turn, admitted.input).then(
        (output: unknown) => ({ output }),
        (error: unknown) => ({ error }),
      ),
      timedOut,
    ]);
    if (ended !== "timeout" && (await Promise.race([turn.settle(), timedOut])) === "timeout")
      ended = "timeout";
  } finally {
    clearTimeout(timer);
    // Whatever the agent still does is refused from here on: it no longer owns anything.
    if (ended === "timeout") turn.ownershipLost(`replay timed out after ${timeoutMs} ms`);
  }
  const calls = attempted.size;
  const now = (seq: number, fingerprint: string): ReplayCall | null => {
    const call = attempted.get(seq);
    return call ? { ...call, fingerprint, args: context.masker.mask(call.args) } : null;
  };
  const recordedCall = (callId: string): ReplayCall | null => {
    const intent = latestIntent(events, callId);
    return intent
      ? { kind: intent.kind, name: intent.name, fingerprint: intent.fingerprint, args: intent.args }
      : null;
  };
  const seqOf = (callId: string): number => contextOf(recordedFold).calls.get(callId)?.seq ?? -1;
  const conflict = seen.determinism
    .map((c) => ({ c, callId: c.callId ?? "", seq: seqOf(c.callId ?? "") }))
    .sort((a, b) => a.seq - b.seq)[0];
  if (conflict) {
    const attemptedNow = conflict.c.attempted as { fingerprint?: unknown };
    const recorded = recordedCall(conflict.callId);
    const current = now(
      conflict.seq,
      typeof attemptedNow.fingerprint === "string" ? attemptedNow.fingerprint : "",
    );
    return {
      runId,
      agent: agentName,
      result: "divergence",
      calls,
      divergence: {
        seq: conflict.seq,
        callId: conflict.callId,
        recorded,
        now: current,
        detail:
          recorded && current && recorded.kind === current.kind && recorded.name === current.name
            ? isDeepStrictEqual(recorded.args, current.args)
              ? `${describe(current)} differs only in a masked (secret) value — this environment's secret differs from the one recorded`
              : `${describe(current)} is made with other arguments than recorded`
            : `recorded ${recorded ? describe(recorded) : "no call"}, the code now makes ${current ? describe(current) : "no call"}`,
      },
    };
  }
  // Where the journal's knowledge ends: a call with no outcome (an intent refused here, or a call in
  // doubt or waiting in the journal, for which re-execution holds or parks the run).
  const endedRecorded =
    recordedStatus === "completed" || recordedStatus === "failed" || recordedStatus === "cancelled";
  const pastEnd = endedRecorded
    ? seen.intents.filter((i) => i.seq >= recordedCalls).sort((a, b) => a.seq - b.seq)[0]
    : undefined;
  const stops = [
    ...seen.intents.map((i) => ({
      seq: i.seq,
      detail: `call ${i.seq} ("${i.name}") has no recorded outcome`,
    })),
    ...seen.stops,
    ...seen.holds.map((h) => ({
      seq: h.callId ? seqOf(h.callId) : recordedCalls,
      detail: h.detail,
    })),
  ].sort((a, b) => a.seq - b.seq);
  const stop = stops[0];
  // A run that ended (completed, failed, cancelled) does not go on live: a call past its recorded
  // ones is a change of behaviour, not a frontier.
  if (pastEnd && stop && stop.seq === pastEnd.seq) {
    const callId = pastEnd.callId;
    const current = now(pastEnd.seq, "");
    return {
      runId,
      agent: agentName,
      result: "divergence",
      calls,
      divergence: {
        seq: pastEnd.seq,
        callId,
        recorded: null,
        now: current,
        detail: `the run ended (${recordedStatus}) after its ${recordedCalls} recorded call(s); the code now makes ${current ? describe(current) : `"${pastEnd.name}"`} as call ${pastEnd.seq}`,
      },
    };
  }
  if (stop)
    return { runId, agent: agentName, result: "continues-live", calls, seq: stop.seq, detail: stop.detail };
  if (ended === "timeout")
    return {
      runId,
      agent: agentName,
      result: "error",
      detail: `the agent did not end within ${timeoutMs} ms with every call served from the journal (does it wait on something outside the turn?)`,
    };
  if (calls < recordedCalls) {
    const callId = `${runId}/${calls}`;
    const recorded = recordedCall(callId);
    return {
      runId,
      agent: agentName,
      result: "divergence",
      calls,
      divergence: {
        seq: calls,
        callId,
        recorded,
        now: null,
        detail: `the agent ${"error" in ended ? `threw (${errorText(ended.error)})` : "returned"} before making the recorded ${recorded ? describe(recorded) : "call"}`,
      },
    };
  }
  const threw = "error" in ended ? { error: ended.error } : null;
  if ((recordedStatus === "completed" && threw) || (recordedStatus === "failed" && !threw)) {
    const callId = `${runId}/${calls}`;
    return {
      runId,
      agent: agentName,
      result: "divergence",
      calls,
      divergence: {
        seq: calls,
        callId,
        recorded: null,
        now: null,
        detail: threw
          ? `the run completed, but the agent now throws after its last call: ${errorText(threw.error)}`
          : "the run failed, but the agent now returns after its last call",
      },
    };
  }
  return { runId, agent: agentName, result: "same", calls };
};
