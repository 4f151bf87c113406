import type pg from "pg";
import { JournalTooNew, JournalUnavailable } from "../../../runtime/errors.js";
import { LATEST_SCHEMA_VERSION } from "./migrations.js";

/**
 * For a read-only open: the schema must hold a holdfast journal of exactly this schema version
 * (a reader never creates or migrates one). Returns the fingerprint key. The schema name was
 * checked against a plain identifier pattern before it reaches this SQL.
 */
export const readableSchemaKey = async (
  pool: pg.Pool,
  location: string,
  schema: string,
): Promise<Uint8Array> => {
  const unavailable = (reason: string, hint: string) => new JournalUnavailable({ location, reason, hint });
  const tables = await pool.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = $1",
    [schema],
  );
  const names = new Set(tables.rows.map((row) => row.name));
  if (!names.has("holdfast_migrations")) {
    const exists = await pool.query("SELECT 1 FROM information_schema.schemata WHERE schema_name = $1", [
      schema,
    ]);
    throw unavailable(
      exists.rows.length === 0
        ? `the schema ${schema} does not exist: there is no journal to read`
        : `the schema ${schema} holds no holdfast journal`,
      "Check ?schema= in the URL; a reader never creates a journal.",
    );
  }
  const applied = await pool.query<{ id: number | null }>(
    `SELECT max(id) AS id FROM ${schema}.holdfast_migrations`,
  );
  const version = applied.rows[0]?.id ?? 0;
  if (version > LATEST_SCHEMA_VERSION)
    throw new JournalTooNew({ location, found: version, supported: LATEST_SCHEMA_VERSION });
  if (version < LATEST_SCHEMA_VERSION)
    throw unavailable(
      `the journal has schema version ${version}, and this holdfast reads version ${LATEST_SCHEMA_VERSION} (a reader never migrates)`,
      "Start a worker of this holdfast on it once, which migrates it, or read it with the holdfast that wrote it.",
    );
  const key = await pool.query<{ value: string }>(
    `SELECT value FROM ${schema}.meta WHERE key = 'fingerprint_key'`,
  );
  const value = key.rows[0]?.value;
  if (!value)
    throw unavailable(
      "the fingerprint key is missing",
      "The journal was changed outside holdfast; restore a backup.",
    );
  return Uint8Array.from(Buffer.from(value, "hex"));
};
