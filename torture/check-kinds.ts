/**
 * The checks of the `cancel`, `queue` and `pause` fault kinds (decision 0047), each over one
 * trial's final journal and what the harness did and saw from outside. Their problems fail the run
 * as a duplicate does.
 */
import { queueStreamId, type RecordedEvent } from "../src/events/index.js";
import { foldRun, statusOf } from "../src/machines/index.js";
import { NOT_STARTED_CONTROL_EVIDENCE } from "../src/runtime/attempt.js";

/** A stream's status, or why it does not fold (the machine refuses an event: a problem of its own). */
const statusIn = (events: ReadonlyArray<RecordedEvent["event"]>): string => {
  try {
    return statusOf(foldRun(events));
  } catch (error) {
    return `unfoldable (${(error as Error).message})`;
  }
};

/**
 * Attempts whose intent committed after a cancel or pause request and that the owner then closed
 * without starting them (`call.reconciled` not-completed, "cancel or pause requested before the
 * effect"): an intent that raced the request and lost, which the runtime records so (law 1 holds:
 * no effect). Keys `callId#attempt`.
 */
const refusedAfterIntent = (
  stream: ReadonlyArray<{ readonly event: RecordedEvent["event"] }>,
): Set<string> => {
  const refused = new Set<string>();
  for (const { event } of stream)
    if (
      event.type === "call.reconciled" &&
      event.outcome === "not-completed" &&
      event.evidence === NOT_STARTED_CONTROL_EVIDENCE
    )
      refused.add(`${event.callId}#${event.attempt}`);
  return refused;
};

type Streams = Map<string, Array<{ readonly index: number; readonly event: RecordedEvent["event"] }>>;

/** Each run stream's events in order, with their place in the whole journal. */
const runStreams = (events: ReadonlyArray<RecordedEvent>): Streams => {
  const streams: Streams = new Map();
  events.forEach((e, index) => {
    if (!e.streamId.startsWith("run-")) return;
    const list = streams.get(e.streamId) ?? [];
    list.push({ index, event: e.event });
    streams.set(e.streamId, list);
  });
  return streams;
};

/** What the harness asked with one cancel, and what the runtime answered. */
export interface CancelAsked {
  readonly runId: string;
  /** Where the owner was killed: just before the request was made, just after it committed, or not. */
  readonly kill: "before" | "after" | "none";
  readonly accepted: boolean;
  /** The answer's status: `cancel-requested`, `cancelled`, `held`, `stopped`, or how the run had ended. */
  readonly status: string;
}

/** What the `cancel` kind's check found. */
export interface CancelCheck {
  readonly cancelsRequested: number;
  /** Cancels asked with the owner killed just before / just after the request committed. */
  readonly killedBeforeRequest: number;
  readonly killedAfterRequest: number;
  /** `run.cancel-requested` in the journal. */
  readonly requestsCommitted: number;
  readonly cancelledEnded: number;
  readonly heldCancelledInDoubt: number;
  /** Held before the cancel came: the cancel was the stop decision. */
  readonly stoppedHeld: number;
  /** The run had ended before the cancel came (the answer said so). */
  readonly endedFirst: number;
  /** Intents that raced the request, committed after it and closed unstarted by the owner. */
  readonly intentsRefused: number;
  readonly problems: string[];
}

/**
 * The `cancel` kind's laws: a run whose cancel request committed ends `cancelled`, or is held
 * `cancelled-in-doubt` (or `stopped` by a later cancel of that hold); no call is started in its
 * stream after the request (an intent that raced it must be closed unstarted); no effect the witnesses saw belongs to an attempt intended after it
 * (nor to one the journal never intended); an accepted cancel left a request in the journal, and a
 * refused one said the run had ended already.
 */
