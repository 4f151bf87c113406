import type { DecisionKind, HoldReason, RecordedEvent, RetryPolicy } from "../../events/index.js";
import { runStreamId } from "../../events/index.js";
import { type CallStatus, contextOf, foldRun, type RunContext } from "../../machines/index.js";
import type { RunRow } from "../../projections/index.js";
import { RunNotFound } from "../../runtime/errors.js";
import type { JournalReader } from "../../runtime/Journal.js";
import type { NextStep } from "../../runtime/liveness.js";
import { DECISION_MEANINGS, type HeldCommand, heldCommands } from "../cli/commands/decide.js";
import { eventLine, summarizeEvent } from "../cli/eventFormat.js";
import { type LiveRunRow, readLiveness } from "../liveness.js";

/** What the runs list can be filtered by. */
export interface RunsQuery {
  /** A status, or `stalled`: an active run whose owner is provably gone, or that nobody owns. */
  readonly status?: RunRow["status"] | "stalled";
  /** Runs held for this reason (`in-doubt`, `indefinite-failure`, …). */
  readonly holdReason?: HoldReason["code"];
  readonly chat?: string;
  /** An agent's name (any version) or `name@version`. */
  readonly agent?: string;
  /** At most this many (default 50, at most 500). */
  readonly limit?: number;
  /** The `next` of the previous page. */
  readonly cursor?: string;
}

export interface RunsPage {
  readonly runs: ReadonlyArray<LiveRunRow>;
  /** Held runs in the whole journal (the "Needs you" count), whatever the filter. */
  readonly held: number;
  /** Stalled runs in the whole journal (they need someone too), whatever the filter. */
  readonly stalled: number;
  /** The journal's clock when the owners were read (ms since the epoch). */
  readonly now: number;
  readonly total: number;
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly next: string | null;
}

/** Held runs first (oldest first: they have waited longest), then the rest, newest first. */
const order = (a: RunRow, b: RunRow): number => {
  const heldA = a.status === "held" ? 0 : 1;
  const heldB = b.status === "held" ? 0 : 1;
  if (heldA !== heldB) return heldA - heldB;
  if (heldA === 0)
    return a.updatedAt < b.updatedAt ? -1 : a.updatedAt > b.updatedAt ? 1 : a.runId < b.runId ? -1 : 1;
  return a.position !== b.position ? b.position - a.position : a.runId < b.runId ? -1 : 1;
};

/** One page of runs, held first, with the filters applied. The cursor is the offset, opaque to callers. */
export const runsPage = async (journal: JournalReader, query: RunsQuery = {}): Promise<RunsPage> => {
  const liveness = await readLiveness(journal);
  const all = (await journal.projectionRows<RunRow>("runs")).map(liveness.of);
  const held = all.filter((run) => run.status === "held").length;
  const stalled = all.filter((run) => run.stalled).length;
  const matching = all
    .filter(
      (run) =>
        (query.status === undefined ||
          (query.status === "stalled" ? run.stalled : run.status === query.status)) &&
        (query.chat === undefined || run.chatId === query.chat) &&
        (query.agent === undefined || run.agent === query.agent || run.agent.startsWith(`${query.agent}@`)) &&
        (query.holdReason === undefined || run.heldReasons.some((r) => r.code === query.holdReason)),
    )
    .toSorted(order);
  const limit = Math.min(500, Math.max(1, query.limit ?? 50));
  const offset = query.cursor === undefined ? 0 : Number.parseInt(query.cursor, 10);
  const start = Number.isSafeInteger(offset) && offset > 0 ? offset : 0;
  const runs = matching.slice(start, start + limit);
  const next = start + limit < matching.length ? String(start + limit) : null;
  return { runs, held, stalled, now: liveness.now, total: matching.length, next };
};

export interface DecisionChoice {
  readonly decision: DecisionKind;
  /** The same words `holdfast show` prints. */
  readonly meaning: string;
  /** Both confirmations need a note. */
  readonly noteRequired: boolean;
  /** The CLI command that does the same. */
  readonly command: string;
}

