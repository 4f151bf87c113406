import {
  type AnyEvent,
  type HoldReason,
  type RecordedEvent,
  runStreamId,
  SYSTEM_STREAM,
} from "../events/index.js";
import { contextOf, emptyFold, foldRun, type RunFold, statusOf, step } from "../machines/index.js";
import { FencedOut, JournalUnavailable, WrongExpectedVersion } from "./errors.js";
import type { AppendRequest, Fence, Journal } from "./Journal.js";

/**
 * The events of an append, or how to build them from the run's fold: rebuilt each time the writer
 * tries again after folding in a control request another process appended (a signal that arrived
 * changes how a wait parks).
 */
export type EventsFor = ReadonlyArray<AnyEvent> | ((fold: RunFold) => ReadonlyArray<AnyEvent>);

/**
 * The appends to other streams that go with them, or how to build them from the run's fold: an
 * internal effect a control request refuses is not committed (decision 0091).
 */
export type OthersFor = ReadonlyArray<AppendRequest> | ((fold: RunFold) => ReadonlyArray<AppendRequest>);

/** A place in a run's append order, taken before the events are known (see {@link RunWriter.reserve}). */
export interface WriteSlot {
  /** Append in the slot's place; may be called again (a retry) until the slot is released. */
  appendWith(events: EventsFor, others: OthersFor): Promise<ReadonlyArray<RecordedEvent>>;
  /** Let the appends queued behind the slot go. Idempotent. */
  release(): void;
}

/**
 * The one write path for a run (live, recovery and decisions alike):
 *   fold -> transition (the machine must accept every event) -> append with the expected stream
 *   version -> only then act.
 * Appends of one run are serialized here, in the order they were asked for (or reserved), so
 * intents keep their `seq` order even when one of them needs a read before it can be built.
 */
export class RunWriter {
  readonly runId: string;
  readonly streamId: string;
  protected current: RunFold;
  private tail: Promise<unknown> = Promise.resolve();
  private fence: Fence | undefined;
  /** Told when control requests (cancel, pause) another process appended were folded in. */
  onControl: ((fold: RunFold) => void) | undefined;
  /**
   * Strict: an append that finds the stream moved on rejects with `WrongExpectedVersion`, nothing
   * written, instead of folding in the control requests and signals others appended and appending
   * after them. For a write a caller checked against the version a person looked at
   * (`basedOnVersion`, law 9): on a newer version it would record what nobody saw.
   */
  strict = false;

  constructor(
    readonly journal: Journal,
    runId: string,
    fold: RunFold | undefined,
    machineVersion: string,
    fence?: Fence,
  ) {
    this.runId = runId;
    this.streamId = runStreamId(runId);
    this.current = fold ?? emptyFold(machineVersion);
    this.fence = fence;
  }

  get fold(): RunFold {
    return this.current;
  }

  setFence(fence: Fence | undefined): void {
    this.fence = fence;
  }

  /**
   * Validate `events` with the machine, then append them in one transaction. Resolves after the
   * commit; rejects (writing nothing) if the machine refuses or the store does.
   */
  append(events: ReadonlyArray<AnyEvent>): Promise<ReadonlyArray<RecordedEvent>> {
    return this.enqueue(events, [], false);
  }

  /**
   * The same, and the run's claim let go in the same commit (`AppendRequest.releaseClaim`): for the
   * last append of an owner that settles the run with it. Needs the writer's fence.
   */
  appendAndRelease(events: ReadonlyArray<AnyEvent>): Promise<ReadonlyArray<RecordedEvent>> {
    return this.enqueue(events, [], true);
  }

  /**
   * The same, together with appends to other streams in one transaction (a document change and
   * the outcome of the call that made it): all are written, or none.
   */
  appendWith(
    events: ReadonlyArray<AnyEvent>,
    others: ReadonlyArray<AppendRequest>,
  ): Promise<ReadonlyArray<RecordedEvent>> {
    return this.enqueue(events, others, false);
  }

  /** Take the next place in the run's append order for a write. */
  private enqueue(
    events: ReadonlyArray<AnyEvent>,
    others: ReadonlyArray<AppendRequest>,
    releaseClaim: boolean,
  ): Promise<ReadonlyArray<RecordedEvent>> {
    const next = this.tail.then(() => this.write(events, others, releaseClaim));
    this.tail = next.catch(() => undefined);
    return next;
  }

