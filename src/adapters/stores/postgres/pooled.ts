/**
 * The PostgreSQL journal's pooled connections: checked out with a watch for the server ending the
 * session, given back (destroyed when broken), and statements prepared by name.
 */
import { createHash } from "node:crypto";
import pg from "pg";
import { JournalUnavailable } from "../../../runtime/errors.js";
import { numberPlaceholders } from "../sql/statements.js";

/** Connections the server ended while checked out, and their error listeners. */
export const ended = new WeakSet<pg.PoolClient>();
const listeners = new WeakMap<pg.PoolClient, () => void>();

/**
 * A pooled connection for a transaction. While checked out nobody else listens for its errors, and
 * a connection the server ends (idle-in-transaction timeout, restart) must fail our next query,
 * not crash the process; it is remembered so a batch knows its COMMIT was never sent.
 */
export const checkout = (pool: pg.Pool): Promise<pg.PoolClient> =>
  new Promise((resolve, reject) => {
    // The callback form, so the watch is on before anything else runs: the promise form resumes
    // the caller a microtask later, and a server that ends the session in the same packet as the
    // one that completed the connection (a restart just then) would emit the error to nobody,
    // which crashes the process.
    pool.connect((error, client) => {
      if (error || !client) {
        reject(error ?? new Error("the pool gave no connection"));
        return;
      }
      const listener = () => ended.add(client);
      listeners.set(client, listener);
      client.on("error", listener);
      resolve(client);
    });
  });

export const giveBack = (client: pg.PoolClient, broken = false): void => {
  const listener = listeners.get(client);
  if (listener) client.off("error", listener);
  client.release(broken || ended.has(client) || undefined);
};

/**
 * Whether the server refused a statement with an ERROR, so its autocommitted transaction wrote
 * nothing. A FATAL or PANIC (a terminated session, a shutdown: class 57, 08) may come after the
 * commit: that is a lost connection, answered "may or may not have been written".
 */
export const refusedBeforeCommit = (error: unknown): boolean =>
  error instanceof pg.DatabaseError &&
  error.severity === "ERROR" &&
  !String(error.code).startsWith("57") &&
  !String(error.code).startsWith("08");

/**
 * PostgreSQL refused a statement for want of resources — class 53: its disk is full (53100), it is
 * out of memory (53200) or of connections (53300): the store is unavailable, not the request wrong.
 * Refused with an ERROR, so nothing of the statement's transaction is written (decision 0070, the
 * PostgreSQL side): `JournalUnavailable` without `written: "unknown"`. Null for any other error.
 */
export const outOfResources = (error: unknown, location: string): JournalUnavailable | null => {
  if (!(error instanceof pg.DatabaseError) || !String(error.code).startsWith("53")) return null;
  const what =
    error.code === "53100"
      ? "its disk is full"
      : error.code === "53200"
        ? "it is out of memory"
        : error.code === "53300"
          ? "it has no connection left"
          : "it lacks a resource";
  return new JournalUnavailable({
    location,
    reason: `PostgreSQL refused the statement because ${what} (${error.code}: ${error.message}); nothing of it was written`,
    hint: 'Free space on (or add resources to) the PostgreSQL server; holdfast refuses new work until then and goes on once writes succeed. Calls whose outcome could not be written stay in doubt: recovery holds their runs for a decision (docs/operations.md, "When the disk is full").',
  });
};

/** Statement names and numbered texts by SQL text; the journal's texts are few, a bound keeps it so. */
const named = new Map<string, { readonly name: string; readonly text: string }>();
const NAMED_MAX = 1024;

/** A named prepared statement per distinct text: parsed once per connection. */
export const prepared = (sql: string, params: ReadonlyArray<unknown>): pg.QueryConfig => {
  let statement = named.get(sql);
  if (!statement) {
    if (named.size >= NAMED_MAX) named.clear();
    statement = {
      name: `hf_${createHash("sha1").update(sql).digest("hex").slice(0, 20)}`,
      text: numberPlaceholders(sql),
    };
    named.set(sql, statement);
  }
  return { name: statement.name, text: statement.text, values: [...params] };
};

export const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error));
