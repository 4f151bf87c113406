/**
 * The write logic of a journal, written once for every engine: a generator that yields the SQL it
 * needs and receives the results. libSQL runs it synchronously, PostgreSQL asynchronously; the
 * sequence of reads, checks and writes is the same code on both (STYLE habit 13).
 */
export type SqlStep =
  /** One row or `undefined`. */
  | { readonly kind: "get"; readonly sql: string; readonly params: ReadonlyArray<unknown> }
  /** Every row. */
  | { readonly kind: "all"; readonly sql: string; readonly params: ReadonlyArray<unknown> }
  /** A write whose result is not needed. */
  | { readonly kind: "run"; readonly sql: string; readonly params: ReadonlyArray<unknown> }
  /** The clock leases are measured with, in epoch milliseconds. */
  | { readonly kind: "now" };

export type Program<T> = Generator<SqlStep, T, unknown>;

/**
 * A unique key refused a write. Engines translate their driver errors into this, naming the
 * logical key, so the shared program maps it to the same typed error everywhere.
 */
export class UniqueViolation extends Error {
  override readonly name = "UniqueViolation";
  readonly key: UniqueKey;
  constructor(key: UniqueKey, detail: string) {
    super(`unique key ${key} refused the write: ${detail}`);
    this.key = key;
  }
}

/** The unique keys the write path relies on. */
export type UniqueKey = "event-version" | "admission" | "active-run" | "other";

export function* get<R>(sql: string, params: ReadonlyArray<unknown>): Program<R | undefined> {
  return (yield { kind: "get", sql, params }) as R | undefined;
}

export function* all<R>(sql: string, params: ReadonlyArray<unknown>): Program<ReadonlyArray<R>> {
  return (yield { kind: "all", sql, params }) as ReadonlyArray<R>;
}

export function* run(sql: string, params: ReadonlyArray<unknown>): Program<void> {
  yield { kind: "run", sql, params };
}

export function* now(): Program<number> {
  return Number(yield { kind: "now" });
}

/** Drive a program with a synchronous executor (libSQL). */
export const runSync = <T>(program: Program<T>, execute: (step: SqlStep) => unknown): T => {
  let next = program.next();
  while (!next.done) {
    let value: unknown;
    try {
      value = execute(next.value);
    } catch (error) {
      next = program.throw(error);
      continue;
    }
    next = program.next(value);
  }
  return next.value;
};

/** Drive a program with an asynchronous executor (PostgreSQL). */
export const runAsync = async <T>(
  program: Program<T>,
  execute: (step: SqlStep) => Promise<unknown>,
): Promise<T> => {
  let next = program.next();
  while (!next.done) {
    let value: unknown;
    try {
      value = await execute(next.value);
    } catch (error) {
      next = program.throw(error);
      continue;
    }
    next = program.next(value);
  }
  return next.value;
};
