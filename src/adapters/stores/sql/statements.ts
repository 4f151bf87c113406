/**
 * What differs between the engines' SQL. Everything else in {@link statements} is the same text on
 * both (`?` placeholders; PostgreSQL numbers them, see {@link numberPlaceholders}).
 */
export interface Dialect {
  /** Appended to the fence look-up: PostgreSQL locks the claim row so a take-over waits for the append. */
  readonly lockClaimShared: string;
  /** Appended to the claim look-up in `claim()`: PostgreSQL locks the row it is about to change. */
  readonly lockClaimForUpdate: string;
  /** The column that orders the active-run guard by insertion. */
  readonly guardOrder: string;
  /**
   * Whether an append reads and writes its projection rows several per statement. PostgreSQL: yes,
   * each statement is a round trip. libSQL: no — in-process statements are cheap, and the row-value
   * `IN (VALUES …)` read and multi-row upsert cost more CPU per event than one statement per row
   * (journal alone at 64 runs: ~230 against ~260–280 µs per event, A/B on one machine).
   */
  readonly projectionRowsPerStatement: number;
  /**
   * Whether a fenced append whose versions are known before it reads (a numbered or `no-stream`
   * expected version) reads its claim, its stream's head and its projection rows in one statement.
   * PostgreSQL: yes, one round trip instead of two. libSQL: no, for the reason above.
   */
  readonly fencedReadWithRows: boolean;
  /**
   * Statements over whole lists, for a batch of appends decided in memory (src/adapters/stores/sql/batch.ts):
   * a handful of round trips per batch instead of three or four per request. PostgreSQL binds a list
   * as an array. libSQL: none (in-process statements cost no round trip).
   */
  readonly lists: ListStatements | null;
}

/**
 * A batch's statements, each bound with lists (one array per column). `read`: fence run ids, stream
 * ids, row names, row keys; one row per part as `fencedHeadAndRows` (a head's name is its stream).
 * `insertEvents`: one list per column of `insertEvent`, returning each row's stream, version and
 * position. `write`: rows (names, keys, values, positions), finished run ids, released claims
 * (run ids, then worker ids and run ids as pairs), the first sealed position or null, and the run
 * index rows (`searchColumns`).
 */
export interface ListStatements {
  readonly read: string;
  readonly insertEvents: string;
  readonly write: string;
}

const postgresLists: ListStatements = {
  read:
    "WITH claim AS (SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE run_id = ANY(?::text[]) FOR SHARE) " +
    "SELECT 'claim' AS part, run_id AS name, worker_id AS key, CAST(epoch AS TEXT) AS value, lease_until AS position FROM claim " +
    "UNION ALL SELECT 'head', s.stream_id, h.hash, CAST(h.version AS TEXT), NULL FROM unnest(?::text[]) AS s(stream_id) " +
    "CROSS JOIN LATERAL (SELECT version, hash FROM events e WHERE e.stream_id = s.stream_id ORDER BY version DESC LIMIT 1) AS h " +
    // Each pair its own index probe (LIMIT 1 keeps the planner from joining the whole table).
    "UNION ALL SELECT 'row', w.name, w.key, p.value, p.position FROM unnest(?::text[], ?::text[]) AS w(name, key) " +
    "CROSS JOIN LATERAL (SELECT value, position FROM projections p WHERE p.name = w.name AND p.key = w.key LIMIT 1) AS p",
  insertEvents:
    "INSERT INTO events (stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash) " +
    "SELECT stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash " +
    "FROM unnest(?::text[], ?::integer[], ?::text[], ?::text[], ?::integer[], ?::text[], ?::text[], ?::text[], ?::text[]) " +
    "WITH ORDINALITY AS t(stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash, n) " +
    "ORDER BY n RETURNING stream_id, version, position",
  // Data-modifying WITH parts run once, to completion, whether or not the outer query reads them.
  write:
    "WITH up AS (INSERT INTO projections (name, key, value, position) " +
    "SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::bigint[]) " +
    "ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, position = excluded.position RETURNING 1), " +
    "fin AS (UPDATE run_guard SET active = 0 WHERE run_id = ANY(?::text[]) RETURNING 1), " +
    "rel AS (UPDATE claims SET worker_id = NULL, lease_until = 0 WHERE run_id = ANY(?::text[]) " +
    "AND (worker_id, run_id) IN (SELECT * FROM unnest(?::text[], ?::text[])) RETURNING 1), " +
    "sealed AS (INSERT INTO meta (key, value) SELECT 'sealed_since', v FROM (SELECT CAST(? AS TEXT) AS v) AS s " +
    "WHERE v IS NOT NULL ON CONFLICT (key) DO NOTHING RETURNING 1), " +
    // The run index follows the runs rows (decision 0073): its columns as arrays, last.
    "ix AS (INSERT INTO run_search (run_id, status, agent, agent_name, chat_key, created_at, updated_at, position) " +
    "SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[]) " +
    "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at, position = excluded.position RETURNING 1) " +
    "SELECT (SELECT count(*) FROM up) AS rows, (SELECT count(*) FROM fin) AS finished, " +
    "(SELECT count(*) FROM rel) AS released, (SELECT count(*) FROM sealed) AS sealed, (SELECT count(*) FROM ix) AS indexed",
};

