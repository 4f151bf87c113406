import { join } from "node:path";
import { JournalUnavailable } from "../runtime/errors.js";
import type { Journal, JournalReader } from "../runtime/Journal.js";
import {
  LibsqlJournal,
  type LibsqlJournalOptions,
  type LibsqlReaderOptions,
} from "./stores/libsql/LibsqlJournal.js";
import { loadPostgresJournal } from "./stores/postgres/load.js";
import type { PostgresJournalOptions } from "./stores/postgres/options.js";
import { isPostgresUrl, maskUrl } from "./stores/postgres/url.js";

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
  return LibsqlJournal.open(libsqlPath(value), { createFolder: resolved.isDefault, ...options });
};

/** The file path of a libSQL store string (`libsql:` and `file:` prefixes dropped). */
export const libsqlPath = (store: string): string => store.replace(/^(libsql|file):(\/\/)?/, "");

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
  if (isPostgresUrl(resolved.store))
    return (await loadPostgresJournal(maskUrl(resolved.store))).open(resolved.store, options.postgres);
  return openJournal(store, options.libsql);
};

export interface OpenReaderStoreOptions {
  readonly libsql?: LibsqlReaderOptions;
  readonly postgres?: Omit<PostgresJournalOptions, "readOnly">;
}

/**
 * Open an existing journal read-only, from a store string as {@link openStore} reads it: a libSQL
 * file through a read-only connection (nothing created, migrated, checkpointed or anchored), a
 * PostgreSQL schema through read-only transactions (nothing created or migrated). For watchers,
 * auditors and operators' views: it never claims, recovers or writes.
 *
 * @example
 * const reader = await openStoreReader("/evidence/journal.db");
 * const report = await auditJournal(reader);
 * await reader.close();
 */
export const openStoreReader = async (
  store?: string,
  options: OpenReaderStoreOptions = {},
): Promise<JournalReader> => {
  const resolved = resolveStore(store);
  if (isPostgresUrl(resolved.store))
    return (await loadPostgresJournal(maskUrl(resolved.store))).open(resolved.store, {
      ...options.postgres,
      readOnly: true,
    });
  return LibsqlJournal.openReadOnly(libsqlPath(resolved.store), options.libsql);
};
