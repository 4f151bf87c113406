/**
 * Where the audit sets aside what it no longer needs at hand (DESIGN §8, bounded memory): rebuilt
 * projection rows it has not touched for a while, and the call records of runs that ended. Keys
 * live in named spaces; values are text. Synchronous, as the checks are. `get` is asked for every
 * row the audit does not hold, new ones included, so a miss must be cheap.
 *
 * The runtime has no I/O: {@link memorySpill} keeps everything in memory (what an audit of a small
 * log, or a test, needs); the adapters give one that moves to a temporary file past a threshold.
 */
export interface AuditSpill {
  /** Set a value aside (replacing one under the same key). */
  put(space: string, key: string, value: string): void;
  get(space: string, key: string): string | undefined;
  /** Remove these keys and return the values that were there. */
  take(space: string, keys: ReadonlyArray<string>): Map<string, string>;
  /** Yield what is left in a space, in key order, then forget the space. */
  drain(space: string): Iterable<readonly [string, string]>;
  /** Release what the spill holds (a temporary file is removed). */
  close(): void;
}

/**
 * A spill that keeps everything in memory.
 *
 * @example
 * const report = await auditJournal(journal, { spill: memorySpill });
 */
export const memorySpill = (): AuditSpill => {
  const spaces = new Map<string, Map<string, string>>();
  const spaceOf = (space: string): Map<string, string> => {
    let entries = spaces.get(space);
    if (!entries) {
      entries = new Map();
      spaces.set(space, entries);
    }
    return entries;
  };
  return {
    put: (space, key, value) => {
      spaceOf(space).set(key, value);
    },
    get: (space, key) => spaces.get(space)?.get(key),
    take: (space, keys) => {
      const taken = new Map<string, string>();
      const entries = spaces.get(space);
      if (!entries) return taken;
      for (const key of keys) {
        const value = entries.get(key);
        if (value === undefined) continue;
        taken.set(key, value);
        entries.delete(key);
      }
      return taken;
    },
    *drain(space) {
      const entries = spaces.get(space);
      if (!entries) return;
      spaces.delete(space);
      for (const key of [...entries.keys()].sort()) yield [key, entries.get(key)!] as const;
    },
    close: () => spaces.clear(),
  };
};
