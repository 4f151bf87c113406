import { existsSync, readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { receiptName } from "../src/adapters/integrations/tools/receipts.js";
import { LibsqlJournal } from "../src/adapters/stores/libsql/LibsqlJournal.js";
import {
  decodeRow,
  isSealed,
  type RecordedEvent,
  type StoredRow,
  verifyStreamChain,
} from "../src/events/index.js";
import { contextOf, foldRun, statusOf } from "../src/machines/index.js";
import { auditJournal } from "../src/runtime/audit.js";
import type { Journal } from "../src/runtime/Journal.js";
import { byteScan } from "./byteScan.js";
import type { LimitedRequest } from "./witness-server.js";

/**
 * Committed outcomes: `callId#attempt` → digest of what was recorded. Per attempt: a failed attempt
 * retried by its policy (or a person's grant) keeps its failure, and the next attempt has its own.
 */
export type Outcomes = Map<string, string>;

/** A final log: its stored rows (for the chain, checked over what is stored) and their events. */
export interface Log {
  readonly rows: ReadonlyArray<StoredRow>;
  readonly events: ReadonlyArray<RecordedEvent>;
}

/** Read a whole journal (opening sealed fields with the environment's keys, as the workers did). */
/** Rows stored with encrypted fields (HOLDFAST_ENCRYPTION_KEY was set): proof the run was encrypted. */
export const sealedRows = (rows: ReadonlyArray<StoredRow>): number =>
  rows.filter((row) => isSealed(JSON.parse(row.data))).length;

export const readJournal = async (journal: Journal): Promise<Log> => {
  const rows: StoredRow[] = [];
  for (;;) {
    const page = await journal.readAllRows({ after: rows.at(-1)?.position ?? 0, limit: 2000 });
    if (page.length === 0) break;
    rows.push(...page);
  }
  return { rows, events: rows.map((row) => decodeRow(row, journal.keyring)) };
};

export const readLog = async (db: string): Promise<Log> => {
  const journal = LibsqlJournal.open(db);
  try {
    return await readJournal(journal);
  } finally {
    await journal.close();
  }
};

/** The audit's findings on a final journal, one line each ("kind stream@version: detail"); empty when clean. */
export const auditFindings = async (journal: Journal): Promise<string[]> => {
  const report = await auditJournal(journal);
  return report.findings.map((f) => `${f.kind} ${f.streamId ?? "-"}@${f.version ?? "-"}: ${f.detail}`);
};

/** Audit a trial's libSQL journal file. */
export const auditLog = async (db: string): Promise<string[]> => {
  const journal = LibsqlJournal.open(db);
  try {
    return await auditFindings(journal);
  } finally {
    await journal.close();
  }
};

export const outcomesOf = (events: ReadonlyArray<RecordedEvent>): Outcomes => {
  const out: Outcomes = new Map();
  for (const { event } of events) {
    const key = "attempt" in event ? `${event.callId}#${event.attempt}` : "";
    if (event.type === "call.completed") out.set(key, `completed:${event.resultDigest}`);
    if (event.type === "call.failed") out.set(key, `failed:${event.error.message}`);
    if (event.type === "call.reconciled" && event.outcome === "completed") {
      out.set(key, `completed:${event.resultDigest ?? ""}`);
    }
  }
  return out;
};

const lines = (path: string): string[] =>
  existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l !== "")
    : [];

export interface TrialCheck {
  readonly duplicates: number;
  readonly duplicateDetail: string[];
  readonly lost: number;
  readonly lostDetail: string[];
  readonly held: number;
  /** Held runs per hold reason code (`in-doubt`, `crash-loop`, …). */
  readonly heldByReason: Record<string, number>;
  readonly completed: number;
  /** Runs that ended failed (an agent error after every call it started had its outcome). */
  readonly failed: number;
  /** Each run that ended neither completed nor held: how it ended (failed with its error, stopped with the reason). */
  readonly endedOtherwise: string[];
  /** Runs still running or interrupted at the end, and any run that failed with a call open. */
  readonly unsettled: string[];
  readonly reconciled: number;
  readonly replayed: number;
  readonly logOk: boolean;
  readonly logProblems: string[];
  /** Effects per call for the non-allowlisted tools, from the witnesses. */
  readonly effects: Record<string, number>;
}

