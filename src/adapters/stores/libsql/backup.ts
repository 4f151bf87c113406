import { randomBytes } from "node:crypto";
import {
  chmodSync,
  closeSync,
  existsSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  rmSync,
  statSync,
} from "node:fs";
import { dirname, resolve } from "node:path";
import * as Data from "effect/Data";
import Database from "libsql";
import { SYSTEM_STREAM } from "../../../events/index.js";
import type { AuditReport } from "../../../runtime/audit.js";
import { crashPoint } from "../../../runtime/crash.js";
import { auditStore } from "../../auditStore.js";
import { LibsqlJournal } from "./LibsqlJournal.js";
import { readOnlyUri } from "./readOnly.js";
import { storageFailureOf } from "./sqlite.js";

/** The target of a backup exists already: holdfast never overwrites one. */
export class BackupTargetExists extends Data.TaggedError("BackupTargetExists")<{ readonly path: string }> {
  override get message(): string {
    return `${this.path} already exists, and a backup never overwrites a file; choose a new path (e.g. with the date in its name)`;
  }
}

/** The folder of a backup cannot take the file. */
export class BackupTargetUnusable extends Data.TaggedError("BackupTargetUnusable")<{
  readonly path: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `cannot write a backup to ${this.path}: ${this.reason}; choose a path in an existing, writable folder with room for the copy`;
  }
}

/** The copy was written but did not verify; it was removed, nothing was recorded. */
export class BackupNotVerified extends Data.TaggedError("BackupNotVerified")<{
  readonly path: string;
  readonly reason: string;
}> {
  override get message(): string {
    return `the backup at ${this.path} did not verify (${this.reason}), so it was removed and no backup.written was recorded; run \`holdfast audit\` on the journal`;
  }
}

export interface BackupReport {
  readonly path: string;
  readonly bytes: number;
  readonly mode: string;
  readonly integrity: "ok";
  /** The copy's audit: clean, with its head digest and event count. */
  readonly audit: AuditReport;
  /** The `backup.written` event appended to the source's `system` stream. */
  readonly recorded: { readonly streamId: string; readonly version: number };
}

/** Anything at the path, a dangling symlink included: writing through it would land elsewhere. */
const occupied = (path: string): boolean => {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
};

const removeCopy = (path: string): void => {
  for (const suffix of ["", "-wal", "-shm"]) rmSync(`${path}${suffix}`, { force: true });
};

/** Flush a file (or a folder's entries) to the disk. */
const syncPath = (path: string): void => {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

/**
 * Back up a libSQL journal (DESIGN §9): `VACUUM INTO` a new file under a temporary name next to the
 * target (`<target>.partial-<random>`, mode 0600), then run SQLite's full integrity check and the
 * holdfast audit on it; only a clean copy counts. It is then synced and linked to the target name
 * (never over an existing file) and its folder synced: a file at the target name is always a whole,
 * verified copy — a full disk, a failure or a kill on the way leaves none (a failure removes the
 * temporary file; a kill may leave it, under its `.partial-` name). Only then is `backup.written`
 * (path, head digest, event count) appended to the source's `system` stream.
 *
 * @example
 * const report = await backupJournal(journal, "/backups/journal-2025-06-01.db");
 * console.log(report.audit.headDigest);
 */
export const backupJournal = async (
  journal: LibsqlJournal,
  target: string,
  options: { readonly onProgress?: (events: number) => void } = {},
): Promise<BackupReport> => {
  const path = resolve(target);
  if (occupied(path)) throw new BackupTargetExists({ path });
  const folder = dirname(path);
  if (!existsSync(folder) || !statSync(folder).isDirectory())
    throw new BackupTargetUnusable({ path, reason: `the folder ${folder} does not exist` });
  const partial = `${path}.partial-${randomBytes(4).toString("hex")}`;
  try {
    // Made here, exclusively and 0600, before SQLite writes into it: VACUUM INTO fills an empty file.
    closeSync(openSync(partial, "wx", 0o600));
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new BackupTargetUnusable({ path, reason: `the file cannot be created (${code ?? String(error)})` });
  }
  let audit: AuditReport;
  try {
    try {
      journal.unsafeDatabase().prepare("VACUUM INTO ?").run(partial);
    } catch (error) {
      const full = storageFailureOf(error);
      if (full) throw new BackupTargetUnusable({ path, reason: `${full}; the partial copy was removed` });
      throw error;
    }
    chmodSync(partial, 0o600);
    audit = await verifyCopy(partial, path, options.onProgress);
    syncPath(partial);
    crashPoint("backup-verified");
    try {
      linkSync(partial, path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") throw new BackupTargetExists({ path });
      throw error;
    }
    syncPath(folder);
  } catch (error) {
    if (error instanceof BackupTargetUnusable || error instanceof BackupTargetExists) throw error;
    if (error instanceof BackupNotVerified) throw error;
    throw new BackupNotVerified({ path, reason: error instanceof Error ? error.message : String(error) });
  } finally {
    removeCopy(partial);
  }
  const appended = await journal.append({
    streamId: SYSTEM_STREAM,
    expectedVersion: "any",
    events: [{ type: "backup.written", path, headDigest: audit.headDigest, events: audit.events }],
  });
  const stat = statSync(path);
  return {
    path,
    bytes: stat.size,
    mode: (stat.mode & 0o777).toString(8).padStart(4, "0"),
    integrity: "ok",
    audit,
    recorded: { streamId: SYSTEM_STREAM, version: appended.nextVersion },
  };
};

/** `PRAGMA integrity_check` of a file, on a read-only connection; the problems it lists. */
const integrityProblems = (path: string): string[] => {
  const db = new Database(readOnlyUri(path));
  try {
    const rows = db.prepare("PRAGMA integrity_check").all() as Array<Record<string, unknown>>;
    return rows.map((row) => String(Object.values(row)[0])).filter((v) => v !== "ok");
  } finally {
    db.close();
  }
};

/**
 * Check every page of the copy and audit it, read-only; throws `BackupNotVerified` unless clean.
 * Verifying writes nothing: the copy stays as `VACUUM INTO` made it, with no anchor beside it.
 */
const verifyCopy = async (
  copyPath: string,
  path: string,
  onProgress?: (events: number) => void,
): Promise<AuditReport> => {
  const problems = integrityProblems(copyPath);
  if (problems.length > 0)
    throw new BackupNotVerified({ path, reason: `integrity check: ${problems.slice(0, 3).join("; ")}` });
  const copy = LibsqlJournal.openReadOnly(copyPath);
  try {
    const audit = await auditStore(copy, onProgress ? { onProgress } : {});
    if (!audit.clean) {
      const first = audit.findings[0];
      throw new BackupNotVerified({
        path,
        reason: `the audit found ${audit.findings.length + audit.findingsOmitted} problem(s)${first ? `, first: ${first.kind} ${first.streamId ?? ""}@${first.version ?? ""} ${first.detail}` : ""}`,
      });
    }
    return audit;
  } finally {
    await copy.close();
  }
};
