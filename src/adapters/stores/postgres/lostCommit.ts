/**
 * An append whose COMMIT (or autocommitted `append_owned`) got no answer: the connection died after
 * the statement left and before its reply came. The server may have committed it or not. Every
 * event carries its own id (`event_id`, unique), so the journal reads them back on a fresh
 * connection before anything else happens (decision 0068): all there, the append committed; none
 * there, it did not; no answer within the window, nobody can tell.
 *
 * The read takes the journal's append lock first, in its own transaction: the lost transaction held
 * that lock from before its first insert until its commit or rollback was over, so once the read
 * has it, the lost one is finished — a backend still committing (its client gone) cannot commit
 * after the read said "not there".
 */
import type pg from "pg";
import { checkout, giveBack } from "./pooled.js";

/** What the events of a lost commit turned out to be. */
export type LostCommitFound =
  /** All of them are stored: the append committed. Their positions, by event id. */
  | { readonly committed: true; readonly positions: ReadonlyMap<string, number> }
  /** None is stored: the append did not commit, and can be sent again. */
  | { readonly committed: false }
  /** Some are stored and some are not: one transaction cannot do that; the journal needs an audit. */
  | { readonly committed: "partly"; readonly found: number }
  /** PostgreSQL did not answer within the window. */
  | { readonly committed: "unknown"; readonly lastError: string };

const READ_BACK = "SELECT event_id, position FROM events WHERE event_id = ANY($1::text[])";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Read back the events of an append whose commit got no answer, retrying with doubling back-off
 * (100 ms up to 2 s) until `windowMs` has passed.
 */
export const readBackLostCommit = async (
  pool: pg.Pool,
  schema: string,
  eventIds: ReadonlyArray<string>,
  windowMs: number,
): Promise<LostCommitFound> => {
  const until = Date.now() + windowMs;
  let delay = 100;
  let lastError = "no attempt was made";
  for (;;) {
    try {
      const positions = await readOnce(pool, schema, eventIds, Math.max(1, until - Date.now()));
      if (positions.size === eventIds.length) return { committed: true, positions };
      if (positions.size === 0) return { committed: false };
      return { committed: "partly", found: positions.size };
    } catch (error) {
      lastError = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() + delay > until) return { committed: "unknown", lastError };
    await sleep(delay);
    delay = Math.min(delay * 2, 2_000);
  }
};

const readOnce = async (
  pool: pg.Pool,
  schema: string,
  eventIds: ReadonlyArray<string>,
  remainingMs: number,
): Promise<Map<string, number>> => {
  const client = await checkout(pool);
  // Every statement is bounded by what is left of the window, on the client's side too: a pooled
  // connection that leads into a silent network (a partition holds every packet) never answers, and
  // the server's lock_timeout cannot end a wait the server never hears of.
  const timeout = Math.max(1, Math.ceil(remainingMs));
  const query = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) =>
    client.query<R>({ text, ...(values ? { values } : {}), query_timeout: timeout } as pg.QueryConfig);
  let broken = true;
  try {
    await query(`BEGIN; SET LOCAL lock_timeout = ${timeout}`);
    await query("SELECT pg_advisory_xact_lock(hashtext($1))", [`holdfast.append.${schema}`]);
    const rows = await query<{ event_id: string; position: string }>(READ_BACK, [[...eventIds]]);
    await query("COMMIT");
    broken = false;
    return new Map(rows.rows.map((row) => [row.event_id, Number(row.position)]));
  } finally {
    // A failed read is not rolled back over the same connection (it may be the silent one): the
    // connection is destroyed, and the server ends its transaction with it.
    giveBack(client, broken);
  }
};
