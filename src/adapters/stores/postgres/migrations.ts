/**
 * Numbered, append-only migrations of the PostgreSQL journal, tracked in `holdfast_migrations`.
 * The tables mirror the libSQL journal so the shared statements (src/adapters/stores/sql) run unchanged.
 * Names are schema-qualified here, so the triggers work whatever a session's `search_path` is.
 * Never edit a released migration: add the next one.
 */
import { commitChannel } from "./notify.js";

export interface PostgresMigration {
  readonly id: number;
  readonly name: string;
  /** The SQL for a (validated, unquoted-safe) schema name. */
  readonly sql: (schema: string) => string;
}

/** Migration 5's `append_owned`, kept as written: migration 11 replaces it with one that also writes the run index. */
const appendOwnedFunction = (s: string): string => `
CREATE FUNCTION ${s}.append_owned(
  p_runs text[], p_workers text[], p_epochs integer[],
  p_streams text[], p_versions integer[], p_heads text[],
  p_event_streams text[], p_event_versions integer[], p_event_ids text[], p_types text[],
  p_schema_versions integer[], p_recorded_at text[], p_data text[], p_prev_hashes text[], p_hashes text[],
  p_row_names text[], p_row_keys text[], p_row_known text[], p_row_known_positions bigint[],
  p_row_values text[], p_row_events integer[], p_row_first integer[], p_row_last integer[],
  p_stand_ins text[]
) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
  v_positions bigint[];
  v_value text;
  v_values text[] := '{}';
  v_row_positions bigint[] := '{}';
BEGIN
  PERFORM pg_advisory_xact_lock(hashtext('holdfast.append.${s}'));
  -- The claims locked shared in run order, as a batch's read locks them.
  PERFORM 1 FROM ${s}.claims WHERE run_id = ANY(p_runs) ORDER BY run_id FOR SHARE;
  IF (
    SELECT count(*) FROM unnest(p_runs, p_workers, p_epochs) AS f(run_id, worker_id, epoch)
    JOIN ${s}.claims c ON c.run_id = f.run_id AND c.worker_id = f.worker_id AND c.epoch = f.epoch
  ) <> cardinality(p_runs) THEN
    RETURN NULL;
  END IF;
  IF EXISTS (
    SELECT 1 FROM unnest(p_streams, p_versions, p_heads) AS w(stream_id, version, hash)
    LEFT JOIN LATERAL (
      SELECT e.version, e.hash FROM ${s}.events e WHERE e.stream_id = w.stream_id ORDER BY e.version DESC LIMIT 1
    ) AS h ON true
    WHERE h.version IS DISTINCT FROM w.version OR h.hash IS DISTINCT FROM w.hash
  ) THEN
    RETURN NULL;
  END IF;
  IF EXISTS (
    SELECT 1 FROM unnest(p_row_names, p_row_keys, p_row_known, p_row_known_positions) AS w(name, key, known, known_position)
    LEFT JOIN ${s}.projections p ON p.name = w.name AND p.key = w.key
    WHERE p.value IS DISTINCT FROM w.known OR p.position IS DISTINCT FROM w.known_position
  ) THEN
    RETURN NULL;
  END IF;
  WITH inserted AS (
    INSERT INTO ${s}.events (stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash)
    SELECT stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash
    FROM unnest(p_event_streams, p_event_versions, p_event_ids, p_types, p_schema_versions, p_recorded_at, p_data, p_prev_hashes, p_hashes)
      WITH ORDINALITY AS e(stream_id, version, event_id, type, schema_version, recorded_at, data, prev_hash, hash, n)
    ORDER BY n
    RETURNING position, stream_id, version
  )
  SELECT array_agg(i.position ORDER BY e.n) INTO v_positions
  FROM inserted i
  JOIN unnest(p_event_streams, p_event_versions) WITH ORDINALITY AS e(stream_id, version, n)
    ON e.stream_id = i.stream_id AND e.version = i.version;
  FOR r IN 1 .. coalesce(array_length(p_row_names, 1), 0) LOOP
    v_value := p_row_values[r];
    FOR i IN p_row_first[r] .. p_row_last[r] LOOP
      v_value := replace(v_value, p_stand_ins[i], v_positions[i]::text);
    END LOOP;
    v_values[r] := v_value;
    v_row_positions[r] := v_positions[p_row_events[r]];
  END LOOP;
  INSERT INTO ${s}.projections (name, key, value, position)
  SELECT * FROM unnest(p_row_names, p_row_keys, v_values, v_row_positions)
  ON CONFLICT (name, key) DO UPDATE SET value = excluded.value, position = excluded.position;
  PERFORM pg_notify('${commitChannel(s)}', '');
  RETURN v_positions;
END;
$fn$;
`;

