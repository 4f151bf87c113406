/**
 * The run search index (decision 0073): one row per run in `run_search`, holding no secret — status,
 * agent, times, position, and the chat as a keyed digest when the journal is sealed — written in the
 * commit of the run's `runs` projection row, so the runs list and its search read one page of rows
 * through indexes instead of every projection row. The same SQL on both engines.
 */
import { type Keyring, openProjectionValue } from "../../../events/index.js";
import type { RunRow } from "../../../projections/index.js";
import type { RunSearch, RunSearchKey, RunSearchResult } from "../../../runtime/Journal.js";
import { all, get, type Program, run } from "./program.js";

/** One row of the index, as written. */
export interface RunSearchRow {
  readonly runId: string;
  readonly status: string;
  /** `name@version`. */
  readonly agent: string;
  /** The agent's name alone (everything before the last `@`). */
  readonly agentName: string;
  /** The chat id, or its keyed digest ({@link Keyring.searchDigest}) when the journal is sealed. */
  readonly chatKey: string;
  /** When the run was admitted (ISO 8601, as the runs row has it). */
  readonly createdAt: string;
  /** When its last event that the runs row follows was recorded. */
  readonly updatedAt: string;
  readonly position: number;
}

/** The projection whose rows the index follows. */
export const SEARCHED_PROJECTION = "runs";

/** `name` of `name@version` (as `runtime/liveness` reads it): everything before the last `@`. */
export const agentNameOf = (agent: string): string => {
  const at = agent.lastIndexOf("@");
  return at > 0 ? agent.slice(0, at) : agent;
};

/** The index row of a runs projection row; the chat id is digested when a key seals the journal. */
export const searchRowOf = (row: RunRow, ring: Keyring | null): RunSearchRow => {
  // A row of an older shape may lack a field: the index holds "" rather than refuse the commit.
  const agent = row.agent ?? "";
  const chat = row.chatId ?? "";
  return {
    runId: row.runId,
    status: row.status ?? "",
    agent,
    agentName: agentNameOf(agent),
    chatKey: ring ? ring.searchDigest(chat) : chat,
    createdAt: row.admittedAt ?? "",
    updatedAt: row.updatedAt ?? "",
    position: row.position,
  };
};

const COLUMNS = "run_id, status, agent, agent_name, chat_key, created_at, updated_at, position";
/**
 * Only what changes is set on a conflict: a run's agent, chat and admission time never do, and an
 * update that leaves an indexed column out of its SET leaves that index alone (SQLite).
 */
const ON_CONFLICT =
  "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at, position = excluded.position";

const tuples = (count: number, width: number): string =>
  Array.from({ length: count }, () => `(${Array.from({ length: width }, () => "?").join(", ")})`).join(", ");

const placeholders = (count: number): string => Array.from({ length: count }, () => "?").join(", ");

/** The SQL of the index, the same text on both engines (`?` placeholders). */
export const SEARCH_SQL = {
  /** Insert or update `count` rows, bound as the {@link COLUMNS} of each. */
  upsert: (count: number) => `INSERT INTO run_search (${COLUMNS}) VALUES ${tuples(count, 8)} ${ON_CONFLICT}`,
  /**
   * The same from one array per column (PostgreSQL's batch write): run ids, statuses, agents, agent
   * names, chat keys, created, updated (text[]), positions (bigint[]).
   */
  upsertLists: `INSERT INTO run_search (${COLUMNS}) SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[]) ${ON_CONFLICT}`,
  deleteAll: "DELETE FROM run_search",
  deleteRows: (count: number) => `DELETE FROM run_search WHERE run_id IN (${placeholders(count)})`,
  /** Runs rows with no index row, in key order: what a fill after the migration reads. */
  unindexed:
    "SELECT p.key, p.value, p.position FROM projections p WHERE p.name = 'runs' AND p.key > ? AND NOT EXISTS (SELECT 1 FROM run_search s WHERE s.run_id = p.key) ORDER BY p.key LIMIT ?",
  unfilledMark: "SELECT value FROM meta WHERE key = 'run_search_unfilled'",
  unmarkUnfilled: "DELETE FROM meta WHERE key = 'run_search_unfilled'",
} as const;

/**
 * A projection upsert followed by the upsert of `count` index rows in one statement (PostgreSQL: a
 * data-modifying WITH part runs once, to completion), bound as the projection's values, then the
 * index rows'.
 */
export const withSearchRows = (upsertProjections: string, count: number): string =>
  `WITH projected AS (${upsertProjections} RETURNING 1) ${SEARCH_SQL.upsert(count)}`;

