/**
 * Numbered, append-only migrations. `PRAGMA user_version` is the journal's schema version.
 * Never edit a released migration: add the next one.
 */
export const MIGRATIONS: ReadonlyArray<{ readonly id: number; readonly name: string; readonly sql: string }> =
  [
    {
      id: 1,
      name: "journal",
      sql: `
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE events (
  position       INTEGER PRIMARY KEY AUTOINCREMENT,
  stream_id      TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  event_id       TEXT    NOT NULL UNIQUE,
  type           TEXT    NOT NULL,
  schema_version INTEGER NOT NULL,
  recorded_at    TEXT    NOT NULL,
  data           TEXT    NOT NULL,
  prev_hash      TEXT    NOT NULL,
  hash           TEXT    NOT NULL,
  UNIQUE (stream_id, version)
);
-- Law 5: history is immutable. Only retention of finished runs may delete, and it says so first.
CREATE TRIGGER events_are_immutable BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'holdfast events are immutable: record a new event instead');
END;
CREATE TRIGGER events_are_not_deleted BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM meta WHERE key = 'retention_in_progress')
BEGIN
  SELECT RAISE(ABORT, 'holdfast events are never deleted except by retention of finished runs');
END;
CREATE TABLE admissions (
  chat_id  TEXT NOT NULL,
  input_id TEXT NOT NULL,
  digest   TEXT NOT NULL,
  run_id   TEXT NOT NULL UNIQUE,
  PRIMARY KEY (chat_id, input_id)
);
-- One active run per chat, enforced by the database (law 6).
CREATE TABLE run_guard (
  run_id  TEXT PRIMARY KEY,
  chat_id TEXT NOT NULL,
  active  INTEGER NOT NULL CHECK (active IN (0, 1))
);
CREATE UNIQUE INDEX one_active_run_per_chat ON run_guard (chat_id) WHERE active = 1;
CREATE TABLE claims (
  run_id      TEXT PRIMARY KEY,
  worker_id   TEXT    NOT NULL,
  epoch       INTEGER NOT NULL,
  lease_until INTEGER NOT NULL
);
CREATE TABLE projections (
  name     TEXT    NOT NULL,
  key      TEXT    NOT NULL,
  value    TEXT    NOT NULL,
  position INTEGER NOT NULL,
  PRIMARY KEY (name, key)
);
CREATE TABLE blobs (
  digest TEXT PRIMARY KEY,
  data   BLOB NOT NULL
);
`,
    },
    {
      id: 2,
      name: "fewer pages per commit",
      // Every commit wrote ~7 pages where the disk floor writes ~1.2. Two of them go here:
      // - `events.event_id` loses its UNIQUE index: the ids are random UUIDs written by the journal,
      //   nothing looks events up by id, and each insert landed on a random page of that index.
      //   Positions, their AUTOINCREMENT (never reused after retention) and UNIQUE (stream_id,
      //   version) stay; the copy keeps every row, position and the sequence as they were.
      // - `projections` becomes WITHOUT ROWID: its primary key is the row, one B-tree instead of a
      //   table plus its key index, so an upsert writes one page instead of two.
      // The triggers go with the old table and are created again, unchanged, on the new one.
      sql: `
CREATE TABLE events_v2 (
  position       INTEGER PRIMARY KEY AUTOINCREMENT,
  stream_id      TEXT    NOT NULL,
  version        INTEGER NOT NULL,
  event_id       TEXT    NOT NULL,
  type           TEXT    NOT NULL,
  schema_version INTEGER NOT NULL,
  recorded_at    TEXT    NOT NULL,
  data           TEXT    NOT NULL,
  prev_hash      TEXT    NOT NULL,
  hash           TEXT    NOT NULL,
  UNIQUE (stream_id, version)
);
INSERT INTO events_v2 (position, stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash)
  SELECT position, stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash
  FROM events ORDER BY position;
-- The highest position ever handed out, also when retention removed the events that held it.
INSERT INTO sqlite_sequence (name, seq) SELECT 'events_v2', 0
  WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_v2');
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
  WHERE name = 'events_v2';
DROP TABLE events;
ALTER TABLE events_v2 RENAME TO events;
-- Law 5: history is immutable. Only retention of finished runs may delete, and it says so first.
CREATE TRIGGER events_are_immutable BEFORE UPDATE ON events
BEGIN
  SELECT RAISE(ABORT, 'holdfast events are immutable: record a new event instead');
END;
CREATE TRIGGER events_are_not_deleted BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM meta WHERE key = 'retention_in_progress')
BEGIN
  SELECT RAISE(ABORT, 'holdfast events are never deleted except by retention of finished runs');
END;
CREATE TABLE projections_v2 (
  name     TEXT    NOT NULL,
  key      TEXT    NOT NULL,
  value    TEXT    NOT NULL,
  position INTEGER NOT NULL,
  PRIMARY KEY (name, key)
) WITHOUT ROWID;
INSERT INTO projections_v2 (name, key, value, position) SELECT name, key, value, position FROM projections;
DROP TABLE projections;
ALTER TABLE projections_v2 RENAME TO projections;
`,
    },
    {
      id: 3,
      name: "released claims keep their epoch, pruned runs keep their answer",
      // - A release clears a claim's owner instead of deleting the row, so the next claim of the run
      //   counts on from its epoch and a fence of an earlier execution never matches again (F24):
      //   `worker_id` becomes nullable (SQLite changes a column's constraints only by copying the
      //   table). Renewals and releases look claims up by worker: the index holds owned rows only,
      //   so the released rows of every finished run cost nothing there.
      // - Retention keeps admissions (law 6); `pruned_runs` keeps what a re-sent input of a pruned
      //   run is answered with: the run's final status, its output digest, when it was pruned (F6).
      sql: `
CREATE TABLE claims_v3 (
  run_id      TEXT PRIMARY KEY,
  worker_id   TEXT,
  epoch       INTEGER NOT NULL,
  lease_until INTEGER NOT NULL
);
INSERT INTO claims_v3 (run_id, worker_id, epoch, lease_until) SELECT run_id, worker_id, epoch, lease_until FROM claims;
DROP TABLE claims;
ALTER TABLE claims_v3 RENAME TO claims;
CREATE INDEX claims_by_worker ON claims (worker_id) WHERE worker_id IS NOT NULL;
CREATE TABLE pruned_runs (
  run_id        TEXT PRIMARY KEY,
  chat_id       TEXT NOT NULL,
  status        TEXT NOT NULL,
  output_digest TEXT,
  pruned_at     TEXT NOT NULL
);
`,
    },
    {
      id: 4,
      name: "calls folded on read",
      // A run's calls are folded from its stream when read (docs/decisions/0031): the stored rows
      // go, so nothing of a pruned run stays in them and no reader finds rows that no longer move.
      sql: `
DELETE FROM projections WHERE name = 'calls';
`,
    },
    {
      id: 5,
      name: "chats with queued inputs",
      // The index recovery finds a chat's queue by (decision 0045): one row per chat with inputs
      // queued and neither admitted nor withdrawn, written in the transaction of the queue's events.
      sql: `
CREATE TABLE queue_pending (
  chat_id TEXT PRIMARY KEY,
  pending INTEGER NOT NULL CHECK (pending > 0)
);
`,
    },
    {
      id: 6,
      name: "waiting runs by due time",
      // The due index wakers read (decision 0050): one row per waiting run, written in the
      // transaction of its `run.waiting`, removed with its `run.woken` or `run.cancelled`.
      sql: `
CREATE TABLE waits_due (
  run_id  TEXT PRIMARY KEY,
  due_at  INTEGER NOT NULL,
  wait    TEXT NOT NULL,
  call_id TEXT NOT NULL
);
CREATE INDEX waits_due_by_time ON waits_due (due_at);
`,
    },
    {
      id: 7,
      name: "the runtime registry",
      // One row per open runtime with its agents, renewed by its heartbeat and expiring like a lease
      // (decision 0053): how a reader knows whether a runtime that can continue a run is live now.
      sql: `
CREATE TABLE runtimes (
  worker_id         TEXT PRIMARY KEY,
  host              TEXT NOT NULL,
  pid               INTEGER NOT NULL,
  agents            TEXT NOT NULL,
  started_at        INTEGER NOT NULL,
  seen_at           INTEGER NOT NULL,
  expires_at        INTEGER NOT NULL,
  recovers_every_ms INTEGER
);
`,
    },
    {
      id: 8,
      name: "schedules by next tick",
      // The schedule index tick passes read (decision 0060): one row per active schedule with its
      // next tick, written in the transaction of the schedule's events; paused and deleted have none.
      sql: `
CREATE TABLE schedules_due (
  schedule_id TEXT PRIMARY KEY,
  due_at      INTEGER NOT NULL
);
CREATE INDEX schedules_due_by_time ON schedules_due (due_at);
`,
    },
    {
      id: 9,
      name: "alerts and their delivery attempts",
      // One row per alert (decision 0065), keyed <runId>@<version>: recorded once however many
      // processes see the run held, claimed by one sender, every attempt kept in \`tries\`.
      sql: `
CREATE TABLE alerts (
  key          TEXT PRIMARY KEY,
  run_id       TEXT NOT NULL,
  kind         TEXT NOT NULL,
  body         TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  attempts     INTEGER NOT NULL DEFAULT 0,
  tries        TEXT NOT NULL DEFAULT '[]',
  next_at      INTEGER NOT NULL,
  claimed_by   TEXT,
  claim_until  INTEGER,
  delivered_at INTEGER,
  gave_up_at   INTEGER,
  last_error   TEXT
);
CREATE INDEX alerts_due ON alerts (next_at) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
`,
    },
    {
      id: 10,
      name: "the run index",
      // One row per run (decision 0073), holding no secret: status, agent, times, position, and the
      // chat id — as a keyed digest when the journal is sealed. Written in the commit of the run's
      // runs row, so the runs list reads one page through these indexes, never every row. Filled here
      // from the runs rows that are not sealed; sealed ones (unreadable without the key) are marked,
      // and the first writer opened with the key indexes them.
      sql: `
CREATE TABLE run_search (
  run_id     TEXT PRIMARY KEY,
  status     TEXT NOT NULL,
  agent      TEXT NOT NULL,
  agent_name TEXT NOT NULL,
  chat_key   TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  position   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX run_search_by_created ON run_search (created_at, run_id);
CREATE INDEX run_search_by_status ON run_search (status, created_at, run_id);
CREATE INDEX run_search_by_chat ON run_search (chat_key, created_at, run_id);
CREATE INDEX run_search_by_agent ON run_search (agent, created_at, run_id);
CREATE INDEX run_search_by_agent_name ON run_search (agent_name, created_at, run_id);
CREATE INDEX run_search_by_updated ON run_search (updated_at);
INSERT INTO run_search (run_id, status, agent, agent_name, chat_key, created_at, updated_at, position)
SELECT key, status, agent,
  CASE WHEN length(upto) > 1 THEN substr(upto, 1, length(upto) - 1) ELSE agent END,
  chat, created, updated, position
FROM (
  SELECT key, position, status, agent, rtrim(agent, replace(agent, '@', '')) AS upto, chat, created, updated
  FROM (
    SELECT key, position,
      coalesce(json_extract(value, '$.status'), '') AS status,
      coalesce(json_extract(value, '$.agent'), '') AS agent,
      coalesce(json_extract(value, '$.chatId'), '') AS chat,
      coalesce(json_extract(value, '$.admittedAt'), '') AS created,
      coalesce(json_extract(value, '$.updatedAt'), '') AS updated
    FROM projections WHERE name = 'runs' AND substr(value, 1, 11) <> '{"$sealed":'
  )
);
INSERT INTO meta (key, value) SELECT 'run_search_unfilled', '1'
WHERE EXISTS (SELECT 1 FROM projections WHERE name = 'runs' AND substr(value, 1, 11) = '{"$sealed":');
`,
    },
  ];

/** The schema version a journal has after every migration: the last migration's id. */
export const LATEST_SCHEMA_VERSION = MIGRATIONS.at(-1)?.id ?? 0;

/** `PRAGMA application_id` of a holdfast journal: "hfj1". */
export const APPLICATION_ID = 0x68666a31;
