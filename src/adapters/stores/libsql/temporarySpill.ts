import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "libsql";
import { type AuditSpill, memorySpill } from "../../../runtime/audit.js";
import { KeyFilter } from "./KeyFilter.js";

type Db = InstanceType<typeof Database>;
type Statement = Database.Statement<unknown[]>;

/** When the spill moves to a file, where, and whether it is sealed. */
export interface TemporarySpillOptions {
  /** Entries kept in memory before everything moves to the file (default 20 000, about 10 MiB). */
  readonly memoryEntries?: number;
  /**
   * Encrypt what goes to the file with a key made for this spill and never stored (set it for an
   * encrypted journal: the audit's rows are decrypted, and must not reach the disk in the clear).
   */
  readonly seal?: boolean;
  /** Where the file's folder is made (default the system's temporary folder). */
  readonly dir?: string;
}

/**
 * The audit's spill for long logs: in memory up to `memoryEntries` entries, then a SQLite file in
 * a fresh folder (mode 0700) of the temporary folder, removed on `close`. The file is scratch, so it
 * is written without a journal or fsync; SQLite's page cache (4 MiB) is all it holds in memory,
 * with a key filter that answers "not there" without a read (docs/decisions/0015).
 *
 * @example
 * const report = await auditJournal(journal, { spill: () => temporarySpill({ seal: journal.keyring !== null }) });
 */
export const temporarySpill = (options: TemporarySpillOptions = {}): AuditSpill => {
  const limit = options.memoryEntries ?? 20_000;
  let memory: AuditSpill | null = memorySpill();
  /** Entries held in memory, per space. */
  const counts = new Map<string, number>();
  let entries = 0;
  let file: SpillFile | null = null;

  const count = (space: string, by: number): void => {
    counts.set(space, (counts.get(space) ?? 0) + by);
    entries += by;
  };

  /** Move every entry held in memory to the file; from then on the file holds everything. */
  const moveToFile = (held: AuditSpill): SpillFile => {
    const opened = new SpillFile(options.dir ?? tmpdir(), options.seal === true);
    for (const space of counts.keys())
      for (const [key, value] of held.drain(space)) opened.put(space, key, value);
    held.close();
    memory = null;
    counts.clear();
    file = opened;
    return opened;
  };

  return {
    put: (space, key, value) => {
      if (file) return file.put(space, key, value);
      const held = memory!;
      if (held.get(space, key) === undefined) count(space, 1);
      held.put(space, key, value);
      if (entries > limit) moveToFile(held);
    },
    get: (space, key) => (file ? file.get(space, key) : memory!.get(space, key)),
    take: (space, keys) => {
      if (file) return file.take(space, keys);
      const taken = memory!.take(space, keys);
      count(space, -taken.size);
      return taken;
    },
    drain: (space) => {
      if (file) return file.drain(space);
      count(space, -(counts.get(space) ?? 0));
      counts.delete(space);
      return memory!.drain(space);
    },
    close: () => {
      memory?.close();
      file?.close();
    },
  };
};

/** Writes are buffered and written in one transaction per this many entries. */
const BATCH = 1000;
/** Rows per multi-row statement, and keys per `IN (…)` (well under SQLite's variable limit). */
const CHUNK = 200;

/** The spill's file: one table of (space, key) → value. */
class SpillFile {
  private readonly folder: string;
  private readonly db: Db;
  private readonly filter = new KeyFilter();
  private readonly pending = new Map<string, Map<string, string>>();
  private pendingCount = 0;
  private readonly sealer: Sealer | null;

  constructor(parent: string, seal: boolean) {
    this.folder = mkdtempSync(join(parent, "holdfast-audit-"));
    this.db = new Database(join(this.folder, "spill.db"));
    this.db.exec(
      "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = -4000;" +
        "CREATE TABLE spill (space TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (space, key)) WITHOUT ROWID",
    );
    this.sealer = seal ? new Sealer() : null;
  }

  put(space: string, key: string, value: string): void {
    let held = this.pending.get(space);
    if (!held) {
      held = new Map();
      this.pending.set(space, held);
    }
    if (!held.has(key)) this.pendingCount += 1;
    held.set(key, value);
    if (this.pendingCount >= BATCH) this.flush();
  }

  get(space: string, key: string): string | undefined {
    const held = this.pending.get(space)?.get(key);
    if (held !== undefined) return held;
    if (!this.filter.mightHold(`${space}\u0000${key}`)) return undefined;
    const row = this.statement("SELECT value FROM spill WHERE space = ? AND key = ?").get(space, key) as
      | { value: Uint8Array | string }
      | undefined;
    return row ? this.open(space, key, row.value) : undefined;
  }

