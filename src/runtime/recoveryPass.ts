import { type AnyEvent, EventDecryptError, type HoldReason, runStreamId } from "../events/index.js";
import { blockingCalls, type CallState, contextOf, statusOf } from "../machines/index.js";
import type { RunRow } from "../projections/index.js";
import { CHILD_CHAT_PREFIX } from "./admit.js";
import { agentRef, parseAgentRef } from "./agents.js";
import { errorInfo, settledAttempts } from "./attempt.js";
import type { EngineCore } from "./core.js";
import { crashPoint } from "./crash.js";
import { RunWriter } from "./dispatch.js";
import { execute, type RunResult } from "./execute.js";
import { handled } from "./handled.js";
import type { Claim, Fence } from "./Journal.js";
import { Limiter } from "./limiter.js";
import { admitNextQueued } from "./queue.js";
import {
  asksReconciler,
  type Classification,
  classifyInDoubt,
  crashLoopReason,
  inspectRun,
  interruptionsSinceProgress,
  isProgress,
  latestIntents,
  replayWithheldReason,
} from "./recover.js";

/** What a recovery pass did: runs interrupted, resumed, held, replayed, reconciled, left to others. */
export interface RecoveryReport {
  /** Runs found active with no live owner. */
  readonly interrupted: ReadonlyArray<string>;
  readonly resumed: ReadonlyArray<string>;
  readonly held: ReadonlyArray<{ readonly runId: string; readonly reasons: ReadonlyArray<HoldReason> }>;
  /** Active runs another live worker owns: left alone. */
  readonly ownedElsewhere: ReadonlyArray<string>;
  /**
   * Active runs this runtime cannot execute (their agent is not registered here): left alone, for a
   * runtime that has the agent — a reader, an operator or another application never recovers them.
   */
  readonly notHere: ReadonlyArray<{ readonly runId: string; readonly agent: string }>;
  /**
   * Active runs whose agent this runtime has, but not the version that admitted them (decision
   * 0062): left alone, never executed on other code nor failed — they wait (`agent-version-missing`)
   * for a runtime with that version. `registered`: the versions this runtime has.
   */
  readonly versionMissing: ReadonlyArray<{
    readonly runId: string;
    readonly agent: string;
    readonly registered: ReadonlyArray<string>;
  }>;
  /** Runs that cannot be folded, classified or resumed; they stay active and block their chat. */
  readonly needsAttention: ReadonlyArray<{ readonly runId: string; readonly reason: string }>;
  /** In-doubt calls authorized to run again (safe list with matching pins, or an idempotent child). */
  readonly replayed: ReadonlyArray<string>;
  /** In-doubt calls an adapter explained. */
  readonly reconciled: ReadonlyArray<string>;
}

type Part = {
  -readonly [K in keyof RecoveryReport]: Array<RecoveryReport[K] extends ReadonlyArray<infer T> ? T : never>;
};

const emptyPart = (): Part => ({
  interrupted: [],
  resumed: [],
  held: [],
  ownedElsewhere: [],
  notHere: [],
  versionMissing: [],
  needsAttention: [],
  replayed: [],
  reconciled: [],
});

/**
 * Runs inspected and classified at once by one recovery pass. Their verdicts share commits through
 * group commit, so the more runs in flight, the fewer commits per run: a pass over 10,000 of the
 * bench's interrupted runs returned at 398 µs per run with 8 and 270 µs with 32
 * (docs/performance.md, "4 December").
 */
const PASS_CONCURRENCY = 32;

/**
 * The events of the runs being classified at once, at most (a longer run is classified alone):
 * inspecting a run holds its whole stream, and the pass holds no more than eight runs of ~2,000
 * events each did before it classified 32 at once.
 */
const PASS_EVENTS = 16_384;

/**
 * Reconcilers asked at once by one pass: the only classification that leaves the process (an
 * adapter asks another system what happened), kept to what the pass asked before it classified
 * more runs at once.
 */
const RECONCILER_CONCURRENCY = 8;

/**
 * Runs a pass claims in one transaction before inspecting them: a claim is a commit, and one per
 * run was most of a pass's cost (issue 15). The runs of a batch are owned (and renewed) from their
 * claim until each is settled, as they were one at a time.
 */
const CLAIM_BATCH = 64;

