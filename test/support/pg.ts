import { randomBytes } from "node:crypto";
import pg from "pg";

/** The PostgreSQL the tests use. Unreachable is a failure, never a skip. */
export const TEST_PG_URL = process.env.HOLDFAST_TEST_PG_URL || "postgres://postgres@127.0.0.1:5432/test";

/** The test URL with a schema chosen. */
export const pgUrl = (schema: string): string => {
  const url = new URL(TEST_PG_URL);
  url.searchParams.set("schema", schema);
  return url.toString();
};

/** A plain connection outside any journal, with `search_path` set to `schema` when given. */
export const adminClient = async (schema?: string): Promise<pg.Client> => {
  const client = new pg.Client({
    connectionString: TEST_PG_URL,
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
    connectionTimeoutMillis: 5000,
  });
  try {
    await client.connect();
  } catch (cause) {
    throw new Error(
      `PostgreSQL is not reachable at ${TEST_PG_URL} (set HOLDFAST_TEST_PG_URL, or start it: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start): ${String(cause)}`,
    );
  }
  return client;
};

let reachable: Promise<void> | undefined;

/**
 * Fail at once, with the URL and how to start PostgreSQL, when the test database is down: every
 * PostgreSQL test then fails loudly instead of waiting through the journal's connection retries.
 */
export const requirePg = (): Promise<void> => {
  reachable ??= adminClient().then((client) => client.end());
  return reachable;
};

/**
 * Fresh schemas for one test file: every name shares a random prefix; `dropAll` (run it in
 * `afterAll`) drops every one of them, whatever the tests did.
 */
export const usePgSchemas = (): { readonly fresh: () => string; readonly dropAll: () => Promise<void> } => {
  const prefix = `hf_test_${randomBytes(4).toString("hex")}`;
  let count = 0;
  const made: string[] = [];
  const dropAll = async () => {
    if (made.length === 0) return;
    const client = await adminClient();
    try {
      for (const schema of made.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    } finally {
      await client.end();
    }
  };
  return {
    fresh: () => {
      const schema = `${prefix}_${++count}`;
      made.push(schema);
      return schema;
    },
    dropAll,
  };
};
