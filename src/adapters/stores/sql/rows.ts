import type { StoredRow } from "../../../events/index.js";
import type { Admission, Claim, DueSchedule, DueWait, PrunedRunRecord } from "../../../runtime/Journal.js";

/**
 * Rows as the drivers return them. 64-bit columns arrive as strings from PostgreSQL and as numbers
 * from libSQL, so every integer goes through `Number` here and nowhere else.
 */
export interface EventRow {
  readonly position: number | string;
  readonly stream_id: string;
  readonly version: number | string;
  readonly event_id: string;
  readonly recorded_at: string;
  readonly prev_hash: string;
  readonly hash: string;
  readonly schema_version: number | string;
  readonly data: string;
}

export interface ClaimRow {
  readonly run_id: string;
  /** Null once released: the row stays to keep the run's epoch. */
  readonly worker_id: string | null;
  readonly epoch: number | string;
  readonly lease_until: number | string;
}

export interface AdmissionRow {
  readonly chat_id: string;
  readonly input_id: string;
  readonly digest: string;
  readonly run_id: string;
}

export interface PrunedRunRow {
  readonly run_id: string;
  readonly chat_id: string;
  readonly status: string;
  readonly output_digest: string | null;
  readonly pruned_at: string;
}

export interface HeadRow {
  readonly version: number | string;
  readonly hash: string;
}

/** A fence's claim row with its stream's head (null: an empty stream). */
export interface FencedHeadRow extends ClaimRow {
  readonly head_version: number | string | null;
  readonly head_hash: string | null;
}

export const toStored = (row: EventRow): StoredRow => ({
  streamId: row.stream_id,
  version: Number(row.version),
  position: Number(row.position),
  eventId: row.event_id,
  recordedAt: row.recorded_at,
  prevHash: row.prev_hash,
  hash: row.hash,
  schemaVersion: Number(row.schema_version),
  data: row.data,
});

/** The claim a row holds; null for a released row. */
export const toClaim = (row: ClaimRow): Claim | null =>
  row.worker_id === null
    ? null
    : {
        runId: row.run_id,
        workerId: row.worker_id,
        epoch: Number(row.epoch),
        leaseUntil: Number(row.lease_until),
      };

export const toPrunedRun = (row: PrunedRunRow): PrunedRunRecord => ({
  runId: row.run_id,
  chatId: row.chat_id,
  status: row.status,
  outputDigest: row.output_digest,
  prunedAt: row.pruned_at,
});

export const toAdmission = (row: AdmissionRow): Admission => ({
  chatId: row.chat_id,
  inputId: row.input_id,
  digest: row.digest,
  runId: row.run_id,
});

/** A row of the schedule index (decision 0060). */
export interface DueScheduleRow {
  readonly schedule_id: string;
  readonly due_at: number | string | bigint;
}

/** A schedule index row as the Journal port gives it. */
export const dueScheduleOf = (row: DueScheduleRow): DueSchedule => ({
  scheduleId: row.schedule_id,
  dueAtMs: Number(row.due_at),
});

/** A row of the due index (decision 0050). */
export interface DueWaitRow {
  readonly run_id: string;
  readonly due_at: number | string | bigint;
  readonly wait: string;
  readonly call_id: string;
}

/** A due index row as the Journal port gives it. */
export const dueWaitOf = (row: DueWaitRow): DueWait => ({
  runId: row.run_id,
  dueAtMs: Number(row.due_at),
  wait: row.wait,
  callId: row.call_id,
});
