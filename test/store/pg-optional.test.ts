import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { loadPostgresJournal } from "../../src/adapters/stores/postgres/load.js";
import { PostgresJournal } from "../../src/adapters/stores/postgres/PostgresJournal.js";
import { JournalUnavailable } from "../../src/runtime/errors.js";
import { useTempDir } from "../support/tmp.js";

/**
 * `pg` is an optional peer dependency, imported only for a postgres:// store. It stays installed
 * here (the PostgreSQL tests need it), so its absence is simulated by the loader's importer, which
 * fails with the error Node itself gives for a missing `pg` — taken from a real `import("pg")` in
 * a folder where no `pg` can be found. test/package/pack.test.ts checks a real install without it.
 */
const tempDir = useTempDir();

const nodeErrorForMissingPg = (): Error => {
  const result = spawnSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      "import('pg').then(() => console.log('{}'), (e) => console.log(JSON.stringify({ code: e.code, message: e.message })))",
    ],
    { cwd: tempDir(), encoding: "utf8" },
  );
  const seen = JSON.parse(result.stdout) as { code?: string; message?: string };
  if (!seen.code || !seen.message) throw new Error(`pg was found from a temp folder: ${result.stdout}`);
  return Object.assign(new Error(seen.message), { code: seen.code });
};

describe("pg is an optional peer dependency", () => {
  it("a missing pg is JournalUnavailable naming the package and the command that installs it", async () => {
    const missing = nodeErrorForMissingPg();
    expect(missing).toMatchObject({ code: "ERR_MODULE_NOT_FOUND" });
    const error = await loadPostgresJournal("postgres://app:****@db:5432/agents", () =>
      Promise.reject(missing),
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(JournalUnavailable);
    expect(error).toMatchObject({
      location: "postgres://app:****@db:5432/agents",
      hint: "Install it next to holdfast: npm install pg",
    });
    expect((error as JournalUnavailable).reason).toContain(
      "the package `pg` (an optional peer dependency of holdfast)",
    );
  });

  it("any other failure to load the PostgreSQL journal is passed on as it is", async () => {
    const other = Object.assign(new Error("Cannot find package 'pg-protocol' imported from /x.js"), {
      code: "ERR_MODULE_NOT_FOUND",
    });
    await expect(loadPostgresJournal("postgres://db/agents", () => Promise.reject(other))).rejects.toBe(
      other,
    );
  });

  it("with pg installed, the loader gives the PostgreSQL journal", async () => {
    expect(await loadPostgresJournal("postgres://db/agents")).toBe(PostgresJournal);
  });
});
