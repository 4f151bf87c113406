import { type AnyEvent, type EventOf, type RecordedEvent, runStreamId } from "../events/index.js";
import { bufferedSignal, contextOf, foldRun, statusOf } from "../machines/index.js";
import type { RunRow } from "../projections/index.js";
import { CHILD_CHAT_PREFIX } from "./admit.js";
import { errorInfo } from "./attempt.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import { RunWriter } from "./dispatch.js";
import { execute, type RunResult } from "./execute.js";
import type { Claim } from "./Journal.js";
import { storedDigest } from "./json.js";
import { signalResult, timedOutResult } from "./turn.js";

/** Due waits read (and claimed) by one wake pass, at most; the next pass takes the rest. */
export const WAKE_BATCH = 64;

/** How far into the due index one wake pass reads at most, past waits it cannot wake. */
export const WAKE_SCAN_MAX = 4096;

/**
 * Wake the waiting runs that are due (decisions 0050, 0054: a timer, a signal wait's timeout, or a
 * signal recorded for a signal wait, which makes it due at once): found by the due index, claimed like any run
 * (a run another live worker holds is left to it), then woken with `run.woken` and the wait call's
 * outcome in one commit on the version read — a second waker finds the run moved and writes
 * nothing, so a timer fires once — and re-executed from the journal. Only runs whose agent version
 * this runtime has; the executions started are returned.
 */
export const wakeDue = async (
  core: EngineCore,
  nowMs: number = Date.now(),
): Promise<Promise<RunResult>[]> => {
  // Due waits this runtime cannot wake (another agent's, whose runtimes are down; runs live here)
  // must not hide the ones it can: read further into the index, in growing pages, until a batch of
  // wanted runs is found or the index ends (up to WAKE_SCAN_MAX rows a pass).
  const wanted: string[] = [];
  const looked = new Set<string>();
  for (let limit = WAKE_BATCH; ; limit *= 4) {
    const due = await core.journal.dueWaits(nowMs, limit);
    for (const { runId } of due) {
      if (looked.has(runId)) continue;
      looked.add(runId);
      if (core.isLive(runId) || core.closing) continue;
      const row = await core.journal.projection<RunRow>("runs", runId);
      if (row?.status !== "waiting") continue;
      // Only the version that admitted the run executes it (decision 0062): a worker without it
      // does not claim it, and leaves it waiting (agent-version-missing) for one that has it.
      if (!core.agents.ofRef(row.agent)) continue;
      wanted.push(runId);
    }
    if (wanted.length >= WAKE_BATCH || due.length < limit || limit >= WAKE_SCAN_MAX) break;
  }
  if (wanted.length === 0) return [];
  const claims = await core.ownership.claimMany(wanted);
  const started: Promise<RunResult>[] = [];
  for (const runId of wanted) {
    const claim = claims.get(runId);
    if (!claim) continue;
    try {
      const woken = await wakeClaimed(core, runId, claim);
      if (woken) started.push(woken.execution);
    } catch (error) {
      // Moved meanwhile (a cancel won the version), or a journal hiccup: the claim goes back; a
      // run still waiting is found again by the next pass.
      if (!core.isLive(runId)) await core.ownership.release(runId).catch(() => undefined);
      if (!isMoved(error))
        process.emitWarning(
          `run ${runId} could not be woken now (${errorInfo(core.masker, error).message}); the next wake pass tries again`,
          { code: "HOLDFAST_WAKE" },
        );
    }
  }
  return started;
};

/**
 * The failure a denied call records (decision 0057): `ApprovalDenied`, with who denied it and why
 * (both already masked in the `approval.recorded` they come from).
 */
export const deniedError = (events: ReadonlyArray<RecordedEvent>, callId: string) => {
  const denial = events.findLast(
    (e): e is RecordedEvent & { event: EventOf<"approval.recorded"> } =>
      e.event.type === "approval.recorded" && e.event.callId === callId,
  )?.event;
  const by = denial?.decidedBy ?? "";
  const note = denial?.note ?? "";
  return {
    name: "ApprovalDenied",
    message: `${by || "a person"} denied call ${callId}: ${note}`,
    details: { by, note },
  };
};

const isMoved = (error: unknown): boolean => {
  const tag = (error as { _tag?: unknown } | null)?._tag;
  return tag === "WrongExpectedVersion" || tag === "TransitionRejected" || tag === "FencedOut";
};

