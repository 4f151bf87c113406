import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { JournalUnavailable } from "../../runtime/errors.js";
import type { Journal } from "../../runtime/Journal.js";
import { isPostgresUrl, type OpenStoreOptions, openStore, resolveStore } from "../store.js";
import { CliError, ExitCode } from "./CliError.js";

const FIRST_RUN_HINT = "run `holdfast demo` first, or pass --db with the path of a journal";

/**
 * Open a journal that must already exist. Opening creates a missing file (and, at the default
 * location, its folder); a command that only reads must not leave an empty journal behind a typo.
 * A PostgreSQL URL is opened as it is: its schema is the journal.
 */
export const openExistingJournal = async (
  db: string | undefined,
  options: OpenStoreOptions = {},
): Promise<Journal> => {
  const { store } = resolveStore(db);
  if (!isPostgresUrl(store)) {
    const location = resolve(store.replace(/^(libsql|file):(\/\/)?/, ""));
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
  }
  return openStore(db, options);
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