/**
 * Recovery (DESIGN §6): every active run with no live owner whose agent this runtime has is
 * claimed (and renewed from then on), checked (chain, fold, checkpoint), marked interrupted, and
 * each in-doubt call is classified: replay (safe list + pins), reconcile (an adapter proves it), or
 * hold. Runs with nothing held re-execute their agent from the top, served from the journal up to
 * the frontier. One run's failure holds or flags that run only; the pass goes on.
 */
export const recoverRuns = async (
  core: EngineCore,
): Promise<RecoveryReport & { readonly done: Promise<ReadonlyArray<RunResult>> }> => {
  const started: Promise<RunResult>[] = [];
  const limiter = new Limiter(PASS_CONCURRENCY, PASS_EVENTS);
  const reconcilers = new Limiter(RECONCILER_CONCURRENCY);
  // What each run to claim weighs in the pass's budget: about its events (its runs row's version).
  const weights = new Map<string, number>();
  const runIds = await core.journal.activeRuns();
  const parts = runIds.map(emptyPart);
  // What a run's failure leaves: the run flagged, its claim let go; the pass goes on.
  const failed = async (runId: string, part: Part, error: unknown): Promise<void> => {
    // A key that cannot open the events is this process's configuration, not one run's fault.
    if (error instanceof EventDecryptError) throw error;
    await core.ownership.release(runId);
    part.needsAttention.push({
      runId,
      reason: `recovery failed: ${errorInfo(core.masker, error).message}`,
    });
  };
  for (let from = 0; from < runIds.length; from += CLAIM_BATCH) {
    const batch = runIds
      .slice(from, from + CLAIM_BATCH)
      .map((runId, k) => ({ runId, part: parts[from + k]! }));
    // Which runs to claim: the checks that need no claim run first, as many at a time as the pass classifies.
    const wanted = await Promise.allSettled(
      batch.map(({ runId, part }) =>
        limiter.run(async () => {
          try {
            const events = await needsClaim(core, runId, part);
            if (events === null) return null;
            weights.set(runId, events);
            return runId;
          } catch (error) {
            await failed(runId, part, error);
            return null;
          }
        }),
      ),
    );
    const rejected = wanted.find((r) => r.status === "rejected");
    if (rejected) throw rejected.reason;
    const toClaim = wanted.flatMap((r) => (r.status === "fulfilled" && r.value !== null ? [r.value] : []));
    let claims: ReadonlyMap<string, Claim & { readonly previous: Claim | null }>;
    try {
      claims = await core.ownership.claimMany(toClaim);
    } catch (error) {
      // The batch's claims failed together: each run is flagged, as when its own claim failed.
      for (const { runId, part } of batch) if (toClaim.includes(runId)) await failed(runId, part, error);
      continue;
    }
    const settled = await Promise.allSettled(
      batch.map(({ runId, part }) =>
        limiter.run(async () => {
          if (!toClaim.includes(runId)) return;
          const claim = claims.get(runId);
          if (!claim) {
            part.ownedElsewhere.push(runId);
            return;
          }
          try {
            const resumed = await recoverClaimed(core, runId, claim, part, reconcilers);
            if (resumed) started.push(resumed.execution);
          } catch (error) {
            await failed(runId, part, error);
          }
        }, weights.get(runId) ?? 0),
      ),
    );
    const failure = settled.find((r) => r.status === "rejected");
    if (failure) {
      // The pass stops (a key that cannot open the events): the batch's runs not started go back.
      await Promise.all(
        [...claims.keys()]
          .filter((runId) => !core.isLive(runId))
          .map((runId) => core.ownership.release(runId)),
      );
      throw failure.reason;
    }
  }
  // Chats whose run ended with inputs queued behind it, whose next input nobody admitted (the
  // process that ended the run died first): found by index, admitted here (decision 0045).
  for (const chatId of await core.journal.idleQueues()) {
    try {
      const runId = await admitNextQueued(core, chatId);
      if (runId) started.push(core.wait(runId));
    } catch (error) {
      // One chat's queue failing stays with that chat: the pass goes on, the next pass tries again.
      process.emitWarning(
        `the next queued input of chat ${chatId} could not be admitted by this recovery pass (${errorInfo(core.masker, error).message}); the next pass tries again`,
        { code: "HOLDFAST_QUEUE_ADMIT" },
      );
    }
  }
  const report = emptyPart();
  for (const part of parts) {
    for (const key of Object.keys(report) as Array<keyof Part>) (report[key] as unknown[]).push(...part[key]);
  }
  return { ...report, done: handled(Promise.all(started)) };
};

