import type { AlertCounts, AlertRecord, AlertTry, NewAlert } from "../../../runtime/Journal.js";
import { all, get, now, type Program, run } from "./program.js";

/** The alerts table's SQL (decision 0065): the same text on both engines. */
export const ALERT_SQL = {
  record:
    "INSERT INTO alerts (key, run_id, kind, body, created_at, next_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
  // The conditions stand in the outer WHERE too: on PostgreSQL a second claimer that waited for the
  // row's lock checks them again on the row as the first one left it, and takes nothing.
  claim:
    "UPDATE alerts SET claimed_by = ?, claim_until = ? " +
    "WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_at <= ? AND (claim_until IS NULL OR claim_until <= ?) " +
    "AND key IN (SELECT key FROM alerts WHERE delivered_at IS NULL AND gave_up_at IS NULL AND next_at <= ? " +
    "AND (claim_until IS NULL OR claim_until <= ?) ORDER BY next_at LIMIT ?) " +
    "RETURNING key, run_id, kind, body, created_at, attempts, tries, next_at, delivered_at, gave_up_at, last_error",
  claimed: "SELECT attempts, tries FROM alerts WHERE key = ? AND claimed_by = ? AND delivered_at IS NULL",
  attempted:
    "UPDATE alerts SET attempts = ?, tries = ?, last_error = ?, delivered_at = ?, gave_up_at = ?, next_at = ?, " +
    "claimed_by = NULL, claim_until = NULL WHERE key = ? AND claimed_by = ?",
  all: "SELECT key, run_id, kind, body, created_at, attempts, tries, next_at, delivered_at, gave_up_at, last_error FROM alerts ORDER BY created_at DESC, key LIMIT ?",
  undelivered:
    "SELECT key, run_id, kind, body, created_at, attempts, tries, next_at, delivered_at, gave_up_at, last_error FROM alerts WHERE delivered_at IS NULL ORDER BY created_at DESC, key LIMIT ?",
  counts:
    "SELECT COALESCE(SUM(CASE WHEN delivered_at IS NOT NULL THEN 1 ELSE 0 END), 0) AS delivered, " +
    "COALESCE(SUM(CASE WHEN delivered_at IS NULL AND gave_up_at IS NULL THEN 1 ELSE 0 END), 0) AS pending, " +
    "COALESCE(SUM(CASE WHEN gave_up_at IS NOT NULL THEN 1 ELSE 0 END), 0) AS failed FROM alerts",
} as const;

/** An `alerts` row as both drivers give it (PostgreSQL's bigint comes as text). */
export interface AlertRow {
  readonly key: string;
  readonly run_id: string;
  readonly kind: string;
  readonly body: string;
  readonly created_at: number | string;
  readonly attempts: number | string;
  readonly tries: string;
  readonly next_at: number | string;
  readonly delivered_at: number | string | null;
  readonly gave_up_at: number | string | null;
  readonly last_error: string | null;
}

const triesOf = (text: string): AlertTry[] => {
  try {
    const parsed: unknown = JSON.parse(text);
    return Array.isArray(parsed) ? (parsed as AlertTry[]) : [];
  } catch {
    return [];
  }
};

const orNull = (value: number | string | null): number | null => (value === null ? null : Number(value));

/** A row as the journal port gives it. */
export const toAlert = (row: AlertRow): AlertRecord => ({
  key: row.key,
  runId: row.run_id,
  kind: row.kind as AlertRecord["kind"],
  body: row.body,
  createdAt: Number(row.created_at),
  attempts: Number(row.attempts),
  tries: triesOf(row.tries),
  nextAt: Number(row.next_at),
  deliveredAt: orNull(row.delivered_at),
  gaveUpAt: orNull(row.gave_up_at),
  lastError: row.last_error,
});

/** Record alerts not recorded yet; due at once. */
export function* recordAlertsProgram(alerts: ReadonlyArray<NewAlert>): Program<void> {
  const at = yield* now();
  for (const alert of alerts) {
    yield* run(ALERT_SQL.record, [alert.key, alert.runId, alert.kind, alert.body, at, at]);
  }
}

/** Claim the alerts due now, for `leaseMs`. */
export function* claimAlertsProgram(
  workerId: string,
  leaseMs: number,
  limit: number,
): Program<ReadonlyArray<AlertRecord>> {
  const at = yield* now();
  const rows = yield* all<AlertRow>(ALERT_SQL.claim, [workerId, at + leaseMs, at, at, at, at, limit]);
  return rows.map(toAlert);
}

/** Record one attempt of a claimed alert; false when this worker no longer holds it. */
export function* alertAttemptedProgram(
  key: string,
  workerId: string,
  attempt: {
    readonly ok: boolean;
    readonly status?: number;
    readonly error?: string;
    readonly retryInMs: number | null;
  },
): Program<boolean> {
  const at = yield* now();
  const row = yield* get<{ attempts: number | string; tries: string }>(ALERT_SQL.claimed, [key, workerId]);
  if (!row) return false;
  const tried: AlertTry = {
    at,
    ok: attempt.ok,
    ...(attempt.status === undefined ? {} : { status: attempt.status }),
    ...(attempt.error === undefined ? {} : { error: attempt.error }),
  };
  const tries = [...triesOf(row.tries), tried];
  const gaveUp = !attempt.ok && attempt.retryInMs === null;
  yield* run(ALERT_SQL.attempted, [
    Number(row.attempts) + 1,
    JSON.stringify(tries),
    attempt.ok ? null : (attempt.error ?? `HTTP ${attempt.status ?? "?"}`),
    attempt.ok ? at : null,
    gaveUp ? at : null,
    at + (attempt.retryInMs ?? 0),
    key,
    workerId,
  ]);
  return true;
}

/** Alerts, newest first. */
export function* alertsProgram(undelivered: boolean, limit: number): Program<ReadonlyArray<AlertRecord>> {
  const rows = yield* all<AlertRow>(undelivered ? ALERT_SQL.undelivered : ALERT_SQL.all, [limit]);
  return rows.map(toAlert);
}

/** How many alerts are delivered, pending and given up on. */
export function* alertCountsProgram(): Program<AlertCounts> {
  const row = yield* get<{ delivered: number | string; pending: number | string; failed: number | string }>(
    ALERT_SQL.counts,
    [],
  );
  return {
    delivered: Number(row?.delivered ?? 0),
    pending: Number(row?.pending ?? 0),
    failed: Number(row?.failed ?? 0),
  };
}
