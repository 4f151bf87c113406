import { spawnSync } from "node:child_process";
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { LATEST_SCHEMA_VERSION } from "../../src/adapters/stores/libsql/migrations.js";
import { JournalTooNew, JournalUnavailable } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

const tempDir = useTempDir();
const ROOT = join(import.meta.dirname, "..", "..");
const modeOf = (path: string): string => (statSync(path).mode & 0o777).toString(8);
const opened = { type: "journal.opened", schemaVersion: 1, engine: "libsql" } as const;

/** Root ignores permission bits; a read-only folder can only be tested as another user. */
const permissionsApply = (dir: string): boolean => {
  const probe = join(dir, "ro");
  mkdirSync(probe);
  chmodSync(probe, 0o555);
  try {
    writeFileSync(join(probe, "x"), "x");
    return false;
  } catch {
    return true;
  } finally {
    chmodSync(probe, 0o755);
  }
};

describe("journal file", () => {
  it("a new journal file and its WAL are created with mode 0600", async () => {
    const dir = tempDir();
    const path = join(dir, "journal.db");
    const journal = LibsqlJournal.open(path);
    await journal.append({
      streamId: "system",
      expectedVersion: "no-stream",
      events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
    });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(`${path}-wal`).mode & 0o777).toBe(0o600);
    await journal.close();
  });

  it("a path in a missing folder is refused with the folder named and a hint, creating nothing", () => {
    const dir = tempDir();
    const path = join(dir, "nope", "journal.db");
    expect(() => LibsqlJournal.open(path)).toThrow(JournalUnavailable);
    try {
      LibsqlJournal.open(path);
    } catch (error) {
      expect((error as JournalUnavailable).reason).toContain(join(dir, "nope"));
      expect((error as JournalUnavailable).hint).toMatch(/--db/);
    }
  });

  it("a path in a read-only folder is refused with a clear reason", () => {
    const dir = tempDir();
    const ro = join(dir, "readonly");
    mkdirSync(ro);
    chmodSync(ro, 0o555);
    if (permissionsApply(dir)) {
      expect(() => LibsqlJournal.open(join(ro, "journal.db"))).toThrow(/not writable/);
    } else {
      // As root the folder is writable after all: opening works, which is also the truth.
      expect(() => LibsqlJournal.open(join(ro, "journal.db")).close()).not.toThrow();
    }
    chmodSync(ro, 0o755);
  });

  it("a file that is not a database is refused and left byte-for-byte unchanged", () => {
    const dir = tempDir();
    const path = join(dir, "notes.txt");
    writeFileSync(path, "these are my notes, not a journal\n".repeat(200));
    const before = readFileSync(path);
    expect(() => LibsqlJournal.open(path)).toThrow(/not a database/);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it("a SQLite database that is not a holdfast journal is refused", () => {
    const dir = tempDir();
    const path = join(dir, "other.db");
    const db = new Database(path);
    db.exec("CREATE TABLE things (id INTEGER)");
    db.close();
    expect(() => LibsqlJournal.open(path)).toThrow(/not a holdfast journal/);
  });

  it("a journal from a newer schema version is refused with JournalTooNew and not changed", async () => {
    const dir = tempDir();
    const path = join(dir, "journal.db");
    await LibsqlJournal.open(path).close();
    const db = new Database(path);
    db.exec(`PRAGMA user_version = ${LATEST_SCHEMA_VERSION + 1}`);
    db.close();
    const before = readFileSync(path);
    expect(() => LibsqlJournal.open(path)).toThrow(JournalTooNew);
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it("a journal whose fingerprint key was removed behind holdfast's back is refused by the writer and the reader, naming the file and what to do", async () => {
    const dir = tempDir();
    const path = join(dir, "journal.db");
    await LibsqlJournal.open(path).close();
    const db = new Database(path);
    db.prepare("DELETE FROM meta WHERE key = 'fingerprint_key'").run();
    db.close();
    for (const open of [() => LibsqlJournal.open(path), () => LibsqlJournal.openReadOnly(path)]) {
      let error: unknown;
      try {
        open();
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(JournalUnavailable);
      expect(error).toMatchObject({ location: path, reason: "the fingerprint key is missing" });
      expect((error as JournalUnavailable).hint).toContain("restore a backup");
    }
  });

  it("reopening a journal keeps its fingerprint key and its events", async () => {
    const dir = tempDir();
    const path = join(dir, "journal.db");
    const a = LibsqlJournal.open(path);
    await a.append({
      streamId: "system",
      expectedVersion: "no-stream",
      events: [{ type: "journal.opened", schemaVersion: 1, engine: "libsql" }],
    });
    const key = Buffer.from(a.fingerprintKey).toString("hex");
    await a.close();
    const b = LibsqlJournal.open(path);
    expect(Buffer.from(b.fingerprintKey).toString("hex")).toBe(key);
    expect(await b.readStream("system")).toHaveLength(1);
    await b.close();
  });

  it("F22: a journal file made beforehand with mode 0644 ends 0600, and so do its -wal and -shm", async () => {
    const path = join(tempDir(), "journal.db");
    closeSync(openSync(path, "w"));
    chmodSync(path, 0o644);
    const journal = LibsqlJournal.open(path);
    await journal.append({ streamId: "system", expectedVersion: "no-stream", events: [opened] });
    expect([modeOf(path), modeOf(`${path}-wal`), modeOf(`${path}-shm`)]).toEqual(["600", "600", "600"]);
    await journal.close();
  });

  it("F22: a journal whose file, -wal and -shm were loosened to 0644 while open is tightened to 0600 by the next open", async () => {
    const path = join(tempDir(), "journal.db");
    const first = LibsqlJournal.open(path);
    await first.append({ streamId: "system", expectedVersion: "no-stream", events: [opened] });
    for (const file of [path, `${path}-wal`, `${path}-shm`]) chmodSync(file, 0o644);
    const second = LibsqlJournal.open(path);
    expect([modeOf(path), modeOf(`${path}-wal`), modeOf(`${path}-shm`)]).toEqual(["600", "600", "600"]);
    await second.close();
    await first.close();
  });

  it("F22: a journal another user owns with a loose mode is opened with a warning naming the file and the fix, and left as it is", async () => {
    const dir = tempDir();
    const path = join(dir, "journal.db");
    const journal = LibsqlJournal.open(path);
    await journal.append({ streamId: "system", expectedVersion: "no-stream", events: [opened] });
    await journal.close();
    const script = `
      const { LibsqlJournal } = await import(${JSON.stringify(join(ROOT, "src/adapters/stores/libsql/LibsqlJournal.ts"))});
      const j = LibsqlJournal.open(${JSON.stringify(path)});
      await j.append({ streamId: "system", expectedVersion: 1, events: [${JSON.stringify(opened)}] });
      await j.close();
      console.log("appended");
    `;
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      // Only root can hand the file to someone else: the journal is root's, opened by \`nobody\`.
      chmodSync(dir, 0o777);
      for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-anchor`])
        if (existsSync(file)) chmodSync(file, 0o666);
    }
    const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: ROOT,
      encoding: "utf8",
      ...(asRoot ? { uid: 65534, gid: 65534 } : {}),
    });
    expect(child.stdout, child.stderr).toContain("appended");
    if (asRoot) {
      expect(child.stderr).toContain(`journal ${path} has mode 0666`);
      expect(child.stderr).toMatch(/chmod 600/);
      expect(modeOf(path)).toBe("666");
    } else {
      // The file is this user's own: the child tightens it, and has nothing to warn about.
      expect(child.stderr).not.toContain("has mode");
      expect(modeOf(path)).toBe("600");
    }
  });
});