export const libsqlDialect: Dialect = {
  lockClaimShared: "",
  lockClaimForUpdate: "",
  guardOrder: "rowid",
  projectionRowsPerStatement: 1,
  fencedReadWithRows: false,
  lists: null,
};

export const postgresDialect: Dialect = {
  lockClaimShared: " FOR SHARE",
  lockClaimForUpdate: " FOR UPDATE",
  guardOrder: "seq",
  projectionRowsPerStatement: 16,
  fencedReadWithRows: true,
  lists: postgresLists,
};

const EVENT_COLUMNS =
  "position, stream_id, version, event_id, recorded_at, prev_hash, hash, schema_version, data";

/** `(?, ?), (?, ?), …`: `count` tuples of `width` placeholders. */
const pairs = (count: number, width: number): string =>
  Array.from({ length: count }, () => `(${Array.from({ length: width }, () => "?").join(", ")})`).join(", ");

/** The journal's SQL, for one dialect. */
export const statements = (dialect: Dialect) =>
  ({
    projectionRowsPerStatement: dialect.projectionRowsPerStatement,
    fencedReadWithRows: dialect.fencedReadWithRows,
    lists: dialect.lists,
    head: "SELECT version, hash FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1",
    insertEvent:
      "INSERT INTO events (stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING position",
    stream: `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = ? ORDER BY version`,
    streamAfter: `SELECT ${EVENT_COLUMNS} FROM events WHERE stream_id = ? AND version > ? ORDER BY version`,
    /*
     * No visibility horizon on either engine: every insert into `events` is made under the
     * journal's write lock, so positions are handed out in commit order
     * (docs/decisions/0011-storage-waits-modes-epochs-and-pruned-inputs.md, F9).
     */
    all: `SELECT ${EVENT_COLUMNS} FROM events WHERE position > ? ORDER BY position LIMIT ?`,
    admission: "SELECT chat_id, input_id, digest, run_id FROM admissions WHERE chat_id = ? AND input_id = ?",
    prunedRun: "SELECT run_id, chat_id, status, output_digest, pruned_at FROM pruned_runs WHERE run_id = ?",
    insertAdmission: "INSERT INTO admissions (chat_id, input_id, digest, run_id) VALUES (?, ?, ?, ?)",
    activeRun: "SELECT run_id FROM run_guard WHERE chat_id = ? AND active = 1",
    activeRuns: `SELECT run_id FROM run_guard WHERE active = 1 ORDER BY ${dialect.guardOrder}`,
    activate: "INSERT INTO run_guard (run_id, chat_id, active) VALUES (?, ?, 1)",
    finish: "UPDATE run_guard SET active = 0 WHERE run_id = ?",
    queueOne:
      "INSERT INTO queue_pending (chat_id, pending) VALUES (?, 1) ON CONFLICT (chat_id) DO UPDATE SET pending = queue_pending.pending + 1",
    dequeueEmptied: "DELETE FROM queue_pending WHERE chat_id = ? AND pending <= 1",
    dequeueOne: "UPDATE queue_pending SET pending = pending - 1 WHERE chat_id = ?",
    queuePending: "SELECT chat_id, pending FROM queue_pending ORDER BY chat_id",
    /** Chats with queued inputs and no active run: what a recovery pass admits (decision 0045). */
    idleQueues:
      "SELECT q.chat_id FROM queue_pending q WHERE NOT EXISTS (SELECT 1 FROM run_guard g WHERE g.chat_id = q.chat_id AND g.active = 1) ORDER BY q.chat_id",
    /** The due index (decision 0050): one row per waiting run, written with its `run.waiting`. */
    waitDue:
      "INSERT INTO waits_due (run_id, due_at, wait, call_id) VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET due_at = excluded.due_at, wait = excluded.wait, call_id = excluded.call_id",
    unwait: "DELETE FROM waits_due WHERE run_id = ?",
    /** Waits due at a time, earliest first: what a waker reads (by the `due_at` index, not every run). */
    dueWaits:
      "SELECT run_id, due_at, wait, call_id FROM waits_due WHERE due_at <= ? ORDER BY due_at, run_id LIMIT ?",
    /** The schedule index (decision 0060): one row per active schedule with its next tick. */
    scheduleDue:
      "INSERT INTO schedules_due (schedule_id, due_at) VALUES (?, ?) ON CONFLICT (schedule_id) DO UPDATE SET due_at = excluded.due_at",
    scheduleOff: "DELETE FROM schedules_due WHERE schedule_id = ?",
    /** Schedules whose next tick is due, earliest first: what a tick pass reads (by the `due_at` index). */
    dueSchedules:
      "SELECT schedule_id, due_at FROM schedules_due WHERE due_at <= ? ORDER BY due_at, schedule_id LIMIT ?",
    // The position is read with the value: a sealed row is bound to it (docs/decisions/0013).
    projection: "SELECT value, position FROM projections WHERE name = ? AND key = ?",
    projectionRows: "SELECT key, value, position FROM projections WHERE name = ? ORDER BY position",
    /** The rows of `count` (name, key) pairs, bound as name1, key1, name2, key2, … */
    projectionsOf: (count: number) =>
      `SELECT name, key, value, position FROM projections WHERE (name, key) IN (VALUES ${pairs(count, 2)})`,
    /** Insert or replace `count` rows, bound as name, key, value, position for each. */
    upsertProjectionsOf: (count: number) =>
      `INSERT INTO projections (name, key, value, position) VALUES ${pairs(count, 4)} ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, position = excluded.position`,
    upsertProjection:
      "INSERT INTO projections (name, key, value, position) VALUES (?, ?, ?, ?) ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, position = excluded.position",
    /** The run's owner; a released row (no owner, the epoch kept) is no claim. */
    claim:
      "SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE run_id = ? AND worker_id IS NOT NULL",
    /**
     * The fence's claim row (locked shared on PostgreSQL, as before an append) and the stream's head
     * in one statement: a fenced append reads both, and on PostgreSQL each statement is a round
     * trip. No row when the run has no claim row (the fence then fails before the head matters).
     */
    /**
     * {@link fencedHead} and the projection rows of `count` (name, key) pairs, in one statement:
     * one row per part (`claim`: run_id, worker_id, epoch, lease_until; `head`: hash, version;
     * `row`: name, key, value, position), bound as run id, stream id, then the pairs.
     */
    fencedHeadAndRows: (count: number) =>
      `WITH claim AS (SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE run_id = ?${dialect.lockClaimShared}) ` +
      "SELECT 'claim' AS part, run_id AS name, worker_id AS key, CAST(epoch AS TEXT) AS value, lease_until AS position FROM claim " +
      "UNION ALL SELECT 'head', NULL, hash, CAST(version AS TEXT), NULL FROM (SELECT version, hash FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1) AS head" +
      (count > 0
        ? ` UNION ALL SELECT 'row', name, key, value, position FROM projections WHERE (name, key) IN (VALUES ${pairs(count, 2)})`
        : ""),
    fencedHead: `SELECT run_id, worker_id, epoch, lease_until, (SELECT version FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1) AS head_version, (SELECT hash FROM events WHERE stream_id = ? ORDER BY version DESC LIMIT 1) AS head_hash FROM claims WHERE run_id = ?${dialect.lockClaimShared}`,
    claimForUpdate: `SELECT run_id, worker_id, epoch, lease_until FROM claims WHERE run_id = ?${dialect.lockClaimForUpdate}`,
    insertClaim:
      "INSERT INTO claims (run_id, worker_id, epoch, lease_until) VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO NOTHING RETURNING run_id",
    updateClaim: "UPDATE claims SET worker_id = ?, epoch = ?, lease_until = ? WHERE run_id = ?",
    renew: "UPDATE claims SET lease_until = ? WHERE worker_id = ? RETURNING run_id",
    // A release keeps the row and its epoch: the next claim counts on from it (F24). A claim on a
    // run that was never admitted (a refused submit claims first) goes: there is nothing to fence.
    release: "UPDATE claims SET worker_id = NULL, lease_until = 0 WHERE worker_id = ?",
    releaseRun: "UPDATE claims SET worker_id = NULL, lease_until = 0 WHERE worker_id = ? AND run_id = ?",
    dropUnadmitted:
      "DELETE FROM claims WHERE worker_id = ? AND NOT EXISTS (SELECT 1 FROM run_guard g WHERE g.run_id = claims.run_id)",
    dropUnadmittedRun:
      "DELETE FROM claims WHERE worker_id = ? AND run_id = ? AND NOT EXISTS (SELECT 1 FROM run_guard g WHERE g.run_id = claims.run_id)",
    fingerprintKey: "SELECT value FROM meta WHERE key = 'fingerprint_key'",
    /** The position of the first event written with sealed fields (set once; see keys.ts). */
    markSealed: "INSERT INTO meta (key, value) VALUES ('sealed_since', ?) ON CONFLICT (key) DO NOTHING",
    sealedSince: "SELECT value FROM meta WHERE key = 'sealed_since'",
    eventFrom: `SELECT ${EVENT_COLUMNS} FROM events WHERE position >= ? ORDER BY position LIMIT 1`,
    lastEvent: `SELECT ${EVENT_COLUMNS} FROM events ORDER BY position DESC LIMIT 1`,
  }) as const;

export type Statements = ReturnType<typeof statements>;

/** `?` placeholders to PostgreSQL's `$1, $2, …` (the shared statements hold no `?` in literals). */
export const numberPlaceholders = (sql: string): string => {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
};