/**
 * Check one trial's final state against the laws, using the journal and the outside witnesses.
 * A duplicate: an effect of a non-allowlisted call executed more than once for one attempt, or
 * in more attempts than the journal authorized.
 */
export const checkTrial = (
  { rows, events }: Log,
  dir: string,
  httpCounts: ReadonlyMap<string, number>,
  earlier: ReadonlyArray<Outcomes>,
  /** Tools on the safe list: the only ones an "allowlisted" replay may name. */
  allowlisted: ReadonlySet<string>,
  options: {
    /**
     * Nothing killed the processes: every effect a witness saw must have its outcome in the
     * journal (as the call's outcome, or carried by a conflict) — one missing is a lost outcome.
     */
    readonly everyEffectRecorded?: boolean;
  } = {},
): TrialCheck => {
  const logProblems: string[] = [];
  const streams = new Map<string, RecordedEvent[]>();
  for (const e of events) streams.set(e.streamId, [...(streams.get(e.streamId) ?? []), e]);
  const streamRows = new Map<string, StoredRow[]>();
  for (const r of rows) streamRows.set(r.streamId, [...(streamRows.get(r.streamId) ?? []), r]);
  for (const [streamId, stored] of streamRows) {
    const broken = verifyStreamChain(stored);
    if (broken) logProblems.push(`${streamId}@${broken.version}: ${broken.reason}`);
  }
  let held = 0;
  /** Held runs per reason code (a run held for two reasons counts under both). */
  const heldByReason: Record<string, number> = {};
  let completed = 0;
  let failed = 0;
  const unsettled: string[] = [];
  const endedOtherwise: string[] = [];
  for (const [streamId, stream] of streams) {
    if (!streamId.startsWith("run-")) continue;
    try {
      const fold = foldRun(stream.map((e) => e.event));
      const status = statusOf(fold);
      if (status === "held") {
        held++;
        const last = [...stream].reverse().find((e) => e.event.type === "run.held")?.event;
        if (last?.type === "run.held")
          for (const code of new Set(last.reasons.map((r) => r.code)))
            heldByReason[code] = (heldByReason[code] ?? 0) + 1;
      } else if (status === "completed") completed++;
      else if (status === "failed") {
        failed++;
        const ended = stream.at(-1)?.event;
        endedOtherwise.push(
          `${streamId}: failed${ended?.type === "run.failed" ? ` (${ended.error.name}: ${ended.error.message})` : ""}`,
        );
        const open = contextOf(fold)
          .calls.values()
          .filter((c) => c.status === "in-doubt");
        if (open.length > 0)
          unsettled.push(`${streamId}: failed with ${open.map((c) => c.callId).join(", ")} in doubt`);
      } else if (status === "cancelled") {
        // The cancel kind: a run asked to cancel (checkCancel judges how it ended).
        const ended = [...stream].reverse().find((e) => e.event.type === "run.cancelled")?.event;
        endedOtherwise.push(
          `${streamId}: cancelled${ended?.type === "run.cancelled" ? ` by ${ended.by}` : ""}`,
        );
      } else if (status === "stopped") {
        const ended = stream.at(-1)?.event;
        endedOtherwise.push(
          `${streamId}: stopped${ended?.type === "run.stopped" ? ` (${ended.reason})` : ""}`,
        );
      } else unsettled.push(`${streamId}: ${status}`);
    } catch (error) {
      logProblems.push(`${streamId}: ${(error as Error).message}`);
    }
  }

  // A plan call commits with its outcome: finding one in doubt would break that promise.
  const documentCalls = new Set<string>();
  for (const { event } of events)
    if (event.type === "call.intended" && event.kind === "document") documentCalls.add(event.callId);
  for (const e of events) {
    const inDoubt =
      e.event.type === "run.interrupted"
        ? e.event.inDoubt
        : e.event.type === "run.held"
          ? e.event.reasons.flatMap((r) => (r.callId ? [r.callId] : []))
          : [];
    for (const callId of inDoubt) {
      if (documentCalls.has(callId))
        logProblems.push(`${e.streamId}@${e.version}: plan call ${callId} found in doubt`);
    }
  }

  // Attempts the journal authorized per call: the first, plus one per legitimate authorization.
  // An "allowlisted" replay of a tool that is not on the safe list authorizes nothing: it is a breach.
  const authorized = new Map<string, number>();
  const names = new Map<string, { kind: string; name: string }>();
  for (const { event } of events) if (event.type === "call.intended") names.set(event.callId, event);
  const legitimate = (event: RecordedEvent["event"]): boolean => {
    if (event.type !== "call.replay-authorized") return true;
    const call = names.get(event.callId);
    if (event.reason === "allowlisted") return call !== undefined && allowlisted.has(call.name);
    if (event.reason === "idempotent-child") return call?.kind === "child";
    if (event.reason === "model-policy") return call?.kind === "model";
    return true;
  };
  let reconciled = 0;
  let replayed = 0;
  /** Each call's retry policy, as its latest intent recorded it: a retry.scheduled within it authorizes one attempt. */
  const policyAttempts = new Map<string, number>();
  for (const { event } of events) {
    if (event.type === "call.intended" && event.attempt === 1) authorized.set(event.callId, 1);
    if (event.type === "call.intended") {
      if (event.retry) policyAttempts.set(event.callId, event.retry.attempts);
      else policyAttempts.delete(event.callId);
    }
    if (event.type === "retry.scheduled" && event.attempt <= (policyAttempts.get(event.callId) ?? 0))
      authorized.set(event.callId, (authorized.get(event.callId) ?? 1) + 1);
    if (event.type === "call.reconciled") reconciled++;
    if (event.type === "call.replay-authorized") replayed++;
    if (
      ((event.type === "call.reconciled" && event.outcome === "not-completed") ||
        event.type === "call.replay-authorized" ||
        event.type === "retry.granted") &&
      legitimate(event)
    ) {
      authorized.set(event.callId, (authorized.get(event.callId) ?? 1) + 1);
    }
    // A person's decision to run a call again (the witness cannot tell it from a replay).
    if (event.type === "decision.recorded") {
      for (const d of event.calls) {
        if (d.decision === "new-attempt" || d.decision === "confirmed-not-completed")
          authorized.set(d.callId, (authorized.get(d.callId) ?? 1) + 1);
      }
    }
  }

  const perKey = new Map<string, number>();
  const add = (key: string, n = 1) => perKey.set(key, (perKey.get(key) ?? 0) + n);
  for (const line of [
    ...lines(join(dir, "witness", "send.txt")),
    ...lines(join(dir, "witness", "shell.txt")),
    // The approval kind's tool: its effect, once approved.
    ...lines(join(dir, "witness", "pay.txt")),
    // The AI SDK agent's provider: each request it received, with the call's idempotency key.
    ...lines(join(dir, "witness", "model.txt")),
    // The MCP agent's server: its `send` requests (its `read` is on the safe list, like read_safe).
    ...lines(join(dir, "witness", "mcp.txt")).filter((line) => line.startsWith("send ")),
    // The SSH and terminal agents' commands: each appends its line itself, on the host it ran on.
    ...lines(join(dir, "witness", "ssh.txt")),
    ...lines(join(dir, "witness", "terminal.txt")),
  ]) {
    add(line.split(" ").at(-1)!);
  }
  for (const [key, n] of httpCounts) add(key, n);

  const duplicateDetail: string[] = [];
  const attemptsPerCall = new Map<string, number>();
  for (const [key, n] of perKey) {
    if (n > 1) duplicateDetail.push(`${key} ran ${n} times`);
    const callId = key.split("#")[0]!;
    attemptsPerCall.set(callId, (attemptsPerCall.get(callId) ?? 0) + 1);
  }
  // A reconciler's "not completed" is a proof that lets another attempt run: the witness having
  // seen that very attempt makes it a false one, and the next attempt a second execution.
  for (const { event } of events) {
    const key = event.type === "call.reconciled" ? `${event.callId}#${event.attempt}` : "";
    if (event.type === "call.reconciled" && event.outcome === "not-completed" && perKey.has(key))
      duplicateDetail.push(`${key} was reconciled not completed, and the witness saw it run`);
  }
  for (const [callId, attempts] of attemptsPerCall) {
    if (attempts > (authorized.get(callId) ?? 0)) {
      duplicateDetail.push(
        `${callId} ran in ${attempts} attempts, ${authorized.get(callId) ?? 0} authorized`,
      );
    }
  }

  const final = outcomesOf(events);
  const lostDetail: string[] = [];
  for (const snapshot of earlier) {
    for (const [callId, digest] of snapshot) {
      if (final.get(callId) !== digest)
        lostDetail.push(`${callId}: ${digest} became ${final.get(callId) ?? "missing"}`);
    }
  }
  if (options.everyEffectRecorded) {
    // Outcomes per attempt: live ones, reconciled ones, a late one kept in a conflict, or a
    // person's decision on the attempt (a confirmation; or "run it again", "resume" after an
    // answer that broke off: the person knew of that attempt and chose).
    const recorded = new Set<string>();
    const attemptOf = new Map<string, number>();
    for (const { event } of events) {
      if (event.type === "call.intended") attemptOf.set(event.callId, event.attempt);
      if (event.type === "call.completed" || event.type === "call.failed" || event.type === "call.reconciled")
        recorded.add(`${event.callId}#${event.attempt}`);
      if (event.type === "decision.recorded")
        for (const d of event.calls) recorded.add(`${d.callId}#${attemptOf.get(d.callId) ?? 1}`);
      if (event.type === "conflict.recorded" && event.kind === "outcome" && event.callId) {
        const attempted = event.attempted as { attempt?: number } | null;
        if (typeof attempted?.attempt === "number") recorded.add(`${event.callId}#${attempted.attempt}`);
      }
    }
    for (const key of perKey.keys()) {
      if (!recorded.has(key)) lostDetail.push(`${key}: the effect happened, its outcome was never recorded`);
    }
  }
  const effects: Record<string, number> = {};
  for (const [key, n] of perKey) effects[key] = n;
  return {
    duplicates: duplicateDetail.length,
    duplicateDetail,
    lost: lostDetail.length,
    lostDetail,
    held,
    heldByReason,
    completed,
    failed,
    unsettled,
    endedOtherwise,
    reconciled,
    replayed,
    logOk: logProblems.length === 0,
    logProblems,
    effects,
  };
};

