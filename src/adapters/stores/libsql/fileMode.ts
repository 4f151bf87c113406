import { chmodSync, statSync } from "node:fs";

/**
 * DESIGN §9: a journal file is its owner's alone (0600). holdfast creates new files so, but a file
 * made beforehand, copied in or restored keeps its own mode, and SQLite gives the `-wal` and `-shm`
 * it creates the database file's mode. So at every open, before SQLite sees the file, the file and
 * any `-wal`/`-shm` it has are narrowed to 0600.
 *
 * A file this process may not chmod (another user owns it) is opened anyway, with a warning naming
 * the file, its mode and the fix: its owner chose to share it (this process can write it), refusing
 * would not make it any less readable, and the fix is the owner's to make
 * (docs/decisions/0011-storage-waits-modes-epochs-and-pruned-inputs.md).
 *
 * @example
 * ownerOnly("/srv/app/.holdfast/journal.db");
 */
export const ownerOnly = (
  location: string,
  warn: (message: string) => void = (message) =>
    process.emitWarning(message, { code: "HOLDFAST_JOURNAL_MODE" }),
): void => {
  for (const path of [location, `${location}-wal`, `${location}-shm`]) {
    let mode: number;
    let owner: number;
    try {
      const stat = statSync(path);
      mode = stat.mode & 0o777;
      owner = stat.uid;
    } catch {
      continue;
    }
    if ((mode & 0o077) === 0) continue;
    try {
      chmodSync(path, 0o600);
    } catch (error) {
      const uid = process.getuid?.();
      warn(
        `journal ${path} has mode 0${mode.toString(8)}, readable by other users, and this process` +
          `${uid === undefined ? "" : ` (uid ${uid})`} cannot change it (owner uid ${owner}: ${(error as NodeJS.ErrnoException).code ?? String(error)}). ` +
          `Run \`chmod 600 ${path}\` as its owner, or open the journal as that user.`,
      );
    }
  }
};