  /**
   * Take the next place in the append order now, for events built later (after a read): appends
   * asked for after this call wait until the slot is released, so a document call's intent cannot
   * be overtaken by the intent of a call started after it.
   */
  reserve(): WriteSlot {
    const before = this.tail;
    let release!: () => void;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.tail = before.then(() => released);
    return {
      appendWith: (events, others) => before.then(() => this.write(events, others)),
      release: () => release(),
    };
  }

  /** Whether the machine would accept `event` now (no write). */
  accepts(event: AnyEvent): boolean {
    return this.current.snapshot.can(event);
  }

  /**
   * Fold the stream as the journal holds it now (after another writer moved it); its events. None
   * when retention removed the run: there is nothing to fold, and the fold stays as it was.
   *
   * The read runs beside this writer's queue: an append of the same writer that commits while the
   * read is on its way leaves the read behind the fold. Such a read is never folded (it would make
   * the writer forget its own commit, and its next append meet `WrongExpectedVersion` on a stream
   * only it moved); the stream is read again.
   */
  async refresh(): Promise<ReadonlyArray<RecordedEvent>> {
    for (;;) {
      const before = this.current;
      const events = await this.journal.readStream(this.streamId);
      if (this.current !== before) continue;
      if (events.length > 0) this.current = foldRun(events.map((e) => e.event));
      return events;
    }
  }

  /**
   * Fold in the control requests (`run.cancel-requested`, `run.pause-requested`, a signal) another
   * process appended after this writer's version, and the conflicts a fenced-out old owner kept
   * (`conflict.recorded`: its late outcome, which changes nothing of the run's course), and tell
   * `onControl`. Only when every event after the version is one of these: anything else means the
   * run moved on under this writer, which the next append learns as usual. True when the fold moved.
   */
  async absorbControl(): Promise<boolean> {
    const base = this.current;
    const after = await this.journal.readStream(this.streamId, { afterVersion: contextOf(base).version });
    if (after.length === 0 || this.current !== base) return false;
    if (!after.every(({ event }) => ABSORBED.has(event.type))) return false;
    let fold = base;
    for (const { event } of after) fold = step(fold, event);
    this.current = fold;
    this.onControl?.(fold);
    return true;
  }

  private async write(
    eventsFor: EventsFor,
    othersFor: OthersFor,
    releaseClaim = false,
  ): Promise<ReadonlyArray<RecordedEvent>> {
    for (;;) {
      const base = this.current;
      const events = typeof eventsFor === "function" ? eventsFor(base) : eventsFor;
      const others = typeof othersFor === "function" ? othersFor(base) : othersFor;
      let fold = base;
      for (const event of events) fold = step(fold, event);
      const own: AppendRequest = {
        streamId: this.streamId,
        expectedVersion: contextOf(base).version,
        events,
        ...(this.fence ? { fence: this.fence } : {}),
        ...(releaseClaim ? { releaseClaim } : {}),
      };
      try {
        const [result] =
          others.length === 0
            ? [await this.journal.append(own)]
            : await this.journal.appendAll([own, ...others]);
        this.current = fold;
        return result!.recorded;
      } catch (error) {
        // A cancel or pause request from another process took the version: learn it, append after it
        // if the machine still takes these events (it throws TransitionRejected when it does not).
        if (!(error instanceof WrongExpectedVersion) || this.strict) throw error;
        const moved = (await this.absorbControl()) || this.current !== base;
        if (!moved) throw error;
      }
    }
  }
}

/**
 * Events another process may append to a run it does not own, without a claim (decisions 0043,
 * 0044, and a signal: 0054); a live owner folds them in and goes on.
 */
export const CONTROL_REQUESTS: ReadonlySet<string> = new Set([
  "run.cancel-requested",
  "run.pause-requested",
  "signal.received",
]);

/**
 * What a live owner folds in and goes on after: the control requests, and the `conflict.recorded`
 * an old owner appends without a claim once it learnt it was fenced out (its late outcome, kept
 * beside the first; {@link recordOutcome}) — the new owner's next append must not meet it as a
 * version conflict (issue 35).
 */
const ABSORBED: ReadonlySet<string> = new Set([...CONTROL_REQUESTS, "conflict.recorded"]);

export type Outcome = Extract<AnyEvent, { type: "call.completed" | "call.failed" }>;

/** Where an outcome ended up in the journal. */
export type OutcomeRecord =
  /** Appended as the call's outcome by its owner, as usual. */
  | "recorded"
  /** The same outcome was there already (a retried commit that had gone through). */
  | "duplicate"
  /** The run had moved on to another owner, whose journal already says the same (e.g. proved not started). */
  | "known"
  /** The run had moved on to another owner: appended as the call's outcome after all (the run was held for it). */
  | "late"
  /** The call was closed already, or the run cannot take it any more: kept as `conflict.recorded`. */
  | "conflict"
  /** The run was removed by retention before the outcome arrived: kept as `outcome.orphaned` in the system stream. */
  | "after-prune";

