import type { DecisionKind, HoldReason, RecordedEvent, RetryPolicy } from "../../../events/index.js";
import { type CallStatus, contextOf, type RunContext } from "../../../machines/index.js";
import type { RunRow } from "../../../projections/index.js";
import { RunNotFound } from "../../../runtime/errors.js";
import type { JournalReader, RunSearch, RunSearchKey } from "../../../runtime/Journal.js";
import type { NextStep } from "../../../runtime/liveness.js";
import { type LiveRunRow, readLiveness } from "../../liveness.js";
import { DECISION_MEANINGS, type HeldCommand, heldCommands } from "../cli/commands/decide.js";
import { eventLine, summarizeEvent } from "../cli/eventFormat.js";
import { readRun } from "./runStreams.js";

/** What the runs list can be searched by (decision 0073). Every field narrows. */
export interface RunsQuery {
  /** Runs whose id starts with this. */
  readonly id?: string;
  /** A status, or `stalled`: an active run whose owner is provably gone, or that nobody owns. */
  readonly status?: RunRow["status"] | "stalled";
  /** Held runs held for this reason (`in-doubt`, `indefinite-failure`, …). */
  readonly holdReason?: HoldReason["code"];
  /** The chat id, exactly. */
  readonly chat?: string;
  /** An agent's name (any version) or `name@version`. */
  readonly agent?: string;
  /** Runs admitted (or, with `time: "updated"`, last changed) at this time or after (ISO 8601). */
  readonly from?: string;
  /** … and before this time (ISO 8601). */
  readonly to?: string;
  /** Which time `from` and `to` bound: `created` (admission, the default) or `updated`. */
  readonly time?: "created" | "updated";
  /** At most this many (default 50, at most 500). */
  readonly limit?: number;
  /** The `next` or `prev` of a page: the page after it, or before it. */
  readonly cursor?: string;
}

/** One page of the runs list: newest admitted first, keyset-paged both ways. */
export interface RunsPage {
  readonly runs: ReadonlyArray<LiveRunRow>;
  /**
   * Held runs in the whole journal (the "Needs you" count), whatever the filter, counted up to
   * {@link COUNT_CAP}; past it, `heldCapped`.
   */
  readonly held: number;
  /** Whether more than {@link COUNT_CAP} runs are held (`held` is then the cap). */
  readonly heldCapped: boolean;
  /** Stalled runs in the whole journal (they need someone too), whatever the filter, up to {@link COUNT_CAP}. */
  readonly stalled: number;
  /** Whether more than {@link COUNT_CAP} runs are stalled (`stalled` is then the cap). */
  readonly stalledCapped: boolean;
  /** The journal's clock when the owners were read (ms since the epoch). */
  readonly now: number;
  /** Runs matching the filter, counted up to {@link COUNT_CAP}; past it, `totalCapped`. */
  readonly total: number;
  /** Whether more than {@link COUNT_CAP} runs match (`total` is then the cap). */
  readonly totalCapped: boolean;
  /** Pass as `cursor` for the next (older) page; null on the last one. */
  readonly next: string | null;
  /** Pass as `cursor` for the previous (newer) page; null on the first one. */
  readonly prev: string | null;
}

/**
 * Every count of a runs page — the runs matching its search, the held and the stalled ones — goes
 * up to this many; past it the runs list says "more than" (decision 0090: a count reads every row
 * it counts, on every page; the exact figures by status are `/metrics`').
 */
export const COUNT_CAP = 100;

/** A runs list query that cannot be answered: which field, and what is accepted. */
export class InvalidRunsQuery extends Error {
  override readonly name = "InvalidRunsQuery";
  constructor(
    readonly field: string,
    detail: string,
  ) {
    super(`${field}: ${detail}`);
  }
}

/** Statuses whose runs can be stalled (`runtime/liveness`: only these have an owner to look at). */
const OWNED_STATUSES = ["running", "interrupted"] as const;

/** A cursor: the direction and the run it is relative to, opaque to callers (base64url JSON). */
const encodeCursor = (direction: "n" | "p", key: RunSearchKey): string =>
  Buffer.from(JSON.stringify([direction, key.createdAt, key.runId])).toString("base64url");

const decodeCursor = (cursor: string): { direction: "n" | "p"; key: RunSearchKey } => {
  try {
    const parsed: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (
      Array.isArray(parsed) &&
      parsed.length === 3 &&
      (parsed[0] === "n" || parsed[0] === "p") &&
      typeof parsed[1] === "string" &&
      typeof parsed[2] === "string"
    )
      return { direction: parsed[0], key: { createdAt: parsed[1], runId: parsed[2] } };
  } catch {
    // Said below.
  }
  throw new InvalidRunsQuery(
    "cursor",
    "is not a cursor of the runs list; pass the `next` or `prev` of a page as it was given, or leave it out for the first page",
  );
};