export const checkCancel = (
  events: ReadonlyArray<RecordedEvent>,
  /** Idempotency keys (`callId#attempt`) of every effect the witnesses saw. */
  effectKeys: ReadonlyArray<string>,
  asked: ReadonlyArray<CancelAsked>,
): CancelCheck => {
  const problems: string[] = [];
  const streams = runStreams(events);
  const requestAt = new Map<string, number>();
  const intentAt = new Map<string, number>();
  let cancelledEnded = 0;
  let heldCancelledInDoubt = 0;
  let stoppedHeld = 0;
  let intentsRefused = 0;
  for (const [streamId, stream] of streams) {
    const request = stream.find((e) => e.event.type === "run.cancel-requested");
    for (const { index, event } of stream)
      if (event.type === "call.intended") intentAt.set(`${event.callId}#${event.attempt}`, index);
    if (!request) continue;
    const runId = (request.event as { runId: string }).runId;
    requestAt.set(runId, request.index);
    const refused = refusedAfterIntent(stream);
    for (const { index, event } of stream)
      if (event.type === "call.intended" && index > request.index) {
        if (refused.has(`${event.callId}#${event.attempt}`)) intentsRefused++;
        else
          problems.push(
            `${streamId}: ${event.callId} attempt ${event.attempt} intended after the cancel request, not closed unstarted`,
          );
      }
    const status = statusIn(stream.map((e) => e.event));
    const lastHold = [...stream].reverse().find((e) => e.event.type === "run.held")?.event;
    const inDoubt =
      lastHold?.type === "run.held" && lastHold.reasons.some((r) => r.code === "cancelled-in-doubt");
    if (status === "cancelled") cancelledEnded++;
    else if (status === "held" && inDoubt) heldCancelledInDoubt++;
    else if (status === "stopped") stoppedHeld++;
    else
      problems.push(
        `${streamId}: asked to cancel, it is ${status}${status === "held" ? " (not cancelled-in-doubt)" : ""}`,
      );
  }
  for (const key of effectKeys) {
    const callId = key.split("#")[0]!;
    const runId = callId.slice(0, callId.lastIndexOf("/"));
    const request = requestAt.get(runId);
    if (request === undefined) continue;
    const intent = intentAt.get(key);
    if (intent === undefined)
      problems.push(`${key}: the witness saw its effect, the journal never intended it`);
    else if (intent > request)
      problems.push(`${key}: the witness saw the effect of an attempt intended after the cancel`);
  }
  let endedFirst = 0;
  for (const a of asked) {
    if (!a.accepted) {
      if (["completed", "failed", "cancelled", "stopped"].includes(a.status)) endedFirst++;
      else if (a.status !== "cancel-requested")
        problems.push(`cancel of ${a.runId} refused while ${a.status}`);
      continue;
    }
    if (a.status !== "stopped" && !requestAt.has(a.runId))
      problems.push(`cancel of ${a.runId} accepted (${a.status}), no run.cancel-requested in the journal`);
  }
  return {
    cancelsRequested: asked.length,
    killedBeforeRequest: asked.filter((a) => a.kill === "before").length,
    killedAfterRequest: asked.filter((a) => a.kill === "after").length,
    requestsCommitted: requestAt.size,
    cancelledEnded,
    heldCancelledInDoubt,
    stoppedHeld,
    endedFirst,
    intentsRefused,
    problems,
  };
};

/** What the `queue` kind's check found. */
export interface QueueCheck {
  /** `input.queued` in the chat's queue stream. */
  readonly queued: number;
  /** `input.admitted`: a queued input became a run. */
  readonly queuedAdmitted: number;
  /** Inputs of the queue kind admitted directly (the chat was free when they came, after a restart). */
  readonly admittedDirectly: number;
  readonly problems: string[];
}

/**
 * The `queue` kind's laws, from the journal: each of the inputs is admitted as a run exactly once,
 * after the chat's first input and in submission order; none is lost (every one has its run at the
 * end), none withdrawn, none left queued; no input queued or admitted twice in the queue stream.
 */