const JOURNAL_RETRIES_MS = [100, 500, 2_000];
const RECORD_ATTEMPTS = 8;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Record an outcome that happened (law 5 at run time: never dropped). The owner appends it through
 * its writer; a journal failure is retried, and a stream that moved under the writer (a retried
 * commit that had gone through, another owner after a pause past the lease) is read again. If the
 * claim moved on, the outcome is recorded without this worker's fence, on the stream as it is now:
 * as the call's outcome if the machine still takes it there (the new owner held the run for it),
 * else as `conflict.recorded` carrying it — the first outcome stands, history is never rewritten.
 * A run retention removed meanwhile has no stream left to take it: the outcome goes to the `system`
 * stream as `outcome.orphaned`, with a warning (HOLDFAST_LATE_OUTCOME) naming where it is.
 * "late", "known", "conflict" and "after-prune" mean this execution no longer owns the run: it must stop.
 */
export const recordOutcome = async (writer: RunWriter, outcome: Outcome): Promise<OutcomeRecord> => {
  let fenced = true;
  let stale = false;
  let failures = 0;
  const orphan: OrphanTries = { systemHead: null };
  for (let attempt = 0; attempt < RECORD_ATTEMPTS; attempt++) {
    let verdict: "outcome" | "duplicate" | "conflict" = "outcome";
    try {
      if (stale) {
        const events = await writer.refresh();
        if (events.length === 0) return await recordOrphaned(writer, outcome, orphan);
        verdict = appendableOutcome(writer, outcome, events);
        if (verdict === "duplicate") return fenced ? "duplicate" : "known";
      }
      await writer.append(
        verdict === "outcome"
          ? [outcome, ...heldAgain(writer.fold, outcome)]
          : [conflictFor(writer.runId, writer.fold, outcome)],
      );
      if (verdict === "conflict") return "conflict";
      return fenced ? "recorded" : "late";
    } catch (error) {
      if (error instanceof WrongExpectedVersion) {
        stale = true;
      } else if (error instanceof FencedOut) {
        // Another worker owns the run now: record what happened anyway, on its stream as it is.
        writer.setFence(undefined);
        fenced = false;
        stale = true;
      } else if (error instanceof JournalUnavailable && failures < JOURNAL_RETRIES_MS.length) {
        await sleep(JOURNAL_RETRIES_MS[failures++]!);
        // The commit may have gone through: read the stream before trying again.
        stale = true;
      } else if (isRejected(error) && !stale) {
        stale = true;
      } else {
        throw error;
      }
    }
  }
  throw new JournalUnavailable({
    location: writer.journal.location,
    reason: `the outcome of ${outcome.callId} could not be recorded: run ${writer.runId} kept moving under it`,
    hint: "Read the run (holdfast show) and record what happened with a decision once it is held.",
  });
};

/** What a person is told about a held run's call whose outcome arrived after the hold. */
export const OUTCOME_AFTER_HOLD = "the call's outcome arrived after the hold: resume to continue with it";

/**
 * An outcome that lands on a run held for that very call answers the hold's question: the run is
 * held again, in the same commit, with that reason saying so — not "no outcome", which the journal
 * now contradicts (the runs projection, `show`, the decision hints and the panel read the reasons).
 */
const heldAgain = (fold: RunFold, outcome: Outcome): AnyEvent[] => {
  const { heldReasons, runId, calls } = contextOf(fold);
  if (statusOf(fold) !== "held" || !heldReasons.some((r) => r.callId === outcome.callId)) return [];
  const call = calls.get(outcome.callId);
  const what = call ? `${call.kind} "${call.name}" attempt ${outcome.attempt}` : `attempt ${outcome.attempt}`;
  const answered: HoldReason = {
    code: "decision-needed",
    callId: outcome.callId,
    detail: `${what}: ${OUTCOME_AFTER_HOLD} (${outcome.type === "call.completed" ? "it completed" : "it failed definitely"})`,
  };
  const reasons = heldReasons.map((r) => (r.callId === outcome.callId ? answered : r));
  const unique = reasons.filter((r, i) => r !== answered || reasons.indexOf(answered) === i);
  return [{ type: "run.held", runId, reasons: unique as [HoldReason, ...HoldReason[]] }];
};