/**
 * Whether a run is one for this runtime to claim and recover: about how many events it has (its runs
 * row's version; inspecting it holds them all), or null, and what it is otherwise goes in `part`.
 */
const needsClaim = async (core: EngineCore, runId: string, part: Part): Promise<number | null> => {
  if (core.isLive(runId)) return null;
  const row = await core.journal.projection<RunRow>("runs", runId);
  // Only a runtime that has the agents to execute a run recovers it: its tools and reconcilers
  // are what classify the run's calls, and nobody else should hold what they would reconcile.
  // Only the version that admitted a run executes it (decision 0062).
  if (row && !core.agents.ofRef(row.agent)) {
    notExecutableHere(core, part, runId, row.agent);
    return null;
  }
  // A held run waits for a person: nothing to recover, so it is not claimed, read and released on
  // every pass (its row is written in the same transaction as its events) — unless this worker or
  // a dead one still holds it: the claim below then lets that go.
  if (row?.status === "held" && !row.needsAttention) {
    const owner = await core.journal.currentClaim(runId);
    if (!owner || core.ownership.heldByAnotherLiveWorker(owner.workerId)) {
      part.held.push({ runId, reasons: row.heldReasons });
      return null;
    }
  }
  // A paused run waits for `resume` (decision 0044): recovery never resumes it.
  if (row?.status === "paused") return null;
  // A waiting run is woken by the due index when its time comes, not by recovery (decision 0050).
  if (row?.status === "waiting") return null;
  // A run without a row is of unknown length: it is classified alone.
  return row ? row.version : PASS_EVENTS;
};

/** A run this runtime leaves alone: its agent is not here at all, or not in the version that admitted it. */
const notExecutableHere = (core: EngineCore, part: Part, runId: string, agent: string): void => {
  const { name } = parseAgentRef(agent);
  if (core.agents.has(name))
    part.versionMissing.push({ runId, agent, registered: core.agents.versions(name) });
  else part.notHere.push({ runId, agent });
};

