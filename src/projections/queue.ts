import type { ForkSpec, RecordedEvent } from "../events/index.js";

/** One input of a chat's queue, as its stream says now. */
export interface QueueItem {
  readonly inputId: string;
  readonly inputDigest: string;
  readonly agent: { readonly name: string; readonly version: string };
  /** Whether the submit named the version: only that version admits it (decision 0062). */
  readonly versionPinned: boolean;
  /** The masked input, as `input.queued` recorded it. */
  readonly input: unknown;
  readonly queuedAt: string;
  /** The version of its `input.queued` in the queue stream: the queue's order. */
  readonly version: number;
  readonly by: string | null;
  /** A queued fork's spec (decision 0083): admitted as a fork of it. */
  readonly fork?: ForkSpec;
  readonly status: "pending" | "admitted" | "withdrawn";
  /** The run it became (admitted). */
  readonly runId: string | null;
  /** Who withdrew it, and why (withdrawn). */
  readonly withdrawnBy: string | null;
  readonly withdrawnReason: string | null;
}

/** A chat's queue folded from its stream (`queue-<chatId>`): every item, and the pending ones in order. */
export interface QueueState {
  /** The stream's version: what the next append to it expects. */
  readonly version: number;
  readonly items: ReadonlyMap<string, QueueItem>;
  /** Pending items, first queued first. */
  readonly pending: ReadonlyArray<QueueItem>;
}

/**
 * Fold a queue stream. Pure: the same events give the same queue; an event for an input the
 * stream never queued, or a second outcome for one, is ignored here (the audit reports it).
 */
export const foldQueue = (events: ReadonlyArray<RecordedEvent>): QueueState => {
  const items = new Map<string, QueueItem>();
  let version = 0;
  for (const { event, version: v, recordedAt } of events) {
    version = v;
    if (event.type === "input.queued") {
      if (items.has(event.inputId)) continue;
      items.set(event.inputId, {
        inputId: event.inputId,
        inputDigest: event.inputDigest,
        agent: event.agent,
        versionPinned: event.versionPinned === true,
        input: event.input,
        queuedAt: recordedAt,
        version: v,
        by: event.by ?? null,
        ...(event.fork ? { fork: event.fork } : {}),
        status: "pending",
        runId: null,
        withdrawnBy: null,
        withdrawnReason: null,
      });
    } else if (event.type === "input.admitted" || event.type === "input.withdrawn") {
      const item = items.get(event.inputId);
      if (item?.status !== "pending") continue;
      items.set(
        event.inputId,
        event.type === "input.admitted"
          ? { ...item, status: "admitted", runId: event.runId }
          : { ...item, status: "withdrawn", withdrawnBy: event.by, withdrawnReason: event.reason ?? null },
      );
    }
  }
  const pending = [...items.values()]
    .filter((i) => i.status === "pending")
    .sort((a, b) => a.version - b.version);
  return { version, items, pending };
};
