import type pg from "pg";
import { JournalUnavailable } from "../../../runtime/errors.js";
import type { ConnectRetry } from "./options.js";

/** Server answers that another attempt will not change: wrong password, missing database, no rights. */
const FINAL_CODES = new Set(["28000", "28P01", "3D000", "42501"]);

const describe = (error: unknown): string => {
  if (error instanceof AggregateError && error.errors.length > 0) return describe(error.errors[0]);
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return code && !error.message.includes(String(code)) ? `${error.message} (${code})` : error.message;
  }
  return String(error);
};

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Make sure the pool can reach the server, retrying with doubling back-off: a database that is
 * still starting is common when workers and PostgreSQL come up together. Fails with a
 * `JournalUnavailable` naming the (masked) location and the last cause.
 */
export const connectWithRetry = async (
  pool: pg.Pool,
  location: string,
  retry: ConnectRetry = {},
): Promise<void> => {
  const attempts = Math.max(1, retry.attempts ?? 5);
  let delay = retry.initialDelayMs ?? 200;
  const started = Date.now();
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query("SELECT 1");
      return;
    } catch (error) {
      const code = String((error as { code?: unknown }).code ?? "");
      if (FINAL_CODES.has(code)) {
        throw new JournalUnavailable({
          location,
          reason: `PostgreSQL refused the connection: ${describe(error)}`,
          hint: "Check the user, password and database name in HOLDFAST_STORE.",
        });
      }
      if (attempt >= attempts) {
        const seconds = ((Date.now() - started) / 1000).toFixed(1);
        throw new JournalUnavailable({
          location,
          reason: `PostgreSQL could not be reached after ${attempts} attempts over ${seconds} s (last error: ${describe(error)})`,
          hint: "Start PostgreSQL or correct the host and port in HOLDFAST_STORE, then try again.",
        });
      }
      await sleep(delay);
      delay *= 2;
    }
  }
};