export interface CallView {
  readonly callId: string;
  readonly seq: number;
  readonly attempt: number;
  readonly kind: string;
  readonly name: string;
  readonly disposition: string;
  /** Where the call stands as the run's machine folds it. */
  readonly status: CallStatus;
  /** Whether an outcome of its latest attempt is committed in the journal. */
  readonly outcomeCommitted: boolean;
  readonly via: "live" | "reconciled" | "confirmed" | null;
  /** The intent's arguments, as stored (masked). */
  readonly args: unknown;
  /**
   * What the intent recorded for a later check, as stored (masked): a reconciler's probe, or a tool's
   * own (an MCP call's server, version, schema digest and annotations). Null when there is none.
   */
  readonly probe: unknown;
  readonly idempotencyKey: string;
  readonly fingerprint: string;
  /** The digest of the tool's source the intent recorded (the safe list pins it); null for document calls. */
  readonly pin: string | null;
  readonly reconciler: string | null;
  /** What the reconciler answered for this attempt, if it proved anything. */
  readonly evidence: { readonly outcome: string; readonly evidence: unknown } | null;
  readonly error: { readonly name: string; readonly message: string } | null;
  readonly retriesLeft: number;
  /**
   * Every failed attempt of the call, in order: each definite failure (a policy's retries and a
   * grant's alike), and each attempt a replayable model call's policy retried in doubt
   * (`definite: false`: the error proved nothing, the attempt has no outcome).
   */
  readonly failedAttempts: ReadonlyArray<{
    readonly attempt: number;
    readonly definite: boolean;
    readonly name: string;
    readonly message: string;
  }>;
  /** When a retry policy scheduled the next attempt and it has not started yet: its due time (ISO 8601). */
  readonly nextDueAt: string | null;
  /** The retry policy the latest attempt's intent recorded (attempts in all, backoff, `when`); null without one. */
  readonly retryPolicy: RetryPolicy | null;
  /** Why the run is held, for this call. */
  readonly holdReasons: ReadonlyArray<HoldReason>;
  /** When the latest attempt's intent was committed (ISO 8601): search provider logs from here. */
  readonly intendedAt: string | null;
  /**
   * The process that owned the run when that intent was written (the latest `run.claimed` or
   * `run.resumed` before it); null when the process that admitted the run wrote it.
   */
  readonly intendedBy: string | null;
  /** The latest decision a person recorded for this call (who, which, their note); null without one. */
  readonly decided: { readonly decision: DecisionKind; readonly by: string; readonly note: string } | null;
  /** The decisions that apply now (for a call in doubt), in the order `show` prints them. */
  readonly decisions: ReadonlyArray<DecisionChoice>;
  /** A retry grant applies (a definite failure the agent did not handle). */
  readonly retry: { readonly command: string; readonly meaning: string } | null;
}

export interface RunView {
  readonly run: LiveRunRow;
  /** Which runtime continues the run and whether one is live now; null for a held or finished run. */
  readonly next: NextStep | null;
  /**
   * For a held or paused run, what happens once a decision or a resume lets it go on: which runtime
   * continues it and whether one is live now (the confirm page says it before the click).
   */
  readonly whenResumed: NextStep | null;
  /** The journal's clock when the owner was read (ms since the epoch). */
  readonly now: number;
  /** The stream version decisions are based on. */
  readonly version: number;
  readonly calls: ReadonlyArray<CallView>;
  /** Run-level actions of a held run (stop, resume) when no call is in doubt. */
  readonly runActions: ReadonlyArray<{
    readonly decision: DecisionKind;
    readonly meaning: string;
    readonly command: string;
  }>;
  readonly events: ReadonlyArray<ReturnType<typeof eventLine> & { readonly summary: string }>;
  /** Whether the machine could fold the stream (false: corrupt, see the audit). */
  readonly folded: boolean;
  /** The tool call the run awaits a person's approval of (decision 0057); null otherwise. */
  readonly approval: ApprovalView | null;
}