/** What the byte scan of a trial's folder found: leaks, and copies kept for a call still in doubt. */
export interface SecretScan {
  /** Files holding a secret that should hold none (`path (label)`). */
  readonly leaks: ReadonlyArray<string>;
  /** Output files of an attempt whose outcome is not recorded: kept for its reconciler, 0600. */
  readonly keptForCallsInDoubt: number;
}

/**
 * Scan every file of a trial (journal, WAL, SHM, anchor, receipts, work folder, witnesses) for the
 * registered secret and, with encryption on, the key. Only a receipt folder of an attempt with no
 * recorded outcome may hold the secret: the reconciler still needs the command's output.
 */
export const scanTrial = (
  dir: string,
  receiptsDir: string,
  events: ReadonlyArray<RecordedEvent>,
  needles: Readonly<Record<string, string>>,
): SecretScan => {
  const settled = new Set<string>();
  const folders = new Map<string, string>();
  for (const { event } of events) {
    if (event.type === "call.intended") folders.set(receiptName(event.idempotencyKey), event.idempotencyKey);
    if (event.type === "call.completed" || event.type === "call.failed" || event.type === "call.reconciled")
      settled.add(`${event.callId}#${event.attempt}`);
  }
  const leaks: string[] = [];
  let kept = 0;
  for (const hit of byteScan([dir], needles)) {
    const inReceipts = relative(receiptsDir, hit.file);
    const key = inReceipts.startsWith("..") ? undefined : folders.get(inReceipts.split(sep)[0] ?? "");
    if (key !== undefined && hit.label !== "key" && !settled.has(key)) kept++;
    else leaks.push(`${relative(dir, hit.file)} (${hit.label})`);
  }
  return { leaks, keptForCallsInDoubt: kept };
};

