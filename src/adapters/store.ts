import { join } from "node:path";
import { JournalUnavailable } from "../runtime/errors.js";
import type { Journal } from "../runtime/Journal.js";
import { LibsqlJournal, type LibsqlJournalOptions } from "./libsql/LibsqlJournal.js";
import { PostgresJournal, type PostgresJournalOptions } from "./postgres/PostgresJournal.js";
import { isPostgresUrl, maskUrl } from "./postgres/url.js";

export { isPostgresUrl, maskUrl };

/** Where the embedded journal lives when nothing else is said. */
export const DEFAULT_STORE = join(".holdfast", "journal.db");

/** The store named by the caller, else `HOLDFAST_STORE`, else the default file. */
export const resolveStore = (store?: string): { readonly store: string; readonly isDefault: boolean } => {
  const chosen = store ?? process.env.HOLDFAST_STORE;
  if (chosen === undefined || chosen === "") return { store: DEFAULT_STORE, isDefault: true };
  return { store: chosen, isDefault: false };
};

/**
 * Open the embedded journal from a store string: a file path or `libsql:`/`file:` URL.
 * Synchronous, so it cannot open PostgreSQL; use {@link openStore} for that.
 */
export const openJournal = (store?: string, options: LibsqlJournalOptions = {}): Journal => {
  const resolved = resolveStore(store);
  const value = resolved.store;
  if (isPostgresUrl(value)) {
    throw new JournalUnavailable({
      location: maskUrl(value),
      reason: "this command opens journals synchronously and cannot use PostgreSQL yet",
      hint: "Use a libSQL file path here (the default is .holdfast/journal.db), or open the store with openStore().",
    });
  }
  const path = value.replace(/^(libsql|file):(\/\/)?/, "");
  return LibsqlJournal.open(path, { createFolder: resolved.isDefault, ...options });
};

export interface OpenStoreOptions {
  readonly libsql?: LibsqlJournalOptions;
  readonly postgres?: PostgresJournalOptions;
}

/**
 * Open a journal from a store string (else `HOLDFAST_STORE`, else `.holdfast/journal.db`):
 * `postgres://` or `postgresql://` URLs open the shared PostgreSQL journal (schema from
 * `?schema=`, default `holdfast`), anything else the embedded libSQL file.
 *
 * @example
 * const journal = await openStore("postgres://holdfast@db.internal:5432/agents?schema=holdfast");
 */
export const openStore = async (store?: string, options: OpenStoreOptions = {}): Promise<Journal> => {
  const resolved = resolveStore(store);
  if (isPostgresUrl(resolved.store)) return PostgresJournal.open(resolved.store, options.postgres);
  return openJournal(store, options.libsql);
};
