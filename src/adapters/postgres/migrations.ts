/**
 * Numbered, append-only migrations of the PostgreSQL journal, tracked in `holdfast_migrations`.
 * The tables mirror the libSQL journal so the shared statements (src/adapters/sql) run unchanged.
 * Names are schema-qualified here, so the triggers work whatever a session's `search_path` is.
 * Never edit a released migration: add the next one.
 */
export interface PostgresMigration {
  readonly id: number;
  readonly name: string;
  /** The SQL for a (validated, unquoted-safe) schema name. */
  readonly sql: (schema: string) => string;
}

export const MIGRATIONS: ReadonlyArray<PostgresMigration> = [
  {
    id: 1,
    name: "journal",
    sql: (s) => `
CREATE TABLE ${s}.meta (
  key   text PRIMARY KEY,
  value text NOT NULL
);
-- Payloads are canonical JSON kept as TEXT: the bytes that were hashed are the bytes stored, so a
-- row rehashes identically on every engine (JSONB would reorder keys and renormalise numbers).
CREATE TABLE ${s}.events (
  position       bigserial PRIMARY KEY,
  transaction_id xid8    NOT NULL DEFAULT pg_current_xact_id(),
  stream_id      text    NOT NULL,
  version        integer NOT NULL,
  event_id       text    NOT NULL UNIQUE,
  type           text    NOT NULL,
  schema_version integer NOT NULL,
  recorded_at    text    NOT NULL,
  data           text    NOT NULL,
  prev_hash      text    NOT NULL,
  hash           text    NOT NULL,
  CONSTRAINT events_stream_version UNIQUE (stream_id, version)
);
-- Law 5: history is immutable. Only retention of finished runs may delete, and it says so first.
CREATE FUNCTION ${s}.refuse_event_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM ${s}.meta WHERE key = 'retention_in_progress') THEN
    RETURN OLD;
  END IF;
  IF TG_OP = 'DELETE' THEN
    RAISE EXCEPTION 'holdfast events are never deleted except by retention of finished runs'
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RAISE EXCEPTION 'holdfast events are immutable: record a new event instead'
    USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
CREATE TRIGGER events_are_immutable BEFORE UPDATE OR DELETE ON ${s}.events
  FOR EACH ROW EXECUTE FUNCTION ${s}.refuse_event_change();
CREATE TRIGGER events_are_not_truncated BEFORE TRUNCATE ON ${s}.events
  FOR EACH STATEMENT EXECUTE FUNCTION ${s}.refuse_event_change();
CREATE TABLE ${s}.admissions (
  chat_id  text NOT NULL,
  input_id text NOT NULL,
  digest   text NOT NULL,
  run_id   text NOT NULL UNIQUE,
  CONSTRAINT admissions_chat_input PRIMARY KEY (chat_id, input_id)
);
-- One active run per chat, enforced by the database (law 6).
CREATE TABLE ${s}.run_guard (
  run_id  text PRIMARY KEY,
  chat_id text     NOT NULL,
  active  smallint NOT NULL CHECK (active IN (0, 1)),
  seq     bigserial
);
CREATE UNIQUE INDEX one_active_run_per_chat ON ${s}.run_guard (chat_id) WHERE active = 1;
CREATE TABLE ${s}.claims (
  run_id      text PRIMARY KEY,
  worker_id   text    NOT NULL,
  epoch       integer NOT NULL,
  lease_until bigint  NOT NULL
);
CREATE INDEX claims_by_worker ON ${s}.claims (worker_id);
CREATE TABLE ${s}.projections (
  name     text   NOT NULL,
  key      text   NOT NULL,
  value    text   NOT NULL,
  position bigint NOT NULL,
  PRIMARY KEY (name, key)
);
CREATE TABLE ${s}.blobs (
  digest text  PRIMARY KEY,
  data   bytea NOT NULL
);
`,
  },
  {
    id: 2,
    name: "released claims keep their epoch, pruned runs keep their answer",
    // As libSQL's migration 3: a release clears the owner and keeps the epoch (F24); the index by
    // worker holds owned rows only; `pruned_runs` answers a re-sent input of a pruned run (F6).
    sql: (s) => `
ALTER TABLE ${s}.claims ALTER COLUMN worker_id DROP NOT NULL;
DROP INDEX ${s}.claims_by_worker;
CREATE INDEX claims_by_worker ON ${s}.claims (worker_id) WHERE worker_id IS NOT NULL;
CREATE TABLE ${s}.pruned_runs (
  run_id        text PRIMARY KEY,
  chat_id       text NOT NULL,
  status        text NOT NULL,
  output_digest text,
  pruned_at     text NOT NULL
);
`,
  },
  {
    id: 3,
    name: "projection keys in byte order",
    // As SQLite compares text: a key prefix is one contiguous range whatever the database's
    // collation, so a LangGraph thread's rows are one range scan (docs/decisions/0024).
    sql: (s) => `
ALTER TABLE ${s}.projections ALTER COLUMN key TYPE text COLLATE "C";
`,
  },
  {
    id: 4,
    name: "calls folded on read",
    // As libSQL's migration 4: a run's calls are folded from its stream when read (decision 0031).
    sql: (s) => `
DELETE FROM ${s}.projections WHERE name = 'calls';
`,
  },
];

export const LATEST_SCHEMA_VERSION = MIGRATIONS.length;