/** A time bound as the index stores times (UTC ISO 8601, milliseconds). */
const instant = (field: string, text: string | undefined): string | undefined => {
  if (text === undefined || text.trim() === "") return undefined;
  const ms = Date.parse(text.trim());
  if (Number.isNaN(ms))
    throw new InvalidRunsQuery(
      field,
      `${JSON.stringify(text)} is not a time; give an ISO 8601 time such as 2026-12-05T06:00:00Z, or a date such as 2026-12-05 (UTC midnight)`,
    );
  return new Date(ms).toISOString();
};

/**
 * The search of the run index a query makes, without paging: the chat by its index keys (its id,
 * and its keyed digests on a sealed journal), `stalled` as the owned statuses less the runs a live
 * owner runs.
 */
const searchOf = (journal: JournalReader, query: RunsQuery, liveOwned: ReadonlyArray<string>): RunSearch => {
  const agent = query.agent?.trim();
  const at = agent ? agent.lastIndexOf("@") : -1;
  const from = instant("from", query.from);
  const to = instant("to", query.to);
  const statuses =
    query.status === "stalled"
      ? [...OWNED_STATUSES]
      : query.status !== undefined
        ? [query.status]
        : query.holdReason !== undefined
          ? ["held"]
          : undefined;
  return {
    limit: 0,
    ...(query.id?.trim() ? { idPrefix: query.id.trim() } : {}),
    ...(query.chat !== undefined && query.chat !== ""
      ? { chatKeys: [query.chat, ...(journal.keyring?.searchDigests(query.chat) ?? [])] }
      : {}),
    ...(agent
      ? { agent: at > 0 ? { name: agent.slice(0, at), version: agent.slice(at + 1) } : { name: agent } }
      : {}),
    ...(statuses ? { statuses } : {}),
    ...(query.status === "stalled" ? { notRunIds: liveOwned } : {}),
    ...(query.time === "updated" ? { timeOf: "updated" as const } : {}),
    ...(from === undefined ? {} : { from }),
    ...(to === undefined ? {} : { to }),
  };
};

/**
 * One page of runs, newest admitted first, with the filters applied, from the run index (decision
 * 0073): reads the page's rows and three bounded counts (decision 0090), never every run. Held and stalled runs have their
 * own sections in the panel ("Needs you"); here they stand in the order with the rest, so a page
 * never moves under the reader. `holdReason` is checked on the held rows read (it is sealed with the
 * row), so a page may read further than its length to fill it.
 */
