import { type AnyEvent, type RecordedEvent, runStreamId } from "../events/index.js";
import { contextOf, emptyFold, type RunFold, step } from "../machines/index.js";
import type { AppendRequest, Fence, Journal } from "./Journal.js";

/**
 * The one write path for a run (live, recovery and decisions alike):
 *   fold -> transition (the machine must accept every event) -> append with the expected stream
 *   version -> only then act.
 * Appends of one run are serialized here, in call order, so intents keep their `seq` order.
 */
export class RunWriter {
  readonly runId: string;
  readonly streamId: string;
  private current: RunFold;
  private tail: Promise<unknown> = Promise.resolve();
  private fence: Fence | undefined;

  constructor(
    private readonly journal: Journal,
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
    return this.appendWith(events, []);
  }

  /**
   * The same, together with appends to other streams in one transaction (a document change and
   * the outcome of the call that made it): all are written, or none.
   */
  appendWith(
    events: ReadonlyArray<AnyEvent>,
    others: ReadonlyArray<AppendRequest>,
  ): Promise<ReadonlyArray<RecordedEvent>> {
    const next = this.tail.then(async () => {
      let fold = this.current;
      for (const event of events) fold = step(fold, event);
      const own: AppendRequest = {
        streamId: this.streamId,
        expectedVersion: contextOf(this.current).version,
        events,
        ...(this.fence ? { fence: this.fence } : {}),
      };
      const [result] =
        others.length === 0
          ? [await this.journal.append(own)]
          : await this.journal.appendAll([own, ...others]);
      this.current = fold;
      return result!.recorded;
    });
    this.tail = next.catch(() => undefined);
    return next;
  }

  /** Whether the machine would accept `event` now (no write). */
  accepts(event: AnyEvent): boolean {
    return this.current.snapshot.can(event);
  }
}

/**
 * Record an outcome for a call through the write path. If the call is already closed, an equal
 * outcome is a no-op and a different one is recorded as `conflict.recorded` (law 5): the first
 * outcome stands and history is never rewritten.
 */
export const appendOutcome = async (
  writer: RunWriter,
  outcome: Extract<AnyEvent, { type: "call.completed" | "call.failed" }>,
): Promise<"recorded" | "duplicate" | "conflict"> => {
  if (writer.accepts(outcome)) {
    await writer.append([outcome]);
    return "recorded";
  }
  const call = contextOf(writer.fold).calls[outcome.callId];
  if (!call) throw new RangeError(`call ${outcome.callId} has no intent in run ${writer.runId}`);
  const attemptedDigest = outcome.type === "call.completed" ? outcome.resultDigest : null;
  const same =
    (outcome.type === "call.completed" &&
      call.status === "completed" &&
      call.resultDigest === attemptedDigest) ||
    (outcome.type === "call.failed" && call.status === "failed");
  if (same) return "duplicate";
  await writer.append([
    {
      type: "conflict.recorded",
      runId: writer.runId,
      callId: outcome.callId,
      kind: "outcome",
      detail: `a second, different outcome (${outcome.type}) arrived for ${outcome.callId}, already ${call.status}; the first outcome stands`,
      recorded: { status: call.status, resultDigest: call.resultDigest },
      attempted: { type: outcome.type, resultDigest: attemptedDigest },
    },
  ]);
  return "conflict";
};