export const checkQueue = (
  events: ReadonlyArray<RecordedEvent>,
  chatId: string,
  /** The chat's inputs in submission order: the first run's, then the queued ones. */
  inputIds: ReadonlyArray<string>,
): QueueCheck => {
  const problems: string[] = [];
  const admittedOrder: string[] = [];
  for (const { streamId, event } of events)
    if (streamId.startsWith("run-") && event.type === "run.admitted" && event.chatId === chatId)
      admittedOrder.push(event.inputId);
  for (const inputId of inputIds) {
    const n = admittedOrder.filter((i) => i === inputId).length;
    if (n === 0) problems.push(`${inputId}: never admitted (lost)`);
    if (n > 1) problems.push(`${inputId}: admitted ${n} times`);
  }
  const known = admittedOrder.filter((i) => inputIds.includes(i));
  const expected = inputIds.filter((i) => known.includes(i));
  if (known.join(",") !== expected.join(","))
    problems.push(`admitted in the order ${known.join(", ")}; submitted ${inputIds.join(", ")}`);
  const queueStream = queueStreamId(chatId);
  const queuedIds: string[] = [];
  const admittedIds: string[] = [];
  for (const { streamId, event } of events) {
    if (streamId !== queueStream) continue;
    if (event.type === "input.queued") queuedIds.push(event.inputId);
    if (event.type === "input.admitted") admittedIds.push(event.inputId);
    if (event.type === "input.withdrawn")
      problems.push(
        `${event.inputId}: withdrawn (${event.reason ?? event.by}); nobody withdraws in the torture`,
      );
  }
  for (const [what, ids] of [
    ["queued", queuedIds],
    ["admitted from the queue", admittedIds],
  ] as const)
    for (const id of new Set(ids))
      if (ids.filter((i) => i === id).length > 1) problems.push(`${id}: ${what} twice`);
  for (const id of queuedIds) if (!admittedIds.includes(id)) problems.push(`${id}: still queued at the end`);
  if (admittedIds.join(",") !== queuedIds.filter((i) => admittedIds.includes(i)).join(","))
    problems.push(`admitted from the queue as ${admittedIds.join(", ")}, queued as ${queuedIds.join(", ")}`);
  return {
    queued: queuedIds.length,
    queuedAdmitted: admittedIds.length,
    admittedDirectly: inputIds.slice(1).filter((i) => admittedOrder.includes(i) && !queuedIds.includes(i))
      .length,
    problems,
  };
};

/** What the harness saw of a paused run across a restart. */
export interface PauseSeen {
  /** Restarts after which the run was found still paused, as it must be. */
  readonly stillPaused: number;
  /** Restarts after which the paused run was found otherwise: what it was. */
  readonly notPaused: ReadonlyArray<string>;
  /** Processes killed while the run was paused. */
  readonly killsWhilePaused: number;
}

/** What the `pause` kind's check found. */
export interface PauseCheck {
  readonly pausesRequested: number;
  readonly paused: number;
  readonly resumed: number;
  readonly stillPausedAfterRestart: number;
  readonly killsWhilePaused: number;
  /** Intents that raced the pause request, committed after it and closed unstarted by the owner. */
  readonly intentsRefused: number;
  readonly problems: string[];
}

/**
 * The `pause` kind's laws: no call started in a run's stream between its pause request and its
 * resume (or its cancel) — an intent that raced the request must be closed unstarted, and no
 * witness saw its effect; only the harness resumes (recovery never does: every `run.resumed` is
 * the harness's, and a paused run is still paused after a restart); a resumed run ends (it is not
 * left paused or running).
 */
export const checkPause = (
  events: ReadonlyArray<RecordedEvent>,
  /** Idempotency keys (`callId#attempt`) of every effect the witnesses saw. */
  effectKeys: ReadonlyArray<string>,
  /** Who the harness says it is in its resumes. */
  harness: string,
  seen: PauseSeen,
): PauseCheck => {
  const problems = seen.notPaused.map((s) => `after a restart the paused run was ${s}`);
  let pausesRequested = 0;
  let paused = 0;
  let resumed = 0;
  let intentsRefused = 0;
  const effects = new Set(effectKeys);
  for (const [streamId, stream] of runStreams(events)) {
    const refused = refusedAfterIntent(stream);
    let parked = false;
    let wasResumed = false;
    for (const { event } of stream) {
      if (event.type === "run.pause-requested") {
        pausesRequested++;
        parked = true;
      }
      if (event.type === "run.paused") paused++;
      if (event.type === "run.resumed") {
        if (parked) {
          resumed++;
          wasResumed = true;
          if (event.by !== harness) problems.push(`${streamId}: resumed by ${event.by}, not by the harness`);
        }
        parked = false;
      }
      if (event.type === "run.cancel-requested") parked = false;
      if (event.type === "call.intended" && parked) {
        const key = `${event.callId}#${event.attempt}`;
        if (!refused.has(key))
          problems.push(
            `${streamId}: ${event.callId} attempt ${event.attempt} intended while pausing or paused, not closed unstarted`,
          );
        else intentsRefused++;
        if (effects.has(key))
          problems.push(`${key}: the witness saw the effect of an attempt intended while pausing or paused`);
      }
    }
    const status = statusIn(stream.map((e) => e.event));
    if (wasResumed && (status === "paused" || status === "running" || status === "interrupted"))
      problems.push(`${streamId}: resumed, and it is still ${status}`);
  }
  return {
    pausesRequested,
    paused,
    resumed,
    stillPausedAfterRestart: seen.stillPaused,
    killsWhilePaused: seen.killsWhilePaused,
    intentsRefused,
    problems,
  };
};