/** The system stream's version before the first try: a retry looks after it for a commit that went through. */
interface OrphanTries {
  systemHead: number | null;
}

/** The outcome of a call whose run is gone (pruned), kept in the system stream (law 5). */
const recordOrphaned = async (
  writer: RunWriter,
  outcome: Outcome,
  tries: OrphanTries,
): Promise<"after-prune"> => {
  const { journal } = writer;
  if (tries.systemHead === null) tries.systemHead = (await journal.streamHead(SYSTEM_STREAM))?.version ?? 0;
  else {
    const since = await journal.readStream(SYSTEM_STREAM, { afterVersion: tries.systemHead });
    const kept = since.some(
      ({ event }) =>
        event.type === "outcome.orphaned" &&
        event.callId === outcome.callId &&
        event.attempt === outcome.attempt,
    );
    if (kept) return "after-prune";
  }
  const pruned = await journal.prunedRun(writer.runId);
  const event: AnyEvent = {
    type: "outcome.orphaned",
    runId: writer.runId,
    callId: outcome.callId,
    attempt: outcome.attempt,
    detail: pruned
      ? `the outcome (${outcome.type}, attempt ${outcome.attempt}) of ${outcome.callId} arrived after its run was pruned (${pruned.status}, at ${pruned.prunedAt})`
      : `the outcome (${outcome.type}, attempt ${outcome.attempt}) of ${outcome.callId} arrived after its run had left the journal`,
    recorded: pruned
      ? { status: pruned.status, outputDigest: pruned.outputDigest, prunedAt: pruned.prunedAt }
      : { status: null },
    attempted: attemptedOf(outcome),
  };
  const { recorded } = await journal.append({
    streamId: SYSTEM_STREAM,
    expectedVersion: "any",
    events: [event],
  });
  process.emitWarning(
    `the outcome of ${outcome.callId} (attempt ${outcome.attempt}) arrived after its run was pruned; recorded as outcome.orphaned at ${SYSTEM_STREAM}@${recorded[0]?.version} (holdfast events, holdfast audit)`,
    { code: "HOLDFAST_LATE_OUTCOME" },
  );
  return "after-prune";
};

const isRejected = (error: unknown): boolean =>
  typeof error === "object" && error !== null && (error as { _tag?: unknown })._tag === "TransitionRejected";

const appendableOutcome = (
  writer: RunWriter,
  outcome: Outcome,
  events: ReadonlyArray<RecordedEvent>,
): "outcome" | "duplicate" | "conflict" => {
  if (writer.accepts(outcome)) return "outcome";
  const call = contextOf(writer.fold).calls.get(outcome.callId);
  const same =
    call !== undefined &&
    call.attempt === outcome.attempt &&
    ((outcome.type === "call.completed" &&
      call.status === "completed" &&
      call.resultDigest === outcome.resultDigest) ||
      (outcome.type === "call.failed" && call.status === "failed"));
  // A definite failure of an attempt that recovery already proved never started says the same.
  const provenNotStarted =
    outcome.type === "call.failed" &&
    events.some(
      ({ event }) =>
        event.type === "call.reconciled" &&
        event.callId === outcome.callId &&
        event.attempt === outcome.attempt &&
        event.outcome === "not-completed",
    );
  return same || provenNotStarted ? "duplicate" : "conflict";
};

const conflictFor = (runId: string, fold: RunFold, outcome: Outcome): AnyEvent => {
  const call = contextOf(fold).calls.get(outcome.callId);
  return {
    type: "conflict.recorded",
    runId,
    callId: outcome.callId,
    kind: "outcome",
    detail: call
      ? `a late outcome (${outcome.type}, attempt ${outcome.attempt}) arrived for ${outcome.callId}, which is ${call.status} at attempt ${call.attempt}; the first outcome stands`
      : `an outcome (${outcome.type}) arrived for ${outcome.callId}, which has no intent in this run`,
    recorded: {
      status: call?.status ?? null,
      attempt: call?.attempt ?? null,
      resultDigest: call?.resultDigest ?? null,
    },
    attempted: attemptedOf(outcome),
  };
};

/** An outcome as a conflict keeps it: its type, attempt, digest, and the (masked) result or error. */
const attemptedOf = (outcome: Outcome) => ({
  type: outcome.type,
  attempt: outcome.attempt,
  resultDigest: outcome.type === "call.completed" ? outcome.resultDigest : null,
  ...(outcome.type === "call.completed" ? { result: outcome.result } : { error: outcome.error }),
});