/** A tool call that awaits approval, as an approver sees it: what it does, with what, who asked. */
export interface ApprovalView {
  readonly runId: string;
  readonly callId: string;
  readonly seq: number;
  readonly name: string;
  /** The tool's description, as the intent recorded it. */
  readonly description: string;
  /** The arguments as stored: masked. */
  readonly args: unknown;
  /** Whether the approver may change the arguments. */
  readonly editable: boolean;
  /** Who asked: the run's agent, its chat and input. */
  readonly agent: string;
  readonly chatId: string;
  readonly inputId: string;
  /** When the call started waiting for approval. */
  readonly since: string;
  /** The version an approval is made on. */
  readonly version: number;
}

/** The call a waiting run awaits approval of, from its stream; null when it awaits none. */
export const approvalOf = (
  row: Pick<RunRow, "runId" | "agent" | "chatId" | "inputId" | "status" | "waiting">,
  events: ReadonlyArray<RecordedEvent>,
): ApprovalView | null => {
  if (row.status !== "waiting" || row.waiting?.wait !== "approval") return null;
  const callId = row.waiting.callId;
  const recorded = events.find((e) => e.event.type === "call.intended" && e.event.callId === callId);
  const intent = recorded?.event;
  if (intent?.type !== "call.intended") return null;
  return {
    runId: row.runId,
    callId,
    seq: intent.seq,
    name: intent.name,
    description: intent.approval?.description ?? "",
    args: intent.args,
    editable: intent.approval?.editable ?? false,
    agent: row.agent,
    chatId: row.chatId,
    inputId: row.inputId,
    since: recorded?.recordedAt ?? "",
    version: events.at(-1)?.version ?? 0,
  };
};

const NOTE_REQUIRED: ReadonlySet<DecisionKind> = new Set(["confirmed-completed", "confirmed-not-completed"]);

