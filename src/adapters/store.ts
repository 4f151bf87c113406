import { join } from "node:path";
import { JournalUnavailable } from "../runtime/errors.js";
import type { Journal } from "../runtime/Journal.js";
import { LibsqlJournal, type LibsqlJournalOptions } from "./libsql/LibsqlJournal.js";

/** Where the embedded journal lives when nothing else is said. */
export const DEFAULT_STORE = join(".holdfast", "journal.db");

/** The store named by the caller, else `HOLDFAST_STORE`, else the default file. */
export const resolveStore = (store?: string): { readonly store: string; readonly isDefault: boolean } => {
  const chosen = store ?? process.env.HOLDFAST_STORE;
  if (chosen === undefined || chosen === "") return { store: DEFAULT_STORE, isDefault: true };
  return { store: chosen, isDefault: false };
};

/** Mask the password of a URL before it is printed. */
export const maskUrl = (url: string): string => url.replace(/(\/\/[^:/@]+:)[^@]*@/, "$1****@");

/**
 * Open a journal from a store string: a file path or `libsql:`/`file:` URL for the embedded
 * journal. PostgreSQL (`postgres://…`) is selected the same way once its adapter is present.
 */
export const openJournal = (store?: string, options: LibsqlJournalOptions = {}): Journal => {
  const resolved = resolveStore(store);
  const value = resolved.store;
  if (/^postgres(ql)?:\/\//.test(value)) {
    throw new JournalUnavailable({
      location: maskUrl(value),
      reason: "the PostgreSQL journal is not available in this build",
      hint: "Use a libSQL file path (the default is .holdfast/journal.db).",
    });
  }
  const path = value.replace(/^(libsql|file):(\/\/)?/, "");
  return LibsqlJournal.open(path, { createFolder: resolved.isDefault, ...options });
};