/** Write the index rows, `per` to a statement (the dialect's projection batching). */
export function* writeSearchRows(rows: ReadonlyArray<RunSearchRow>, per: number): Program<void> {
  for (let from = 0; from < rows.length; from += per) {
    const chunk = rows.slice(from, from + per);
    yield* run(SEARCH_SQL.upsert(chunk.length), chunk.flatMap(searchValues));
  }
}

/** An index row's values in the order of {@link SEARCH_SQL.upsert}. */
export const searchValues = (r: RunSearchRow): unknown[] => [
  r.runId,
  r.status,
  r.agent,
  r.agentName,
  r.chatKey,
  r.createdAt,
  r.updatedAt,
  r.position,
];

/** The index rows as one array per column, for {@link SEARCH_SQL.upsertLists}. */
export const searchColumns = (rows: ReadonlyArray<RunSearchRow>): unknown[][] => [
  rows.map((r) => r.runId),
  rows.map((r) => r.status),
  rows.map((r) => r.agent),
  rows.map((r) => r.agentName),
  rows.map((r) => r.chatKey),
  rows.map((r) => r.createdAt),
  rows.map((r) => r.updatedAt),
  rows.map((r) => r.position),
];

/** Remove the index rows of these runs (retention removed their runs rows). */
export function* deleteSearchRows(runIds: ReadonlyArray<string>): Program<void> {
  for (let from = 0; from < runIds.length; from += 200) {
    const chunk = runIds.slice(from, from + 200);
    yield* run(SEARCH_SQL.deleteRows(chunk.length), chunk);
  }
}

/** The WHERE conditions of a search, without the keyset bound, and their values. */
const conditions = (query: RunSearch): { readonly where: string[]; readonly values: unknown[] } => {
  const where: string[] = [];
  const values: unknown[] = [];
  if (query.idPrefix !== undefined && query.idPrefix !== "") {
    // A prefix is a range of the primary key (byte order on both engines).
    where.push("s.run_id >= ? AND s.run_id < ?");
    values.push(query.idPrefix, `${query.idPrefix}\uffff`);
  }
  if (query.chatKeys !== undefined) {
    where.push(
      query.chatKeys.length === 0 ? "1 = 0" : `s.chat_key IN (${placeholders(query.chatKeys.length)})`,
    );
    values.push(...query.chatKeys);
  }
  if (query.agent !== undefined) {
    where.push(query.agent.version ? "s.agent = ?" : "s.agent_name = ?");
    values.push(query.agent.version ? `${query.agent.name}@${query.agent.version}` : query.agent.name);
  }
  if (query.statuses !== undefined) {
    where.push(
      query.statuses.length === 0 ? "1 = 0" : `s.status IN (${placeholders(query.statuses.length)})`,
    );
    values.push(...query.statuses);
  }
  if (query.notRunIds !== undefined && query.notRunIds.length > 0) {
    where.push(`s.run_id NOT IN (${placeholders(query.notRunIds.length)})`);
    values.push(...query.notRunIds);
  }
  const column = query.timeOf === "updated" ? "s.updated_at" : "s.created_at";
  if (query.from !== undefined) {
    where.push(`${column} >= ?`);
    values.push(query.from);
  }
  if (query.to !== undefined) {
    where.push(`${column} < ?`);
    values.push(query.to);
  }
  return { where, values };
};

const whereText = (where: ReadonlyArray<string>): string =>
  where.length === 0 ? "" : ` WHERE ${where.join(" AND ")}`;

/** A stored runs row as SQL returns it. */
interface StoredRunsRow {
  readonly key: string;
  readonly value: string;
  readonly position: number | string;
}

/** A stored runs row, opened when sealed. */
const openRunsRow = (ring: Keyring | null, row: StoredRunsRow): RunRow =>
  JSON.parse(
    openProjectionValue(
      ring,
      { name: SEARCHED_PROJECTION, key: row.key, position: Number(row.position) },
      row.value,
    ),
  ) as RunRow;

interface PageRow extends StoredRunsRow {
  readonly created_at: string;
}

/**
 * One page of runs matching the search, newest admitted first (`created_at`, then run id, both
 * descending): after `after` (the next page), or before `before` (the previous page), at most
 * `limit`, with whether more lie beyond it. Each row is the runs projection row, read in the same
 * statement and opened with the ring. Reads the page's rows only (plus one for `more`).
 */