  take(space: string, keys: ReadonlyArray<string>): Map<string, string> {
    this.flush();
    const taken = new Map<string, string>();
    for (let start = 0; start < keys.length; start += CHUNK) {
      const chunk = keys.slice(start, start + CHUNK);
      const marks = chunk.map(() => "?").join(", ");
      const rows = this.statement(`SELECT key, value FROM spill WHERE space = ? AND key IN (${marks})`).all(
        space,
        ...chunk,
      ) as Array<{ key: string; value: Uint8Array | string }>;
      if (rows.length === 0) continue;
      for (const row of rows) taken.set(row.key, this.open(space, row.key, row.value));
      this.statement(`DELETE FROM spill WHERE space = ? AND key IN (${marks})`).run(space, ...chunk);
    }
    return taken;
  }

  *drain(space: string): Iterable<readonly [string, string]> {
    this.flush();
    const first = this.statement("SELECT key, value FROM spill WHERE space = ? ORDER BY key LIMIT ?");
    const next = this.statement(
      "SELECT key, value FROM spill WHERE space = ? AND key > ? ORDER BY key LIMIT ?",
    );
    let after: string | null = null;
    for (;;) {
      const rows = (after === null ? first.all(space, BATCH) : next.all(space, after, BATCH)) as Array<{
        key: string;
        value: Uint8Array | string;
      }>;
      for (const row of rows) yield [row.key, this.open(space, row.key, row.value)] as const;
      if (rows.length < BATCH) break;
      after = rows.at(-1)!.key;
    }
    this.statement("DELETE FROM spill WHERE space = ?").run(space);
  }

  close(): void {
    try {
      this.db.close();
    } finally {
      rmSync(this.folder, { recursive: true, force: true });
    }
  }

  private readonly statements = new Map<string, Statement>();
  private statement(sql: string): Statement {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      prepared = this.db.prepare<unknown[]>(sql);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }

  private flush(): void {
    if (this.pendingCount === 0) return;
    const values: unknown[] = [];
    const write = () => {
      if (values.length === 0) return;
      const rows = values.length / 3;
      this.statement(
        `INSERT OR REPLACE INTO spill (space, key, value) VALUES ${"(?, ?, ?), ".repeat(rows).slice(0, -2)}`,
      ).run(...values);
      values.length = 0;
    };
    this.db.exec("BEGIN");
    try {
      for (const [space, held] of this.pending)
        for (const [key, value] of held) {
          this.filter.add(`${space}\u0000${key}`);
          values.push(space, key, this.sealer ? this.sealer.seal(space, key, value) : value);
          if (values.length >= CHUNK * 3) write();
        }
      write();
      this.db.exec("COMMIT");
    } catch (error) {
      this.db.exec("ROLLBACK");
      throw error;
    }
    this.pending.clear();
    this.pendingCount = 0;
  }

  private open(space: string, key: string, stored: Uint8Array | string): string {
    if (typeof stored === "string") return stored;
    if (!this.sealer) return Buffer.from(stored).toString("utf8");
    return this.sealer.open(space, key, stored);
  }
}

/** AES-256-GCM under a key that lives only in this process: the file is unreadable once it ends. */
class Sealer {
  private readonly key = randomBytes(32);
  private readonly prefix = randomBytes(4);
  private counter = 0n;

  seal(space: string, key: string, value: string): Buffer {
    // A counter makes every IV under this key distinct, as GCM requires.
    const iv = Buffer.alloc(12);
    this.prefix.copy(iv, 0);
    iv.writeBigUInt64BE(this.counter++, 4);
    const cipher = createCipheriv("aes-256-gcm", this.key, iv);
    cipher.setAAD(Buffer.from(`${space}\u0000${key}`, "utf8"));
    const body = Buffer.concat([cipher.update(value, "utf8"), cipher.final()]);
    return Buffer.concat([iv, cipher.getAuthTag(), body]);
  }

  open(space: string, key: string, sealed: Uint8Array): string {
    const bytes = Buffer.from(sealed);
    const decipher = createDecipheriv("aes-256-gcm", this.key, bytes.subarray(0, 12));
    decipher.setAAD(Buffer.from(`${space}\u0000${key}`, "utf8"));
    decipher.setAuthTag(bytes.subarray(12, 28));
    return Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]).toString("utf8");
  }
}
