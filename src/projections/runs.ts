import type { HoldReason, RecordedEvent } from "../events/index.js";
import type { RunStatus } from "../machines/index.js";
import type { Projection } from "./projection.js";

/** One run as the runs projection holds it: status, why it is held, counts, times. */
export interface RunRow {
  readonly runId: string;
  readonly chatId: string;
  readonly inputId: string;
  readonly agent: string;
  readonly status: Exclude<RunStatus, "admitting">;
  /** Held for corruption: the run stays active, so its chat refuses new input, until a person acts. */
  readonly needsAttention: boolean;
  readonly heldReasons: ReadonlyArray<HoldReason>;
  readonly calls: number;
  readonly conflicts: number;
  readonly version: number;
  readonly admittedAt: string;
  readonly updatedAt: string;
  readonly position: number;
  /**
   * While the run waits (`run.waiting`, decisions 0050, 0054): its kind, the wait call, its due time
   * (none: a signal wait without a timeout) and the signal's name.
   */
  readonly waiting?: {
    readonly wait: string;
    readonly callId: string;
    readonly dueAt?: string;
    readonly name?: string;
  };
}

const STATUS_BY_TYPE: Partial<Record<string, RunRow["status"]>> = {
  "run.admitted": "running",
  "run.interrupted": "interrupted",
  "run.held": "held",
  "run.resumed": "running",
  "run.completed": "completed",
  "run.failed": "failed",
  "run.stopped": "stopped",
  "run.cancelled": "cancelled",
  "run.paused": "paused",
  "run.waiting": "waiting",
  "run.woken": "running",
};

const runIdOf = (recorded: RecordedEvent): string =>
  "runId" in recorded.event ? String(recorded.event.runId) : "";

/** Status per run, and the needs-attention list. */
export const runsProjection: Projection<RunRow> = {
  name: "runs",
  version: 1,
  canHandle: [
    "run.admitted",
    "run.interrupted",
    "run.held",
    "run.resumed",
    "run.completed",
    "run.failed",
    "run.stopped",
    "run.cancelled",
    "run.paused",
    "run.waiting",
    "run.woken",
    "call.intended",
    "decision.recorded",
    "conflict.recorded",
  ],
  keysOf: (recorded) => [runIdOf(recorded)],
  evolve: (state, recorded) => {
    const { event } = recorded;
    const base: RunRow =
      state ??
      (event.type === "run.admitted"
        ? {
            runId: event.runId,
            chatId: event.chatId,
            inputId: event.inputId,
            agent: `${event.agent.name}@${event.agent.version}`,
            status: "running",
            needsAttention: false,
            heldReasons: [],
            calls: 0,
            conflicts: 0,
            version: 0,
            admittedAt: recorded.recordedAt,
            updatedAt: recorded.recordedAt,
            position: 0,
          }
        : (() => {
            throw new RangeError(
              `runs projection: ${event.type} before run.admitted in ${recorded.streamId}`,
            );
          })());
    let next: RunRow = {
      ...base,
      version: recorded.version,
      updatedAt: recorded.recordedAt,
      position: recorded.position,
    };
    const status = STATUS_BY_TYPE[event.type];
    if (status) next = { ...next, status };
    // A run leaves its wait by being woken or ending: the row keeps no stale due time.
    if (next.status !== "waiting" && next.waiting) {
      const { waiting: _, ...rest } = next;
      next = rest;
    }
    switch (event.type) {
      case "run.waiting":
        next = {
          ...next,
          waiting: {
            wait: event.wait,
            callId: event.callId,
            ...(event.dueAt === undefined ? {} : { dueAt: event.dueAt }),
            ...(event.name === undefined ? {} : { name: event.name }),
          },
        };
        break;
      case "run.held":
        next = {
          ...next,
          heldReasons: event.reasons,
          needsAttention: next.needsAttention || event.reasons.some((r) => r.code === "corrupt"),
        };
        break;
      case "call.intended":
        if (event.attempt === 1) next = { ...next, calls: next.calls + 1 };
        break;
      case "decision.recorded":
        next = {
          ...next,
          // From run@2 the run.resumed, run.stopped or run.held written with the decision follows.
          status: event.run === "stop" ? "stopped" : "running",
          heldReasons: [],
          needsAttention: false,
        };
        break;
      case "conflict.recorded":
        next = { ...next, conflicts: next.conflicts + 1 };
        break;
      case "run.resumed":
      case "run.completed":
      case "run.failed":
      case "run.stopped":
      case "run.cancelled":
      case "run.paused":
        next = { ...next, heldReasons: [], needsAttention: false };
        break;
    }
    return next;
  },
};