/** Recover one run this worker has just claimed; the execution it starts, if it resumes. */
const recoverClaimed = async (
  core: EngineCore,
  runId: string,
  claim: Claim & { readonly previous: Claim | null },
  part: Part,
  reconcilers: Limiter,
): Promise<{ readonly execution: Promise<RunResult> } | null> => {
  // Started meanwhile by this runtime (a decision, a submit): it is that execution's now.
  if (core.isLive(runId)) return null;
  const fence = core.ownership.fence(runId)!;

  // Law 11: corruption is surfaced, not repaired; the run stays active and blocks its chat.
  let inspected: ReturnType<typeof inspectRun>;
  try {
    inspected = inspectRun(await core.journal.readStreamRows(runStreamId(runId)), core.journal.keyring);
  } catch (error) {
    if (error instanceof EventDecryptError) {
      await core.ownership.release(runId);
      throw error;
    }
    inspected = { corrupt: error instanceof Error ? error.message : String(error) };
  }
  if ("corrupt" in inspected) {
    await markCorrupt(core, runId, inspected.corrupt, fence);
    part.needsAttention.push({ runId, reason: inspected.corrupt });
    await core.ownership.release(runId);
    return null;
  }
  const { fold, events } = inspected;
  const status = statusOf(fold);
  if (
    status === "held" ||
    status === "paused" ||
    status === "waiting" ||
    status === "completed" ||
    status === "failed" ||
    status === "stopped" ||
    status === "cancelled"
  ) {
    // Held: waits for a person. Finished: it ended after the active runs were listed.
    if (status === "held") part.held.push({ runId, reasons: contextOf(fold).heldReasons });
    await core.ownership.release(runId);
    return null;
  }
  const agent = core.agents.get(contextOf(fold).agent.name, contextOf(fold).agent.version);
  // A cancel or pause is carried out without executing the agent (decisions 0043, 0044).
  const { cancelRequested, pauseRequested } = contextOf(fold);
  const control = cancelRequested ?? pauseRequested;
  if (!agent && !control) {
    notExecutableHere(core, part, runId, agentRef(contextOf(fold).agent));
    await core.ownership.release(runId);
    return null;
  }
  const writer = new RunWriter(core.journal, runId, fold, contextOf(fold).machine, fence);
  // What recovery records before its verdict: a take-over (from here on the previous owner's
  // appends are fenced out) and the interruption of a run that was running.
  const opening: AnyEvent[] = [];
  const previous = claim.previous;
  if (previous && previous.workerId !== core.workerId)
    opening.push({
      type: "run.claimed",
      runId,
      workerId: core.workerId,
      epoch: claim.epoch,
      previousWorkerId: previous.workerId,
    });
  const interrupted = statusOf(fold) === "running";
  // This process stopped the run's execution itself for a journal outage and takes it back with
  // nobody in between: no process died, so the interruption is not counted (decision 0086).
  const forJournal = core.stoppedForJournal(runId, claim);
  if (interrupted)
    opening.push({
      type: "run.interrupted",
      runId,
      detectedBy: core.workerId,
      inDoubt: blockingCalls(contextOf(fold)).map((c) => c.callId),
      ...(forJournal ? { cause: "journal-unavailable" as const } : {}),
    });
  // The crash-loop cap (DESIGN §13), counted from the events and this interruption before any
  // verdict is recorded: a run at the cap is held instead of having a call authorized to run again.
  let interruptions = interruptionsSinceProgress(events);
  if (interrupted && !forJournal) interruptions.push({ at: new Date().toISOString(), by: core.workerId });
  // The opening goes in its own commit when a verdict needs more than the journal and the registry
  // (an adapter asked, a call authorized): it is on record before anything is asked or replayed.
  // When every in-doubt call is held, or none is in doubt, it goes in one commit with the verdict
  // (decision 0029): nothing happens between the two that a crash could leave half done.
  const recordOpening = async (): Promise<void> => {
    if (opening.length === 0) return;
    const interrupted = opening.some((e) => e.type === "run.interrupted");
    await writer.append(opening.splice(0));
    if (interrupted) crashPoint("after-interrupted");
  };
  const closing = async (verdict: AnyEvent, settles: boolean): Promise<void> => {
    const interrupted = opening.some((e) => e.type === "run.interrupted");
    const events = [...opening.splice(0), verdict];
    if (settles) {
      // A held run is settled by its verdict: the claim goes in the same commit.
      await writer.appendAndRelease(events);
      core.ownership.forget(runId, fence.epoch);
    } else await writer.append(events);
    if (interrupted) crashPoint("after-interrupted");
  };
  part.interrupted.push(runId);

  const intents = latestIntents(events);
  const holds: HoldReason[] = [];
  // Replays wait until every reconciler has answered: a call proved completed moves the run on
  // (the count starts again), and only then is it known whether the run is at the cap.
  const replays: Array<{ readonly call: CallState; readonly events: ReadonlyArray<AnyEvent> }> = [];
  const inDoubt = blockingCalls(contextOf(fold));
  if (inDoubt.some((call) => intents.has(call.callId) && asksReconciler(call, core.tools)))
    await recordOpening();
  for (const call of inDoubt) {
    const intent = intents.get(call.callId);
    const classify = (found: NonNullable<typeof intent>) =>
      classifyInDoubt(call, found, {
        tools: core.tools,
        allowlist: core.allowlist,
        masker: core.masker,
        fingerprintKey: core.journal.fingerprintKey,
        // Each reconciler answers within half a lease; the heartbeat renews the claim meanwhile.
        maxReconcileMs: Math.floor(core.leaseMs / 2),
      });
    const decided: Classification = intent
      ? await (asksReconciler(call, core.tools) ? reconcilers.run(() => classify(intent)) : classify(intent))
      : {
          kind: "hold",
          reason: { code: "corrupt", callId: call.callId, detail: "the call has no intent event" },
        };
    if (decided.kind === "hold") {
      holds.push(decided.reason);
      continue;
    }
    if (decided.note === "replayed") {
      replays.push({ call, events: decided.events });
      continue;
    }
    await recordOpening();
    await writer.append(decided.events);
    part.reconciled.push(call.callId);
    // The reconciler's verdict is durable: its clean-up may run now. A re-execution would run it
    // too, but a cancel or a pause carried out below never re-executes, and the attempt's receipts
    // (a command's output, which may hold a secret) would stay behind.
    const reconciler = asksReconciler(call, core.tools) ? core.tools.get(call.name)?.reconciler : undefined;
    if (reconciler?.settled && intent)
      settledAttempts(
        { name: call.name, settled: reconciler.settled },
        runId,
        call.callId,
        intent.attempt,
        intent.attempt,
      );
    if (decided.events.some(isProgress)) interruptions = [];
  }
  if (control) {
    // Nothing is re-executed, so the crash-loop cap does not apply: a call allowed to run again is
    // authorized (it blocks nothing), and what stays in doubt holds the run.
    for (const replay of replays) {
      await recordOpening();
      await writer.append(replay.events);
      part.replayed.push(replay.call.callId);
    }
    if (holds.length > 0) {
      const reasons = cancelRequested
        ? holds.map(
            (r): HoldReason =>
              r.callId === undefined
                ? r
                : {
                    code: "cancelled-in-doubt",
                    callId: r.callId,
                    detail: `cancelled by ${cancelRequested.by} while the call was in doubt: ${r.detail}`,
                  },
          )
        : holds;
      await closing({ type: "run.held", runId, reasons: [reasons[0]!, ...reasons.slice(1)] }, true);
      part.held.push({ runId, reasons });
      return null;
    }
    await closing(
      cancelRequested
        ? { type: "run.cancelled", runId, by: cancelRequested.by, note: cancelRequested.note }
        : { type: "run.paused", runId },
      true,
    );
    return null;
  }
  if (!agent) throw new Error(`agent "${agentRef(contextOf(fold).agent)}" is not registered here`);
  if (interruptions.length >= core.maxInterruptions) {
    holds.unshift(crashLoopReason(interruptions));
    for (const { call } of replays) holds.push(replayWithheldReason(call));
  } else
    for (const replay of replays) {
      await recordOpening();
      await writer.append(replay.events);
      part.replayed.push(replay.call.callId);
      crashPoint("after-replay-authorized");
    }
  if (holds.length > 0) {
    await closing({ type: "run.held", runId, reasons: [holds[0]!, ...holds.slice(1)] }, true);
    part.held.push({ runId, reasons: holds });
    return null;
  }
  await closing({ type: "run.resumed", runId, by: core.workerId }, false);
  const context = contextOf(writer.fold);
  part.resumed.push(runId);
  const admitted = events[0]!.event;
  const input = admitted.type === "run.admitted" ? admitted.input : null;
  // Children run outside the limit: a parent holding a slot may be waiting for them.
  const limited = !context.chatId.startsWith(CHILD_CHAT_PREFIX);
  // A child starts now: the events inspected, then what was appended since (this pass's own events,
  // or any other) — history never changes, so only the stream's tail is read and decoded again. A
  // limited run may wait long for its slot (a pass can leave thousands waiting for two), so it reads
  // its history when it gets one rather than holding the inspected events until then.
  const served = limited ? null : events;
  const afterVersion = events.at(-1)?.version ?? 0;
  const run = async () =>
    execute(core.executeDeps, {
      agent,
      writer,
      chatId: context.chatId,
      inputId: context.inputId,
      input,
      history: served
        ? [...served, ...(await core.journal.readStream(runStreamId(runId), { afterVersion }))]
        : await core.journal.readStream(runStreamId(runId)),
    });
  return { execution: core.start(runId, run, { limited }) };
};