/** The run index rows of the runs rows `append_owned` wrote (its rows are never sealed: no key). */
const appendOwnedSearch = (
  s: string,
): string => `  INSERT INTO ${s}.run_search (run_id, status, agent, agent_name, chat_key, created_at, updated_at, position)
  SELECT w.key, coalesce(j->>'status', ''), coalesce(j->>'agent', ''),
    regexp_replace(coalesce(j->>'agent', ''), '^(.+)@[^@]*$', '\\1'), coalesce(j->>'chatId', ''),
    coalesce(j->>'admittedAt', ''), coalesce(j->>'updatedAt', ''), w.position
  FROM unnest(p_row_names, p_row_keys, v_values, v_row_positions) AS w(name, key, value, position)
  CROSS JOIN LATERAL (SELECT w.value::jsonb AS j) AS parsed
  WHERE w.name = 'runs'
  ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at, position = excluded.position;
`;

/** Migration 5's function with the run index written before the notification. */
const appendOwnedWithSearch = (s: string): string => {
  const base = appendOwnedFunction(s);
  const notify = "  PERFORM pg_notify(";
  if (!base.includes("CREATE FUNCTION") || !base.includes(notify))
    throw new Error("migration 11 no longer finds the parts of append_owned it extends");
  return base
    .replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    .replace(notify, () => `${appendOwnedSearch(s)}${notify}`);
};

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
  {
    id: 5,
    name: "a run owner's append in one statement",
    // Run owners append in one round trip when they know their streams' heads and the projection
    // rows they fold from (src/adapters/stores/postgres/ownedAppend.ts, decision 0034): one or several
    // requests, one per run and stream, all or none. Under the append lock every assumption is
    // checked (each claim, each head's version and hash, each row's value and position) and the
    // function returns NULL, having written nothing, if one has moved. The caller folded the rows
    // with a stand-in position per event (p_stand_ins), replaced here, for each row, in its own
    // request's events (p_row_first … p_row_last) by the positions the insert hands out.
    sql: (s) => appendOwnedFunction(s),
  },
  {
    id: 6,
    name: "chats with queued inputs",
    // As libSQL's migration 5: the index recovery finds a chat's queue by (decision 0045).
    sql: (s) => `
CREATE TABLE ${s}.queue_pending (
  chat_id text PRIMARY KEY,
  pending integer NOT NULL CHECK (pending > 0)
);
`,
  },
  {
    id: 7,
    name: "waiting runs by due time",
    // As libSQL's migration 6: the due index wakers read (decision 0050).
    sql: (s) => `
CREATE TABLE ${s}.waits_due (
  run_id text PRIMARY KEY,
  due_at bigint NOT NULL,
  wait text NOT NULL,
  call_id text NOT NULL
);
CREATE INDEX waits_due_by_time ON ${s}.waits_due (due_at);
`,
  },
  {
    id: 8,
    name: "the runtime registry",
    // As libSQL's migration 7: one row per open runtime with its agents (decision 0053).
    sql: (s) => `
CREATE TABLE ${s}.runtimes (
  worker_id         text PRIMARY KEY,
  host              text NOT NULL,
  pid               integer NOT NULL,
  agents            text NOT NULL,
  started_at        bigint NOT NULL,
  seen_at           bigint NOT NULL,
  expires_at        bigint NOT NULL,
  recovers_every_ms bigint
);
`,
  },
  {
    id: 9,
    name: "schedules by next tick",
    // As libSQL's migration 8: the schedule index tick passes read (decision 0060).
    sql: (s) => `
CREATE TABLE ${s}.schedules_due (
  schedule_id text PRIMARY KEY,
  due_at bigint NOT NULL
);
CREATE INDEX schedules_due_by_time ON ${s}.schedules_due (due_at);
`,
  },
  {
    id: 10,
    name: "alerts and their delivery attempts",
    // As libSQL's migration 9: one row per alert, claimed by one sender (decision 0065).
    sql: (s) => `
CREATE TABLE ${s}.alerts (
  key          text PRIMARY KEY,
  run_id       text NOT NULL,
  kind         text NOT NULL,
  body         text NOT NULL,
  created_at   bigint NOT NULL,
  attempts     integer NOT NULL DEFAULT 0,
  tries        text NOT NULL DEFAULT '[]',
  next_at      bigint NOT NULL,
  claimed_by   text,
  claim_until  bigint,
  delivered_at bigint,
  gave_up_at   bigint,
  last_error   text
);
CREATE INDEX alerts_due ON ${s}.alerts (next_at) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
`,
  },
  {
    id: 11,
    name: "the run index",
    // As libSQL's migration 10 (decision 0073): one row per run, no secret in it, written with the
    // run's runs row — by the shared append path, and by append_owned, replaced here. Filled from the
    // runs rows that are not sealed; sealed ones are marked for the first writer with the key.
    sql: (s) => `
CREATE TABLE ${s}.run_search (
  run_id     text COLLATE "C" PRIMARY KEY,
  status     text COLLATE "C" NOT NULL,
  agent      text COLLATE "C" NOT NULL,
  agent_name text COLLATE "C" NOT NULL,
  chat_key   text COLLATE "C" NOT NULL,
  created_at text COLLATE "C" NOT NULL,
  updated_at text COLLATE "C" NOT NULL,
  position   bigint NOT NULL
);
CREATE INDEX run_search_by_created ON ${s}.run_search (created_at, run_id);
CREATE INDEX run_search_by_status ON ${s}.run_search (status, created_at, run_id);
CREATE INDEX run_search_by_chat ON ${s}.run_search (chat_key, created_at, run_id);
CREATE INDEX run_search_by_agent ON ${s}.run_search (agent, created_at, run_id);
CREATE INDEX run_search_by_agent_name ON ${s}.run_search (agent_name, created_at, run_id);
CREATE INDEX run_search_by_updated ON ${s}.run_search (updated_at);
INSERT INTO ${s}.run_search (run_id, status, agent, agent_name, chat_key, created_at, updated_at, position)
SELECT p.key, coalesce(j->>'status', ''), coalesce(j->>'agent', ''),
  regexp_replace(coalesce(j->>'agent', ''), '^(.+)@[^@]*$', '\\1'), coalesce(j->>'chatId', ''),
  coalesce(j->>'admittedAt', ''), coalesce(j->>'updatedAt', ''), p.position
FROM ${s}.projections p CROSS JOIN LATERAL (SELECT p.value::jsonb AS j) AS parsed
WHERE p.name = 'runs' AND left(p.value, 11) <> '{"$sealed":';
INSERT INTO ${s}.meta (key, value) SELECT 'run_search_unfilled', '1'
WHERE EXISTS (SELECT 1 FROM ${s}.projections WHERE name = 'runs' AND left(value, 11) = '{"$sealed":');
${appendOwnedWithSearch(s)}`,
  },
];

/** The schema version a journal has after every migration: the last migration's id. */
export const LATEST_SCHEMA_VERSION = MIGRATIONS.at(-1)?.id ?? 0;