/** What the `backoff` fault kind's check found, over one journal and the rate-limited endpoint's requests. */
export interface BackoffCheck {
  /** Calls whose intent recorded a retry policy. */
  readonly callsWithPolicy: number;
  readonly retriesScheduled: number;
  /** `retry.scheduled` by where the delay came from (`retry-after`, `backoff`). */
  readonly retriesByReason: Record<string, number>;
  /** 429s the witness answered. */
  readonly refusals: number;
  /** Requests the witness answered 201 (acted). */
  readonly acted: number;
  /** Requests that arrived after a lookup had reserved their key, refused with 409: a stale owner's, late. */
  readonly lateRefused: number;
  /**
   * Backoffs a crash cut: a `retry.scheduled` followed, before its attempt's intent, by the run's
   * `run.interrupted` (single worker) or a `run.claimed` from another worker (multi-worker).
   */
  readonly backoffsCut: number;
  /** Calls that spent every attempt of their policy (the agent went on without them). */
  readonly exhausted: number;
  readonly problems: string[];
}

/**
 * The `backoff` kind's laws, from the journal and from the outside (the rate-limited endpoint):
 * no retry beyond the policy's attempts; attempt numbers only go up, in the journal and at the
 * witness (a count that reset after a crash would send an attempt again); the witness never sees
 * an attempt the journal did not intend, nor one before its recorded due time; each call's
 * requests are no more than the attempts the journal authorized.
 */
