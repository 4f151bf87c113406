import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openStore } from "../../src/adapters/store.js";
import { LibsqlJournal } from "../../src/adapters/stores/libsql/LibsqlJournal.js";
import { toStored } from "../../src/adapters/stores/sql/rows.js";
import { freshKey, keyEnv, NO_KEYS } from "../support/keys.js";
import { type ContractStore, journalContract } from "./contract.js";

const dirs: string[] = [];

/** `env`: where the journals read their payload keys (encrypted or not). */
const freshStore =
  (env: Readonly<Record<string, string | undefined>>) => async (): Promise<ContractStore> => {
    const dir = mkdtempSync(join(tmpdir(), "holdfast-contract-"));
    dirs.push(dir);
    const path = join(dir, "journal.db");
    /** A second handle on the file, for what a test does behind the journal's back. */
    const raw = async <T>(fn: (journal: LibsqlJournal) => T): Promise<T> => {
      const journal = LibsqlJournal.open(path, { env });
      try {
        return fn(journal);
      } finally {
        await journal.close();
      }
    };
    return {
      open: (options) =>
        options?.onBeforeCommit
          ? Promise.resolve(LibsqlJournal.open(path, { onBeforeCommit: options.onBeforeCommit, env }))
          : openStore(path, { libsql: { env } }),
      rawRows: () =>
        raw((j) =>
          (j.unsafeDatabase().prepare("SELECT * FROM events ORDER BY position").all() as never[]).map(
            toStored,
          ),
        ),
      exec: (sql) => raw((j) => void j.unsafeDatabase().exec(sql)),
      corrupt: (streamId, version, data) =>
        raw((j) => {
          const db = j.unsafeDatabase();
          db.exec("DROP TRIGGER events_are_immutable");
          try {
            db.prepare("UPDATE events SET data = ? WHERE stream_id = ? AND version = ?").run(
              data,
              streamId,
              version,
            );
          } finally {
            db.exec(
              "CREATE TRIGGER events_are_immutable BEFORE UPDATE ON events BEGIN SELECT RAISE(ABORT, 'holdfast events are immutable: record a new event instead'); END",
            );
          }
        }),
    };
  };

const cleanup = async () => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
};
journalContract("libSQL", freshStore(NO_KEYS), cleanup);
journalContract("libSQL, payloads encrypted", freshStore(keyEnv(freshKey())), cleanup);