export function* searchRunsProgram(query: RunSearch, ring: Keyring | null): Program<RunSearchResult> {
  const { where, values } = conditions(query);
  const backwards = query.before !== undefined;
  const bound: RunSearchKey | undefined = query.before ?? query.after;
  if (bound) {
    where.push(backwards ? "(s.created_at, s.run_id) > (?, ?)" : "(s.created_at, s.run_id) < (?, ?)");
    values.push(bound.createdAt, bound.runId);
  }
  const direction = backwards ? "ASC" : "DESC";
  // The page is chosen from the index alone, then joined with its runs rows. Left to itself,
  // SQLite read every runs row first and probed the page (1 s at 100,000 runs): a CROSS JOIN keeps
  // its left side the outer loop there; PostgreSQL plans it as any inner join.
  const rows = yield* all<PageRow>(
    `SELECT p.key, p.value, p.position, page.created_at FROM (SELECT s.run_id, s.created_at FROM run_search s${whereText(where)} ORDER BY s.created_at ${direction}, s.run_id ${direction} LIMIT ?) AS page CROSS JOIN projections p WHERE p.name = 'runs' AND p.key = page.run_id ORDER BY page.created_at ${direction}, page.run_id ${direction}`,
    [...values, query.limit + 1],
  );
  const more = rows.length > query.limit;
  const page = rows.slice(0, query.limit);
  if (backwards) page.reverse();
  return {
    rows: page.map((row) => ({
      key: { createdAt: row.created_at, runId: row.key },
      row: openRunsRow(ring, row),
    })),
    more,
  };
}

/**
 * How many runs match each search (without paging), each counted up to its `limit` + 1 — enough to
 * tell "more than `limit`" — in one statement (one round trip on PostgreSQL). A count reads every
 * row it counts, and on PostgreSQL each one's heap tuple too unless vacuum has marked its page
 * all-visible, which a recently changed run's page (a held or running one) is not: the caller's
 * `limit` is what bounds a count's cost (decision 0090).
 */
export function* countRunsProgram(queries: ReadonlyArray<RunSearch>): Program<number[]> {
  if (queries.length === 0) return [];
  const parts: string[] = [];
  const values: unknown[] = [];
  // A search asked twice (the held runs' page counts its total and the held runs alike) is counted once.
  const columns = new Map<string, string>();
  const named = queries.map((query) => {
    const c = conditions(query);
    const upTo = Math.max(0, Math.trunc(query.limit)) + 1;
    const key = JSON.stringify([c.where, c.values, upTo]);
    let column = columns.get(key);
    if (column === undefined) {
      column = `n${columns.size}`;
      columns.set(key, column);
      parts.push(
        `(SELECT count(*) FROM (SELECT 1 FROM run_search s${whereText(c.where)} LIMIT ?) AS m) AS ${column}`,
      );
      values.push(...c.values, upTo);
    }
    return column;
  });
  const row = yield* get<Record<string, number | string>>(`SELECT ${parts.join(", ")}`, values);
  return named.map((column) => Number(row?.[column] ?? 0));
}

/** Whether the migration left runs rows it could not index (sealed): a writer with the key fills them. */
export function* searchUnfilledProgram(): Program<boolean> {
  return (yield* get<{ value: string }>(SEARCH_SQL.unfilledMark, [])) !== undefined;
}

/**
 * Index the runs rows that have no index row yet (sealed rows the migration could not read), page
 * by page, and clear the mark. Runs in a write transaction of a journal with the key.
 */
export function* fillSearchProgram(
  ring: Keyring | null,
  per: number,
): Program<{ readonly filled: number; readonly unreadable: ReadonlyArray<string> }> {
  let after = "";
  let filled = 0;
  const unreadable: string[] = [];
  for (;;) {
    const page = yield* all<StoredRunsRow>(SEARCH_SQL.unindexed, [after, 500]);
    const rows: ReturnType<typeof searchRowOf>[] = [];
    for (const row of page) {
      // One row the key does not open (tampered, restored from another copy, a retired key) is
      // left out and named; it never keeps every other run out of the index.
      try {
        rows.push(searchRowOf(openRunsRow(ring, row), ring));
      } catch {
        unreadable.push(row.key);
      }
    }
    yield* writeSearchRows(rows, per);
    filled += rows.length;
    const last = page.at(-1);
    if (!last || page.length < 500) break;
    after = last.key;
  }
  yield* run(SEARCH_SQL.unmarkUnfilled, []);
  return { filled, unreadable };
}

/** Say once which runs rows the run index could not open: they are not listed until a rebuild. */
export const warnUnreadable = (location: string, unreadable: ReadonlyArray<string>): void => {
  if (unreadable.length === 0) return;
  const shown = unreadable.slice(0, 10).join(", ");
  process.emitWarning(
    `journal ${location}: ${unreadable.length} runs row${unreadable.length === 1 ? "" : "s"} could not be opened with the key and ${unreadable.length === 1 ? "is" : "are"} left out of the run index (${shown}${unreadable.length > 10 ? ", …" : ""}); run \`holdfast audit\`, then \`holdfast rebuild\`, which says why`,
    { code: "HOLDFAST_RUN_INDEX" },
  );
};
