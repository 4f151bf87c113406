import { createHash } from "node:crypto";
import { copyFileSync, existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../cli/cliProcess.js";

/** The files that are the journal's content: the database, its WAL and its head anchor (not the -shm index). */
export const JOURNAL_FILES = ["", "-wal", "-anchor"] as const;

/**
 * sha256 of each of a journal's content files that exists and holds something, by suffix. An empty
 * WAL counts as none: SQLite makes one (and the -shm index) for any connection to a WAL-mode file,
 * a read-only one included, and it holds nothing.
 */
export const journalBytes = (db: string): Record<string, string> => {
  const hashes: Record<string, string> = {};
  for (const suffix of JOURNAL_FILES) {
    const path = `${db}${suffix}`;
    if (!existsSync(path)) continue;
    const bytes = readFileSync(path);
    if (suffix === "-wal" && bytes.length === 0) continue;
    hashes[suffix || "db"] = createHash("sha256").update(bytes).digest("hex");
  }
  return hashes;
};

/** Copy a journal's database, WAL and anchor (as they are, an open journal's too) into `dir`. */
export const copyJournalFiles = (db: string, dir: string): string => {
  const to = join(dir, "journal.db");
  for (const suffix of JOURNAL_FILES)
    if (existsSync(`${db}${suffix}`)) copyFileSync(`${db}${suffix}`, `${to}${suffix}`);
  return to;
};

export const filesIn = (dir: string): string[] => readdirSync(dir).sort();

export interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** `holdfast` in this process (the command functions, parser and error mapping of the real CLI). */
export const cli = async (args: ReadonlyArray<string>): Promise<CliRun> => {
  const { code, stdout, stderr } = await runCli(args);
  // Only a child process killed by a signal has no exit code.
  if (code === null) throw new Error(`holdfast ${args.join(" ")} has no exit code`);
  return { code, stdout, stderr };
};
