import { randomBytes } from "node:crypto";
import { chmodSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "libsql";
import { describe, expect, it } from "vitest";
import { expectTwoLineError, runCli, useTempDir } from "./cliProcess.js";

const tempDir = useTempDir();

const COMMANDS: ReadonlyArray<ReadonlyArray<string>> = [["demo"], ["runs"], ["show", "r1"], ["events"]];

describe("journal unavailable", () => {
  it("--db in a folder that does not exist exits 3 with one reason line and one hint line", async () => {
    const db = join(tempDir(), "no", "such", "folder", "journal.db");
    for (const args of COMMANDS) {
      const result = await runCli([...args, "--db", db]);
      expect(result.code).toBe(3);
      expect(result.stderr).not.toContain("    at ");
      const { reason } = expectTwoLineError(result.stderr);
      expect(reason).toContain("does not exist");
    }
  });

  it("--db pointing at a file that is not a database exits 3 and leaves the file unchanged", async () => {
    const dir = tempDir();
    const db = join(dir, "notes.txt");
    const text = `not a database ${randomBytes(64).toString("hex")}\n`.repeat(40);
    writeFileSync(db, text);
    for (const args of COMMANDS) {
      const result = await runCli([...args, "--db", db]);
      expect(result.code).toBe(3);
      expect(expectTwoLineError(result.stderr).reason).toContain("not a database");
      expect(readFileSync(db, "utf8")).toBe(text);
    }
  });

  it("--db in a read-only folder exits 3 (checked where the folder really refuses writes)", async () => {
    const dir = tempDir();
    const db = join(dir, "journal.db");
    chmodSync(dir, 0o555);
    try {
      // root ignores folder permissions: then there is nothing to check here.
      let writable = true;
      try {
        writeFileSync(join(dir, "probe"), "");
        rmSync(join(dir, "probe"));
      } catch {
        writable = false;
      }
      if (!writable) {
        const result = await runCli(["demo", "--db", db]);
        expect(result.code).toBe(3);
        expect(expectTwoLineError(result.stderr).reason).toContain("not writable");
        expect(readdirSync(dir)).toEqual([]);
      }
    } finally {
      chmodSync(dir, 0o700);
    }
  });

  it("a journal written by a newer holdfast exits 3, says to upgrade, and is not changed", async () => {
    const db = join(tempDir(), "journal.db");
    expect((await runCli(["demo", "--db", db])).code).toBe(0);
    const raw = new Database(db);
    raw.pragma("user_version = 999");
    // Into the main file now, so its bytes alone are the journal to compare.
    raw.pragma("wal_checkpoint(TRUNCATE)");
    raw.close();
    const before = readFileSync(db);
    for (const args of COMMANDS) {
      const result = await runCli([...args, "--db", db]);
      expect(result.code).toBe(3);
      const { reason, hint } = expectTwoLineError(result.stderr);
      expect(reason).toContain("schema version 999");
      expect(hint).toContain("upgrade holdfast");
    }
    expect(readFileSync(db).equals(before)).toBe(true);
  });
});