export const checkBackoff = (
  events: ReadonlyArray<RecordedEvent>,
  requests: ReadonlyMap<string, ReadonlyArray<LimitedRequest>>,
): BackoffCheck => {
  const problems: string[] = [];
  const policy = new Map<string, number>();
  const lastAttempt = new Map<string, number>();
  const intended = new Set<string>();
  const allowed = new Map<string, number>();
  const dueAt = new Map<string, number>();
  const waiting = new Map<string, { runId: string; attempt: number }>();
  const ownerOf = new Map<string, string>();
  const retriesByReason: Record<string, number> = {};
  let retriesScheduled = 0;
  let backoffsCut = 0;
  const cut = new Set<string>();
  const failedLast = new Map<string, number>();
  for (const { event } of events) {
    if (event.type === "call.intended") {
      if (event.retry) policy.set(event.callId, event.retry.attempts);
      const previous = lastAttempt.get(event.callId) ?? 0;
      if (event.retry && event.attempt <= previous)
        problems.push(
          `${event.callId}: attempt ${event.attempt} intended after attempt ${previous}: the attempt count went back`,
        );
      lastAttempt.set(event.callId, event.attempt);
      intended.add(`${event.callId}#${event.attempt}`);
      if (event.attempt === 1) allowed.set(event.callId, 1);
      waiting.delete(event.callId);
    }
    if (event.type === "retry.scheduled") {
      retriesScheduled++;
      retriesByReason[event.reason] = (retriesByReason[event.reason] ?? 0) + 1;
      const attempts = policy.get(event.callId);
      if (attempts === undefined)
        problems.push(
          `${event.callId}: retry.scheduled for attempt ${event.attempt} without a recorded policy`,
        );
      else if (event.attempt > attempts)
        problems.push(
          `${event.callId}: retry.scheduled for attempt ${event.attempt}, beyond the policy's ${attempts} attempts`,
        );
      if (event.attempt !== (lastAttempt.get(event.callId) ?? 0) + 1)
        problems.push(
          `${event.callId}: retry.scheduled for attempt ${event.attempt} after attempt ${lastAttempt.get(event.callId) ?? 0}`,
        );
      allowed.set(event.callId, (allowed.get(event.callId) ?? 1) + 1);
      dueAt.set(`${event.callId}#${event.attempt}`, Date.parse(event.dueAt));
      waiting.set(event.callId, { runId: event.runId, attempt: event.attempt });
    }
    if (event.type === "call.reconciled" && event.outcome === "not-completed")
      allowed.set(event.callId, (allowed.get(event.callId) ?? 1) + 1);
    if (event.type === "retry.granted") allowed.set(event.callId, (allowed.get(event.callId) ?? 1) + 1);
    if (event.type === "decision.recorded")
      for (const d of event.calls)
        if (d.decision === "new-attempt" || d.decision === "confirmed-not-completed")
          allowed.set(d.callId, (allowed.get(d.callId) ?? 1) + 1);
    if (event.type === "call.failed") failedLast.set(event.callId, event.attempt);
    if (event.type === "call.completed") failedLast.delete(event.callId);
    // A crash between a scheduled retry and its attempt: the backoff resumed in another process.
    const crossed =
      event.type === "run.interrupted" ||
      (event.type === "run.claimed" &&
        event.previousWorkerId !== null &&
        ownerOf.get(event.runId) !== undefined &&
        event.previousWorkerId !== event.workerId);
    if (event.type === "run.claimed") ownerOf.set(event.runId, event.workerId);
    if (crossed) {
      for (const [callId, w] of waiting) {
        const id = `${callId}#${w.attempt}`;
        if (w.runId === event.runId && !cut.has(id)) {
          cut.add(id);
          backoffsCut++;
        }
      }
    }
  }
  let exhausted = 0;
  for (const [callId, attempt] of failedLast)
    if (policy.has(callId) && attempt >= (policy.get(callId) ?? 0) && !waiting.has(callId)) exhausted++;

  let refusals = 0;
  let acted = 0;
  let lateRefused = 0;
  for (const [callId, seen] of requests) {
    let previous = 0;
    const sent = new Set<number>();
    for (const r of seen) {
      if (r.status === 429) refusals++;
      if (r.status === 201) acted++;
      if (sent.has(r.attempt)) problems.push(`${r.key}: the witness received it twice`);
      sent.add(r.attempt);
      // A request refused because a lookup reserved its key (409) is a stale owner's, late: it was
      // stopped after its lease check while another took the run, reconciled the attempt as not
      // completed and went on (law 10). Refused, it did nothing; any other answer out of order did.
      if (r.status === 409) lateRefused++;
      else if (r.attempt <= previous)
        problems.push(
          `${callId}: the witness received attempt ${r.attempt} (answered ${r.status}) after attempt ${previous}: the count went back`,
        );
      if (r.status !== 409) previous = Math.max(previous, r.attempt);
      if (!intended.has(r.key))
        problems.push(`${r.key}: the witness received it, the journal never intended it`);
      const due = dueAt.get(r.key);
      // The same clock on both sides; a timer may fire a millisecond or two early.
      if (due !== undefined && r.at < due - 5)
        problems.push(`${r.key}: received ${due - r.at} ms before its recorded due time`);
    }
    const policyAttempts = policy.get(callId);
    const refused = seen.filter((r) => r.status === 429).length;
    if (policyAttempts !== undefined && refused > policyAttempts)
      problems.push(`${callId}: refused ${refused} times, its policy allows ${policyAttempts} attempts`);
    if (seen.length > (allowed.get(callId) ?? 0))
      problems.push(
        `${callId}: the witness received ${seen.length} attempts, the journal authorized ${allowed.get(callId) ?? 0}`,
      );
    if (seen.filter((r) => r.status === 201).length > 1)
      problems.push(`${callId}: acted ${seen.filter((r) => r.status === 201).length} times`);
  }
  return {
    callsWithPolicy: policy.size,
    retriesScheduled,
    retriesByReason,
    refusals,
    acted,
    lateRefused,
    backoffsCut,
    exhausted,
    problems,
  };
};