export const runsPage = async (journal: JournalReader, query: RunsQuery = {}): Promise<RunsPage> => {
  const liveness = await readLiveness(journal);
  const liveOwned = liveness.liveOwned();
  const search = searchOf(journal, query, liveOwned);
  const limit = Math.min(500, Math.max(1, Math.trunc(query.limit ?? 50)));
  const cursor = query.cursor ? decodeCursor(query.cursor) : null;
  const backwards = cursor?.direction === "p";
  const keep = (run: LiveRunRow): boolean =>
    (query.status !== "stalled" || run.stalled) &&
    (query.holdReason === undefined || run.heldReasons.some((r) => r.code === query.holdReason));

  const found: Array<{ key: RunSearchKey; run: LiveRunRow }> = [];
  let bound = cursor?.key;
  let more = false;
  // One read fills the page, unless rows the index cannot tell apart (a hold reason) are left out.
  for (;;) {
    const result = await journal.searchRuns({
      ...search,
      limit: limit + 1 - found.length,
      ...(bound ? (backwards ? { before: bound } : { after: bound }) : {}),
    });
    const rows = backwards ? [...result.rows].reverse() : result.rows;
    for (const { key, row } of rows) {
      const run = liveness.of(row);
      if (keep(run)) found.push({ key, run });
    }
    bound = rows.at(-1)?.key;
    if (found.length > limit || !result.more || !bound) {
      more = found.length > limit || (found.length === limit && result.more);
      break;
    }
  }
  const page = found.slice(0, limit);
  if (backwards) page.reverse();
  const first = page.at(0);
  const last = page.at(-1);
  // Forward: a previous page exists when this one was reached by a cursor; backward: a next one does.
  const olderExists = backwards ? cursor !== null : more;
  const newerExists = backwards ? more : cursor !== null;
  const [total, held, stalled] = await journal.countRuns([
    { ...search, limit: COUNT_CAP },
    { limit: COUNT_CAP, statuses: ["held"] },
    { limit: COUNT_CAP, statuses: [...OWNED_STATUSES], notRunIds: liveOwned },
  ]);
  return {
    runs: page.map((p) => p.run),
    held: Math.min(held ?? 0, COUNT_CAP),
    heldCapped: (held ?? 0) > COUNT_CAP,
    stalled: Math.min(stalled ?? 0, COUNT_CAP),
    stalledCapped: (stalled ?? 0) > COUNT_CAP,
    now: liveness.now,
    total: Math.min(total ?? 0, COUNT_CAP),
    totalCapped: (total ?? 0) > COUNT_CAP,
    next: olderExists && last ? encodeCursor("n", last.key) : null,
    prev: newerExists && first ? encodeCursor("p", first.key) : null,
  };
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
  /** Where a person looks to learn whether the call happened, as the tool declared it (masked); null: none. */
  readonly checkHint: string | null;
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
  /**
   * Every call, in call order: the cards of the calls in doubt and the decision pages look calls up
   * here. What a page shows of them is {@link RunView.callPage} (the API sends only those).
   */
  readonly calls: ReadonlyArray<CallView>;
  /** The calls a page shows: those from `callPage.from` (a `seq`) on. */
  readonly callPage: PageOf;
  /** Run-level actions of a held run (stop, resume) when no call is in doubt. */
  readonly runActions: ReadonlyArray<{
    readonly decision: DecisionKind;
    readonly meaning: string;
    readonly command: string;
  }>;
  /** The events a page shows, in version order: those from `eventPage.from` (a version) to the last. */
  readonly events: ReadonlyArray<ReturnType<typeof eventLine> & { readonly summary: string }>;
  readonly eventPage: PageOf;
  /** The page asked for (a run page's live refresh asks for the same one). */
  readonly window: RunWindow;
  /** The position of the stream's last event (where the page's live updates start after). */
  readonly lastPosition: number;
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

/**
 * Which part of a long list a run page shows (decision 0088): the newest `limit` items, or those from
 * a key on; `earlier` is the `from` of the page with `limit` more before them, null when there are none.
 */
export interface PageOf {
  /** The key (a call's `seq`, an event's version) of the first item shown. */
  readonly from: number;
  /** The items in all. */
  readonly total: number;
  /** The `from` that shows `limit` more items before these; null: these start at the first. */
  readonly earlier: number | null;
}

/** What part of a run to show: all of it, or its calls and events from a key on (default: the newest). */
export interface RunWindow {
  /** Every call and every event (the API's `?calls=all`). */
  readonly all?: boolean;
  /** Show the calls from this `seq` on. */
  readonly callsFrom?: number;
  /** Show the events from this version on. */
  readonly eventsFrom?: number;
}

/** Calls a run page shows at first, and how many more each "earlier" adds. */
export const CALLS_PER_PAGE = 50;
/** Events of the timeline a run page shows at first (a call is two events), and per "earlier". */
export const EVENTS_PER_PAGE = 100;

/**
 * The index in `keys` (ascending) where a page starts: at `from` when given, else `limit` from the
 * end; and the `from` of the page before it.
 */
const pageOf = (
  keys: ReadonlyArray<number>,
  limit: number,
  all: boolean,
  from: number | undefined,
): { start: number; page: PageOf } => {
  let start = 0;
  if (!all) {
    if (from === undefined) start = Math.max(0, keys.length - limit);
    else {
      // The first key at or after `from` (keys ascend).
      let lo = 0;
      let hi = keys.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (keys[mid]! < from) lo = mid + 1;
        else hi = mid;
      }
      start = lo;
    }
  }
  return {
    start,
    page: {
      from: keys[start] ?? from ?? 0,
      total: keys.length,
      earlier: start === 0 ? null : keys[Math.max(0, start - limit)]!,
    },
  };
};

/**
 * Everything an operator needs to judge a run: each call, its evidence, and what can be decided;
 * the events of the page `window` asks for (the newest by default, decision 0088).
 */
export const runView = async (
  journal: JournalReader,
  runId: string,
  db?: string,
  window: RunWindow = {},
): Promise<RunView> => {
  const row = await journal.projection<RunRow>("runs", runId);
  if (!row) throw new RunNotFound({ runId });
  const liveness = await readLiveness(journal);
  const run = liveness.of(row);
  // A waiting run whose agent version is missing says what happens next too (decision 0063).
  const active =
    run.status === "running" || run.status === "interrupted" || run.waitReason === "agent-version-missing";
  const { events, fold } = await readRun(journal, runId);
  const context: RunContext | null = fold === null ? null : contextOf(fold);
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
        checkHint: intent.checkHint ?? null,
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
  const callPage = pageOf(
    calls.map((c) => c.seq),
    CALLS_PER_PAGE,
    window.all === true,
    window.callsFrom,
  ).page;
  const eventWindow = pageOf(
    events.map((e) => e.version),
    EVENTS_PER_PAGE,
    window.all === true,
    window.eventsFrom,
  );
  return {
    run,
    next: active ? liveness.next(row) : null,
    whenResumed:
      run.status === "held" || run.status === "paused" ? liveness.next(row, { status: "running" }) : null,
    now: liveness.now,
    version,
    calls,
    runActions,
    callPage,
    events: events
      .slice(eventWindow.start)
      .map((e) => ({ ...eventLine(e), summary: summarizeEvent(e.event) })),
    eventPage: eventWindow.page,
    window,
    lastPosition: events.at(-1)?.position ?? 0,
    folded: context !== null,
    approval: approvalOf(run, events),
  };
};

/** The calls of the view's page (`callPage`), in call order. */
export const shownCalls = (view: Pick<RunView, "calls" | "callPage">): ReadonlyArray<CallView> => {
  const start = view.calls.findIndex((c) => c.seq >= view.callPage.from);
  return start < 0 ? [] : view.calls.slice(start);
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
