import { existsSync, statSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { JournalUnavailable } from "../../../runtime/errors.js";
import type { Journal, JournalReader } from "../../../runtime/Journal.js";
import {
  isPostgresUrl,
  libsqlPath,
  type OpenReaderStoreOptions,
  type OpenStoreOptions,
  openStore,
  openStoreReader,
  resolveStore,
} from "../../store.js";
import { anchorPathOf } from "../../stores/libsql/anchor.js";
import { CliError, ExitCode } from "./CliError.js";

const FIRST_RUN_HINT = "run `holdfast demo` first, or pass --db with the path of a journal";

/**
 * A command that works on a journal must not leave an empty one behind a typo: a missing file (or
 * folder) or an empty file is refused here, before anything is opened. A file whose head anchor
 * is still there is left to the open, which says what was lost. A PostgreSQL URL passes as it is.
 */
export const requireJournalFile = (store: string): void => {
  if (isPostgresUrl(store)) return;
  const location = resolve(libsqlPath(store));
  if (existsSync(anchorPathOf(location))) return;
  if (!existsSync(location)) {
    const folder = dirname(location);
    if (!existsSync(folder)) {
      throw new JournalUnavailable({
        location,
        reason: `the folder ${folder} does not exist`,
        hint: FIRST_RUN_HINT,
      });
    }
    throw new CliError(ExitCode.failed, `there is no journal at ${location}`, FIRST_RUN_HINT);
  }
  if (statSync(location).isFile() && statSync(location).size === 0) {
    throw new JournalUnavailable({
      location,
      reason: "the file is empty (0 bytes) and holds no journal",
      hint: `${FIRST_RUN_HINT}; nothing was written to it`,
    });
  }
};

/** Open a journal that must already exist, for a command that writes to it. */
export const openExistingJournal = async (
  db: string | undefined,
  options: OpenStoreOptions = {},
): Promise<Journal> => {
  requireJournalFile(resolveStore(db).store);
  return openStore(db, options);
};

/** Open an existing journal read-only, for a command that only reads: it changes nothing. */
export const openExistingReader = async (
  db: string | undefined,
  options: OpenReaderStoreOptions = {},
): Promise<JournalReader> => {
  requireJournalFile(resolveStore(db).store);
  return openStoreReader(db, options);
};

/** Run `fn` with an existing journal, closing it however `fn` ends. */
export const withExistingJournal = async <T>(
  db: string | undefined,
  fn: (journal: Journal) => Promise<T>,
  options: OpenStoreOptions = {},
): Promise<T> => {
  const journal = await openExistingJournal(db, options);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
};

/** Run `fn` with an existing journal opened read-only, closing it however `fn` ends. */
export const withExistingReader = async <T>(
  db: string | undefined,
  fn: (journal: JournalReader) => Promise<T>,
  options: OpenReaderStoreOptions = {},
): Promise<T> => {
  const journal = await openExistingReader(db, options);
  try {
    return await fn(journal);
  } finally {
    await journal.close();
  }
};
