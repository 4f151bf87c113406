import { randomUUID } from "node:crypto";
import { copyFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { applyProjections } from "../../src/adapters/stores/sql/append.js";
import { runSync } from "../../src/adapters/stores/sql/program.js";
import { type EventRow, toStored } from "../../src/adapters/stores/sql/rows.js";
import { libsqlDialect, statements } from "../../src/adapters/stores/sql/statements.js";
import {
  type AnyEvent,
  canonicalJson,
  chainHash,
  decodeRow,
  EVENT_SCHEMA_VERSION,
  encodePayload,
  GENESIS_HASH,
} from "../../src/events/index.js";
import { inlineProjections } from "../../src/projections/index.js";

type Db = InstanceType<typeof Database>;

/** Copy a journal file (with its WAL, if any) into `dir`: each test tampers with its own copy. */
export const copyJournal = (from: string, dir: string): string => {
  const to = join(dir, "journal.db");
  copyFileSync(from, to);
  for (const suffix of ["-wal", "-shm"])
    if (existsSync(`${from}${suffix}`)) copyFileSync(`${from}${suffix}`, `${to}${suffix}`);
  return to;
};

/**
 * Change the file the way a tamperer with SQL access would: straight on the database, with the
 * immutability triggers dropped first.
 */
export const tamper = <T>(path: string, fn: (db: Db) => T): T => {
  const db = new Database(path);
  try {
    db.exec("DROP TRIGGER IF EXISTS events_are_immutable");
    db.exec("DROP TRIGGER IF EXISTS events_are_not_deleted");
    return fn(db);
  } finally {
    db.close();
  }
};

export interface Row {
  readonly position: number;
  readonly stream_id: string;
  readonly version: number;
  readonly type: string;
  readonly data: string;
  readonly hash: string;
}

export const rowsOf = (db: Db, streamId: string): Row[] =>
  db
    .prepare(
      "SELECT position, stream_id, version, type, data, hash FROM events WHERE stream_id = ? ORDER BY version",
    )
    .all(streamId) as Row[];

/**
 * Append a forged event the way a careful tamperer would: chained to the stream's head with a hash
 * computed exactly as holdfast computes it, so only the checks beyond the chain can catch it.
 */
export const forgeChained = (db: Db, streamId: string, event: AnyEvent): { version: number } => {
  const head = rowsOf(db, streamId).at(-1) ?? { version: 0, hash: GENESIS_HASH };
  const version = head.version + 1;
  const data = encodePayload(event);
  const eventId = randomUUID();
  const recordedAt = new Date().toISOString();
  const hash = chainHash({
    streamId,
    version,
    eventId,
    recordedAt,
    prevHash: head.hash,
    schemaVersion: EVENT_SCHEMA_VERSION,
    data,
  });
  db.prepare(
    "INSERT INTO events (stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
  ).run(
    streamId,
    version,
    eventId,
    event.type,
    EVENT_SCHEMA_VERSION,
    recordedAt,
    canonicalJson(data),
    head.hash,
    hash,
  );
  return { version };
};

/**
 * Make every cache agree with the log as it stands, the way a tamperer with the holdfast source
 * would: the inline projection step over every event, machines not consulted (`holdfast rebuild`
 * refuses events a run's machine rejects).
 */
export const alignCaches = (path: string): void =>
  tamper(path, (db) => {
    db.exec("DELETE FROM projections");
    const rows = db
      .prepare(
        "SELECT position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data FROM events ORDER BY position",
      )
      .all() as EventRow[];
    const recorded = rows.map((row) => decodeRow(toStored(row)));
    runSync(applyProjections(statements(libsqlDialect), recorded, inlineProjections, null), (step) => {
      if (step.kind === "now") return Date.now();
      const statement = db.prepare(step.sql);
      if (step.kind === "get") return statement.get(...step.params);
      if (step.kind === "all") return statement.all(...step.params);
      statement.run(...step.params);
      return undefined;
    });
  });
