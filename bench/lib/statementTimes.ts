import { createRequire } from "node:module";

/** One statement's count and total time. */
export interface Timed {
  n: number;
  ns: bigint;
}

/**
 * Time every statement the libSQL driver runs, by its SQL (the first 90 characters), while
 * `measuring` is on: each prepared statement's get/run/all and `exec`. Installed once per process,
 * before the journal prepares its statements.
 */
export const timeStatements = (): { readonly times: Map<string, Timed>; measuring: boolean } => {
  const state = { times: new Map<string, Timed>(), measuring: false };
  const note = (key: string, started: bigint): void => {
    if (!state.measuring) return;
    const entry = state.times.get(key) ?? { n: 0, ns: 0n };
    entry.n += 1;
    entry.ns += process.hrtime.bigint() - started;
    state.times.set(key, entry);
  };
  const Database = createRequire(import.meta.url)("libsql");
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (this: unknown, sql: string, ...rest: unknown[]) {
    const statement = prepare.call(this, sql, ...rest);
    for (const method of ["get", "run", "all"]) {
      const original = statement[method];
      statement[method] = function (this: unknown, ...args: unknown[]) {
        const started = process.hrtime.bigint();
        try {
          return original.apply(this, args);
        } finally {
          note(`${method} ${sql.replace(/\s+/g, " ").slice(0, 90)}`, started);
        }
      };
    }
    return statement;
  };
  const exec = Database.prototype.exec;
  Database.prototype.exec = function (this: unknown, sql: string) {
    const started = process.hrtime.bigint();
    try {
      return exec.call(this, sql);
    } finally {
      note(`exec ${sql.slice(0, 60)}`, started);
    }
  };
  return state;
};

/** The statements by total time, per `unit` (an event, a run): count, µs per unit, µs each, SQL. */
export const statementLines = (times: Map<string, Timed>, units: number, unit: string, top = 20): string[] =>
  [...times]
    .sort((a, b) => Number(b[1].ns - a[1].ns))
    .slice(0, top)
    .map(
      ([sql, entry]) =>
        `${String(entry.n).padStart(7)} ${(Number(entry.ns) / 1000 / units).toFixed(1).padStart(7)} µs/${unit} ${(Number(entry.ns) / 1000 / entry.n).toFixed(1).padStart(8)} µs each  ${sql}`,
    );

/** The time of all statements, in µs per unit. */
export const statementsPer = (times: Map<string, Timed>, units: number): string => {
  let total = 0n;
  for (const entry of times.values()) total += entry.ns;
  return (Number(total) / 1000 / units).toFixed(1);
};