/** Everything an operator needs to judge a run: each call, its evidence, and what can be decided. */
export const runView = async (journal: JournalReader, runId: string, db?: string): Promise<RunView> => {
  const row = await journal.projection<RunRow>("runs", runId);
  if (!row) throw new RunNotFound({ runId });
  const liveness = await readLiveness(journal);
  const run = liveness.of(row);
  // A waiting run whose agent version is missing says what happens next too (decision 0063).
  const active =
    run.status === "running" || run.status === "interrupted" || run.waitReason === "agent-version-missing";
  const events = await journal.readStream(runStreamId(runId));
  let context: RunContext | null = null;
  try {
    context = contextOf(foldRun(events.map((e) => e.event)));
  } catch {
    context = null;
  }
  const version = events.at(-1)?.version ?? 0;
  const commands: HeldCommand[] =
    run.status === "held" && context ? heldCommands(runId, context, run.heldReasons, db) : [];

  const intents = new Map<string, Extract<RecordedEvent["event"], { type: "call.intended" }>>();
  const evidence = new Map<string, { outcome: string; evidence: unknown }>();
  const errors = new Map<string, { name: string; message: string }>();
  const failures = new Map<
    string,
    Array<{ attempt: number; definite: boolean; name: string; message: string }>
  >();
  const due = new Map<string, string>();
  const committed = new Map<string, boolean>();
  const decided = new Map<string, { decision: DecisionKind; by: string; note: string }>();
  // When each call's latest attempt was intended, and by which process: the latest claim or
  // resumption before it (none: the process that admitted the run, which records no id).
  const intendedAt = new Map<string, { at: string; by: string | null }>();
  let owner: string | null = null;
  for (const { event, recordedAt } of events) {
    if (event.type === "run.claimed") owner = event.workerId;
    else if (event.type === "run.resumed") owner = event.by;
    if (event.type === "call.intended") {
      intendedAt.set(event.callId, { at: recordedAt, by: owner });
      intents.set(event.callId, event);
      due.delete(event.callId);
      committed.set(event.callId, false);
      evidence.delete(event.callId);
      errors.delete(event.callId);
    } else if (event.type === "call.completed" || event.type === "call.failed") {
      if (intents.get(event.callId)?.attempt === event.attempt) committed.set(event.callId, true);
      if (event.type === "call.failed") {
        errors.set(event.callId, { name: event.error.name, message: event.error.message });
        failures.set(event.callId, [
          ...(failures.get(event.callId) ?? []),
          { attempt: event.attempt, definite: true, name: event.error.name, message: event.error.message },
        ]);
      }
    } else if (event.type === "retry.scheduled") {
      due.set(event.callId, event.dueAt);
      if (event.error)
        failures.set(event.callId, [
          ...(failures.get(event.callId) ?? []),
          {
            attempt: event.attempt - 1,
            definite: false,
            name: event.error.name,
            message: event.error.message,
          },
        ]);
    } else if (event.type === "call.reconciled") {
      if (intents.get(event.callId)?.attempt === event.attempt) {
        committed.set(event.callId, true);
        evidence.set(event.callId, { outcome: event.outcome, evidence: event.evidence });
      }
    } else if (event.type === "decision.recorded") {
      for (const call of event.calls) {
        if (call.decision === "confirmed-completed") committed.set(call.callId, true);
        decided.set(call.callId, { decision: call.decision, by: event.decidedBy, note: call.note });
      }
    }
  }

  const calls: CallView[] = [...intents.values()]
    .toSorted((a, b) => a.seq - b.seq)
    .map((intent): CallView => {
      const state = context?.calls.get(intent.callId);
      const decisions = commands
        .filter((c) => c.action === "decide" && c.callId === intent.callId && c.decision !== undefined)
        .map((c) => ({
          decision: c.decision as DecisionKind,
          meaning: c.meaning,
          noteRequired: NOTE_REQUIRED.has(c.decision as DecisionKind),
          command: c.command,
        }));
      const retry = commands.find((c) => c.action === "retry" && c.callId === intent.callId);
      return {
        callId: intent.callId,
        seq: intent.seq,
        attempt: intent.attempt,
        kind: intent.kind,
        name: intent.name,
        disposition: intent.disposition,
        status: state?.status ?? "in-doubt",
        outcomeCommitted: committed.get(intent.callId) ?? false,
        via: state?.via ?? null,
        args: intent.args,
        probe: intent.probe ?? null,
        idempotencyKey: intent.idempotencyKey,
        fingerprint: intent.fingerprint,
        pin: intent.pin,
        reconciler: intent.reconciler,
        evidence: evidence.get(intent.callId) ?? null,
        error: errors.get(intent.callId) ?? null,
        retriesLeft: state?.retriesLeft ?? 0,
        failedAttempts: failures.get(intent.callId) ?? [],
        nextDueAt: due.get(intent.callId) ?? null,
        retryPolicy: intent.retry ?? null,
        holdReasons: run.status === "held" ? run.heldReasons.filter((r) => r.callId === intent.callId) : [],
        decisions,
        retry: retry ? { command: retry.command, meaning: retry.meaning } : null,
        decided: decided.get(intent.callId) ?? null,
        intendedAt: intendedAt.get(intent.callId)?.at ?? null,
        intendedBy: intendedAt.get(intent.callId)?.by ?? null,
      };
    });
  const runActions = commands
    .filter((c) => c.action === "decide" && c.callId === undefined && c.decision !== undefined)
    .map((c) => ({ decision: c.decision as DecisionKind, meaning: c.meaning, command: c.command }));
  return {
    run,
    next: active ? liveness.next(row) : null,
    whenResumed:
      run.status === "held" || run.status === "paused" ? liveness.next(row, { status: "running" }) : null,
    now: liveness.now,
    version,
    calls,
    runActions,
    events: events.map((e) => ({ ...eventLine(e), summary: summarizeEvent(e.event) })),
    folded: context !== null,
    approval: approvalOf(run, events),
  };
};

export { DECISION_MEANINGS };

/**
 * After an action: the run's status as the journal has it now (or as the action says: a cancel or
 * pause requested), and what happens next — the sentence the CLI says too (decision 0053).
 */
export const nextAfter = async (
  journal: JournalReader,
  runId: string,
  status?: string,
): Promise<{ readonly status: string; readonly next: NextStep }> => {
  const row = await journal.projection<RunRow>("runs", runId);
  if (!row) throw new RunNotFound({ runId });
  const liveness = await readLiveness(journal);
  const now = status === "cancel-requested" || status === "pause-requested" ? status : row.status;
  return { status: now, next: liveness.next(row, { status: now }) };
};