const wakeClaimed = async (
  core: EngineCore,
  runId: string,
  claim: Claim & { readonly previous: Claim | null },
): Promise<{ readonly execution: Promise<RunResult> } | null> => {
  if (core.isLive(runId)) return null;
  const fence = core.ownership.fence(runId)!;
  const streamId = runStreamId(runId);
  const events = await core.journal.readStream(streamId);
  const fold = foldRun(events.map((e) => e.event));
  const context = contextOf(fold);
  const waiting = context.waiting;
  const now = Date.now();
  const agent = core.agents.get(context.agent.name, context.agent.version);
  // A signal wait takes the oldest buffered signal of its name, whether or not its timeout passed.
  const signal = waiting?.wait === "signal" ? bufferedSignal(context, waiting.name ?? "") : undefined;
  const due = waiting?.dueAt === undefined ? Number.POSITIVE_INFINITY : Date.parse(waiting.dueAt);
  // An approval wait is due once a person decided it (decision 0057).
  const decided = waiting?.wait === "approval" && waiting.decision !== undefined;
  // Woken or ended since the index was read, or not due by this worker's clock: not this pass's.
  if (statusOf(fold) !== "waiting" || !waiting || (!signal && !decided && due > now) || !agent) {
    await core.ownership.release(runId);
    return null;
  }
  const call = context.calls.get(waiting.callId)!;
  const writer = new RunWriter(core.journal, runId, fold, context.machine, fence);
  const previous = claim.previous;
  const opening: AnyEvent[] =
    previous && previous.workerId !== core.workerId
      ? [
          {
            type: "run.claimed",
            runId,
            workerId: core.workerId,
            epoch: claim.epoch,
            previousWorkerId: previous.workerId,
          },
        ]
      : [];
  const received = signal
    ? events.find(
        (e): e is RecordedEvent & { event: EventOf<"signal.received"> } =>
          e.event.type === "signal.received" && e.event.signalId === signal.signalId,
      )?.event
    : undefined;
  // The wait's outcome: a timer's null, the signal taken, or the timeout (decision 0054); an
  // approved call has none yet (its next attempt runs on re-execution), a denied one fails (0057).
  const result = waiting.wait === "timer" ? null : received ? signalResult(received) : timedOutResult();
  crashPoint("before-wake");
  const outcome: ReadonlyArray<AnyEvent> =
    waiting.wait !== "approval"
      ? [
          // A re-execution serves the call from here and never waits again.
          {
            type: "call.completed",
            runId,
            callId: waiting.callId,
            attempt: call.attempt,
            result,
            resultDigest: storedDigest(result),
          },
        ]
      : waiting.decision === "denied"
        ? [
            {
              type: "call.failed",
              runId,
              callId: waiting.callId,
              attempt: call.attempt,
              definite: true,
              error: deniedError(events, waiting.callId),
            },
          ]
        : [];
  await writer.append([
    ...opening,
    ...(signal
      ? [
          {
            type: "signal.consumed",
            runId,
            signalId: signal.signalId,
            name: signal.name,
            callId: waiting.callId,
          } as const,
        ]
      : []),
    {
      type: "run.woken",
      runId,
      wait: waiting.wait,
      callId: waiting.callId,
      ...(waiting.dueAt === undefined ? {} : { dueAt: waiting.dueAt }),
      firedAt: new Date(now).toISOString(),
      by: core.workerId,
    },
    ...outcome,
  ]);
  crashPoint("after-woken");
  if (waiting.wait === "approval") crashPoint("after-approval-wake");
  const admitted = events[0]!.event;
  const input = admitted.type === "run.admitted" ? admitted.input : null;
  const afterVersion = events.at(-1)?.version ?? 0;
  // Children run outside the limit: a parent holding a slot may be waiting for them.
  const limited = !context.chatId.startsWith(CHILD_CHAT_PREFIX);
  const run = async (): Promise<RunResult> =>
    execute(core.executeDeps, {
      agent,
      writer,
      chatId: context.chatId,
      inputId: context.inputId,
      input,
      history: [...events, ...(await core.journal.readStream(streamId, { afterVersion }))],
    });
  return { execution: core.start(runId, run, { limited }) };
};