/** Record that a run cannot be trusted (once), without the machine: it cannot fold the stream. */
const markCorrupt = async (core: EngineCore, runId: string, reason: string, fence: Fence): Promise<void> => {
  const row = await core.journal.projection<RunRow>("runs", runId);
  if (row?.needsAttention) return;
  const head = await core.journal.streamHead(runStreamId(runId));
  if (!head) return;
  try {
    await core.journal.append({
      streamId: runStreamId(runId),
      expectedVersion: head.version,
      events: [{ type: "run.held", runId, reasons: [{ code: "corrupt", detail: reason }] }],
      fence,
    });
  } catch {
    // Not writable (or the projection cannot follow a broken stream): the report still names it.
  }
};

/**
 * Recover one run now, if no live worker owns it (a cancel or pause of a run whose owner is gone,
 * decisions 0043 and 0044): false when another live worker holds it, which then carries the
 * request out itself.
 */
export const recoverRun = async (core: EngineCore, runId: string): Promise<boolean> => {
  if (core.isLive(runId)) return false;
  const claim = (await core.ownership.claimMany([runId])).get(runId);
  if (!claim) return false;
  const part = emptyPart();
  try {
    await recoverClaimed(core, runId, claim, part, new Limiter(1));
  } catch (error) {
    if (!core.isLive(runId)) await core.ownership.release(runId);
    throw error;
  }
  return true;
};
