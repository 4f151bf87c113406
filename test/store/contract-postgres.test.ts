import type pg from "pg";
import { openStore } from "../../src/adapters/store.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { type EventRow, toStored } from "../../src/adapters/stores/sql/rows.js";
import { freshKey, keyEnv, NO_KEYS } from "../support/keys.js";
import { adminClient, pgUrl, requirePg, usePgSchemas } from "../support/pg.js";
import { type ContractStore, journalContract } from "./contract.js";

const schemas = usePgSchemas();
const admins: pg.Client[] = [];

/** `env`: where the journals read their payload keys (encrypted or not). */
const freshStore =
  (env: Readonly<Record<string, string | undefined>>) => async (): Promise<ContractStore> => {
    await requirePg();
    const schema = schemas.fresh();
    const url = pgUrl(schema);
    /** A separate connection, for what a test does behind the journal's back. */
    const raw = async <T>(fn: (client: pg.Client) => Promise<T>): Promise<T> => {
      if (!admin) {
        admin = await adminClient(schema);
        admins.push(admin);
      }
      return fn(admin);
    };
    let admin: pg.Client | undefined;
    return {
      open: (options) =>
        options?.onBeforeCommit
          ? PostgresJournal.open(url, { onBeforeCommit: options.onBeforeCommit, env })
          : openStore(url, { postgres: { env } }),
      rawRows: () =>
        raw(async (c) =>
          (await c.query<EventRow>("SELECT * FROM events ORDER BY position")).rows.map(toStored),
        ),
      exec: (sql) => raw(async (c) => void (await c.query(sql))),
      corrupt: (streamId, version, data) =>
        raw(async (c) => {
          await c.query("BEGIN");
          await c.query("ALTER TABLE events DISABLE TRIGGER events_are_immutable");
          await c.query("UPDATE events SET data = $1 WHERE stream_id = $2 AND version = $3", [
            data,
            streamId,
            version,
          ]);
          await c.query("ALTER TABLE events ENABLE TRIGGER events_are_immutable");
          await c.query("COMMIT");
        }),
    };
  };

const cleanup = async () => {
  for (const client of admins.splice(0)) await client.end();
  await schemas.dropAll();
};
journalContract("PostgreSQL", freshStore(NO_KEYS), cleanup);
journalContract("PostgreSQL, payloads encrypted", freshStore(keyEnv(freshKey())), cleanup);
