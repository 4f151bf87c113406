import { JournalUnavailable } from "../../../runtime/errors.js";

type PostgresModule = typeof import("./PostgresJournal.js");

/** Imports the PostgreSQL journal module, and with it `pg`; tests pass one that fails as Node does. */
export type PostgresImporter = () => Promise<PostgresModule>;

const importPostgres: PostgresImporter = () => import("./PostgresJournal.js");

/** The package `pg` could not be found: Node's ERR_MODULE_NOT_FOUND naming it. */
const isMissingPg = (error: unknown): boolean =>
  error instanceof Error &&
  (error as { code?: unknown }).code === "ERR_MODULE_NOT_FOUND" &&
  /Cannot find (package|module) ['"]pg['"]/.test(error.message);

/**
 * The PostgreSQL journal, imported only when a `postgres://` store is opened: `pg` is an optional
 * peer dependency, so a libSQL-only application never loads it and need not install it. When it
 * is missing, the error names the package and the command that installs it.
 */
export const loadPostgresJournal = async (
  location: string,
  importer: PostgresImporter = importPostgres,
): Promise<PostgresModule["PostgresJournal"]> => {
  try {
    return (await importer()).PostgresJournal;
  } catch (error) {
    if (!isMissingPg(error)) throw error;
    throw new JournalUnavailable({
      location,
      reason:
        "a postgres:// store needs the PostgreSQL driver, the package `pg` (an optional peer dependency of holdfast), and it is not installed",
      hint: "Install it next to holdfast: npm install pg",
    });
  }
};
